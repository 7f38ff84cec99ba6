//! The one loop every long job of either family runs through ([`drive`]): before each step the
//! browser gets a turn, the job stops if its ticket is no longer current (its input changed, or
//! the part of the page that wanted it is gone), and its progress is published with the time
//! left at the pace measured where it runs. Most jobs are plans of pieces of work ([`Plan`], run
//! by [`Planned`]); a job that is not (a timing) implements [`Job`] itself.

use std::collections::VecDeque;

use super::engine::{Engine, Family, Where};
use super::host::LocalFuture;
use super::pool::Priority;
use super::ticket::Ticket;
use crate::jobs::work::{Done, Piece};

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
pub trait Job<F: Family> {
    /// What it gives when it is done.
    type Output;
    /// Does the next step on `engine`; the result once nothing is left.
    async fn step(&mut self, engine: &Engine<F>) -> Option<Self::Output>;
    /// How far it has come (where its pieces would run on `engine` now, for the time left).
    fn progress(&self, engine: &Engine<F>) -> Progress;
}

/// Runs `job` on `engine` to its end, or until `ticket` stops being current (`None`): before
/// each step the browser gets a turn and `publish` gets the job and its status.
pub async fn drive<F: Family, J: Job<F>>(
    engine: &Engine<F>,
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
    Run(Vec<Piece>),
    /// Nothing: this is the result.
    Finished(T),
}

/// A job made of pieces of [`Piece`]: it hands out a batch of pieces, takes their results one by
/// one in order, and plans the next batch once the last one is in.
pub trait Plan<F: Family> {
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
    fn progress(&self, engine: &Engine<F>) -> Progress;
}

/// A plan of any kind with its output boxed: a page that drives plans of several kinds drives
/// them all through one instantiation of [`drive`] ([`boxed`]; each instantiation is its own
/// code in the page's wasm, tens of kilobytes among them).
pub type AnyPlan<F> = Box<dyn Plan<F, Output = Box<dyn std::any::Any>>>;

/// Runs `plan` on `engine` as [`drive`] runs a job, publishing each status to `publish`: the
/// plan boxed as an [`AnyPlan`] and driven by one boxed future per family, so that every kind
/// of plan a page starts shares one copy of the driver's code (a copy for each was tens of
/// kilobytes of the page's wasm); its result taken back by its type.
pub async fn drive_plan<F: Family, P: Plan<F> + 'static>(
    engine: &Engine<F>,
    plan: P,
    ticket: &Ticket,
    publish: &mut dyn FnMut(Status),
) -> Option<P::Output> {
    let found = drive_any(engine, boxed(plan), ticket, publish).await?;
    found.downcast::<P::Output>().ok().map(|out| *out)
}

/// [`drive`] of an [`AnyPlan`], as one boxed future (for a page that takes the result back by
/// its type itself: [`drive_plan`]).
pub fn drive_any<'a, F: Family>(
    engine: &'a Engine<F>,
    plan: AnyPlan<F>,
    ticket: &'a Ticket,
    publish: &'a mut dyn FnMut(Status),
) -> LocalFuture<'a, Option<Box<dyn std::any::Any>>> {
    Box::pin(drive(engine, Planned::new(plan), ticket, move |_, status| publish(status)))
}

/// `plan` as an [`AnyPlan`].
pub fn boxed<F: Family, P: Plan<F> + 'static>(plan: P) -> AnyPlan<F> {
    Box::new(Boxed(plan))
}

/// A plan whose output is boxed.
struct Boxed<P>(P);

impl<F: Family, P: Plan<F>> Plan<F> for Boxed<P>
where
    P::Output: 'static,
{
    type Output = Box<dyn std::any::Any>;

    fn next(&mut self) -> Next<Self::Output> {
        match self.0.next() {
            Next::Run(pieces) => Next::Run(pieces),
            Next::Finished(out) => Next::Finished(Box::new(out)),
        }
    }

    fn absorb(&mut self, done: Done) {
        self.0.absorb(done)
    }

    fn complete(&mut self) {
        self.0.complete()
    }

    fn priority(&self) -> Priority {
        self.0.priority()
    }

    fn progress(&self, engine: &Engine<F>) -> Progress {
        self.0.progress(engine)
    }
}

impl<F: Family, P: Plan<F> + ?Sized> Plan<F> for Box<P> {
    type Output = P::Output;

    fn next(&mut self) -> Next<Self::Output> {
        (**self).next()
    }

    fn absorb(&mut self, done: Done) {
        (**self).absorb(done)
    }

    fn complete(&mut self) {
        (**self).complete()
    }

    fn priority(&self) -> Priority {
        (**self).priority()
    }

    fn progress(&self, engine: &Engine<F>) -> Progress {
        (**self).progress(engine)
    }
}

/// A [`Plan`] as a [`Job`]: each step runs a batch's pieces all at once on the workers, or one
/// piece where they run one at a time (the page's thread, the GPU).
pub struct Planned<P> {
    plan: P,
    queue: VecDeque<Piece>,
}

impl<P> Planned<P> {
    /// The job of `plan`.
    pub fn new(plan: P) -> Self {
        Planned { plan, queue: VecDeque::new() }
    }

    /// The plan, as far as it has come.
    pub fn plan(&self) -> &P {
        &self.plan
    }
}

impl<F: Family, P: Plan<F>> Job<F> for Planned<P> {
    type Output = P::Output;

    async fn step(&mut self, engine: &Engine<F>) -> Option<P::Output> {
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
        let batch: Vec<Piece> = self.queue.iter().take(count).cloned().collect();
        // Workers that fail leave the batch where it was: the next step runs it here.
        let done = engine.run(batch, self.plan.priority()).await?;
        self.queue.drain(..count);
        done.into_iter().for_each(|d| self.plan.absorb(d));
        if self.queue.is_empty() {
            self.plan.complete();
        }
        None
    }

    fn progress(&self, engine: &Engine<F>) -> Progress {
        self.plan.progress(engine)
    }
}
