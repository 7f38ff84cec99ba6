//! The one loop every long job runs through ([`drive`]): before each step the browser gets a
//! turn, the job stops if its ticket is no longer current (its input changed), and its progress
//! is published with the time left at the pace measured where it runs. Most jobs are plans of
//! pieces of work ([`Plan`], run by [`Planned`]); a job that is not (a timing) implements
//! [`Job`] itself.

use std::collections::VecDeque;

use super::engine::{Engine, Where};
use super::pool::Priority;
use super::ticket::Ticket;
use crate::jobs::work::{Done, Work};

/// How far a job has come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Units done (heads, evaluations, sentences, samples).
    pub done: usize,
    /// Units in all, done included.
    pub total: usize,
    /// The FLOPs left and where they run, when the job counts them.
    pub left: Option<(u64, Where)>,
}

/// What the page shows of a running job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Units done.
    pub done: usize,
    /// Units in all.
    pub total: usize,
    /// How long the rest should take at the pace measured where it runs ("about 14 s at the
    /// 27 GFLOP/s measured here"), once that pace is known and the rest is worth a word.
    pub estimate: Option<String>,
}

/// A long piece of work, done a step at a time.
// The page is single-threaded: its futures never move between threads, so no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Job {
    /// What it gives when it is done.
    type Output;
    /// Does the next step on `engine`; the result once nothing is left.
    async fn step(&mut self, engine: &Engine) -> Option<Self::Output>;
    /// How far it has come (where its pieces would run on `engine` now, for the time left).
    fn progress(&self, engine: &Engine) -> Progress;
}

/// Runs `job` on `engine` to its end, or until `ticket` stops being current (`None`): before
/// each step the browser gets a turn and `publish` gets the job and its status.
pub async fn drive<J: Job>(
    engine: &Engine,
    mut job: J,
    ticket: &Ticket,
    mut publish: impl FnMut(&J, Status),
) -> Option<J::Output> {
    loop {
        engine.host().turn().await;
        if !ticket.is_current() {
            return None;
        }
        let p = job.progress(engine);
        let estimate = p.left.and_then(|(flops, place)| engine.estimate(flops, place));
        publish(&job, Status { done: p.done, total: p.total, estimate });
        if let Some(out) = job.step(engine).await {
            // A job that finished after its input changed gives nothing anyone wants.
            return ticket.is_current().then_some(out);
        }
    }
}

/// What a plan needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next<T> {
    /// These pieces, in any place and order; their results come back in order.
    Run(Vec<Work>),
    /// Nothing: this is the result.
    Finished(T),
}

/// A job made of pieces of [`Work`]: it hands out a batch of pieces, takes their results one by
/// one in order, and plans the next batch once the last one is in.
pub trait Plan {
    /// What it gives when it is done.
    type Output;
    /// The next batch, or the result.
    fn next(&mut self) -> Next<Self::Output>;
    /// The result of the next piece of the current batch, in the batch's order.
    fn absorb(&mut self, done: Done);
    /// Every piece of the current batch is in.
    fn complete(&mut self) {}
    /// Where its pieces go among others waiting for busy workers.
    fn priority(&self) -> Priority {
        Priority::Background
    }
    /// How far it has come (where its pieces would run on `engine` now, for the time left).
    fn progress(&self, engine: &Engine) -> Progress;
}

/// A [`Plan`] as a [`Job`]: each step runs a batch's pieces all at once on the workers, or one
/// piece where they run one at a time (the page's thread, the GPU).
pub struct Planned<P: Plan> {
    plan: P,
    queue: VecDeque<Work>,
}

impl<P: Plan> Planned<P> {
    /// The job of `plan`.
    pub fn new(plan: P) -> Self {
        Planned { plan, queue: VecDeque::new() }
    }

    /// The plan, as far as it has come.
    pub fn plan(&self) -> &P {
        &self.plan
    }
}

impl<P: Plan> Job for Planned<P> {
    type Output = P::Output;

    async fn step(&mut self, engine: &Engine) -> Option<P::Output> {
        if self.queue.is_empty() {
            match self.plan.next() {
                Next::Finished(out) => return Some(out),
                Next::Run(pieces) if pieces.is_empty() => {
                    self.plan.complete();
                    return None;
                }
                Next::Run(pieces) => self.queue = pieces.into(),
            }
        }
        let count = engine.at_once(self.queue.make_contiguous());
        let batch: Vec<Work> = self.queue.iter().take(count).cloned().collect();
        // Workers that fail leave the batch where it was: the next step runs it here.
        let done = engine.run(batch, self.plan.priority()).await?;
        self.queue.drain(..count);
        done.into_iter().for_each(|d| self.plan.absorb(d));
        if self.queue.is_empty() {
            self.plan.complete();
        }
        None
    }

    fn progress(&self, engine: &Engine) -> Progress {
        self.plan.progress(engine)
    }
}
