//! Michel et al.'s three pruning curves for a decoder, on the text set's loss: heads pruned in
//! steps of a tenth, least important first by the gate gradients of the full model (one-shot),
//! by gradients measured again after each step with the heads pruned so far (iterative, as
//! Michel et al. prune), and in a random order. Each point is the mean loss per predicted token
//! over the text set's passages (its perplexity is `e` to it).
//!
//! The work is made one passage at a time ([`CurveRun::step`]), each passage once per point:
//! the ends (no head pruned, every head pruned) are the same for the three orders and measured
//! once, and the iterative order's first step is the one-shot's (the same gradients), measured
//! once.

use super::decoder::{set_passages, SetGradient, SetLoss, Steps};
use crate::attention::importance::random_order;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::decoder::next_importance::curve_ks;
use crate::model::decoder::texts::TextSet;
use crate::model::decoder::Decoder;

/// Steps from none to every head pruned: a tenth at a time, as Michel et al.'s iterative pruning.
pub const CURVE_STEPS: usize = 10;

impl DecoderCurves {
    /// The curves as JSON, for a test to read off the page.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "ks": self.ks, "iterative": self.iterative, "one_shot": self.one_shot,
            "random": self.random, "passages": self.passages,
        })
        .to_string()
    }

    /// The three curves at Michel et al.'s 40 %, in a sentence (the first point at or past it).
    pub fn sentence(&self) -> String {
        let total = *self.ks.last().unwrap_or(&0);
        let at = self.ks.iter().position(|&k| 5 * k >= 2 * total).unwrap_or(0);
        let p = |v: f64| super::decoder::perplexity_text(v.exp());
        format!(
            "On {} passages of {}: perplexity {} with every head; with {} of {total} pruned, {} iterative, {} one-shot, {} at random.",
            self.passages,
            crate::model::decoder::texts::NAME,
            p(self.iterative[0]),
            self.ks[at],
            p(self.iterative[at]),
            p(self.one_shot[at]),
            p(self.random[at])
        )
    }
}

/// The three curves: the mean loss (nats per token) at each measured point.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderCurves {
    /// Heads pruned at each point, 0 to all.
    pub ks: Vec<usize>,
    /// Gradients measured again after each step.
    pub iterative: Vec<f64>,
    /// The full model's gradients.
    pub one_shot: Vec<f64>,
    /// A random order.
    pub random: Vec<f64>,
    /// Passages in the text set read.
    pub passages: usize,
}

/// One pass over the text set: gate gradients or the loss, with some heads.
#[derive(Clone, Debug)]
enum Work {
    Gradient(SetGradient),
    Loss(SetLoss),
}

/// The curves' measurement, a passage at a time.
#[derive(Clone, Debug)]
pub struct CurveRun {
    passages: Vec<Vec<u32>>,
    ks: Vec<usize>,
    total: usize,
    random: Vec<usize>,
    /// The full model's order, least important first, once measured.
    one_shot: Option<Vec<usize>>,
    /// The heads the iterative order has pruned so far.
    iterative_heads: HeadSet,
    /// Per order (iterative, one-shot, random), the points measured.
    values: [Vec<f64>; 3],
    /// The pass in flight.
    work: Option<Work>,
    done: usize,
}

impl CurveRun {
    /// The curves of `decoder` on `set` (the random order from `seed`); `None` when no passage
    /// has two tokens (nothing to predict).
    pub fn new(decoder: &Decoder, set: &TextSet, seed: u32) -> Option<CurveRun> {
        let total = decoder.spec().total_heads();
        let passages = set_passages(decoder, set);
        (!passages.is_empty()).then(|| CurveRun {
            passages,
            ks: curve_ks(total, CURVE_STEPS),
            total,
            random: random_order(total, seed),
            one_shot: None,
            iterative_heads: HeadSet::all(total),
            values: [vec![], vec![], vec![]],
            work: None,
            done: 0,
        })
    }

    /// Passage passes in all: the gradients of the full model and of each iterative step before
    /// the last, and each order's points between the shared ends.
    pub fn passes(&self) -> usize {
        let points = self.ks.len();
        let gradients = 1 + points.saturating_sub(3);
        let shared_first_step = usize::from(points >= 3);
        let losses = 2 + 3 * points.saturating_sub(2) - shared_first_step;
        (gradients + losses) * self.passages.len()
    }

    /// Passage passes made.
    pub fn done(&self) -> usize {
        self.done
    }

    /// How far it got, in words, after `worked_ms` of work.
    pub fn progress_text(&self, worked_ms: f64) -> String {
        format!(
            "Computing the curves: {} of {} passes over a passage{}…",
            self.done,
            self.passes(),
            super::decoder::time_left(self.done, self.passes(), worked_ms)
        )
    }

    /// The next pass over the set, or `None` when every point is measured.
    fn next_work(&mut self) -> Option<Work> {
        let (ks, total, last) = (&self.ks, self.total, self.ks.len() - 1);
        let passages = || self.passages.clone();
        let loss = |heads: HeadSet| Some(Work::Loss(SetLoss::of(passages(), &heads)));
        let gradient = |heads: HeadSet| Some(Work::Gradient(SetGradient::of(passages(), &heads)));
        let Some(one_shot) = &self.one_shot else { return gradient(HeadSet::all(total)) };
        if self.values[0].len() == ks.len() {
            return None;
        }
        if self.values[0].is_empty() {
            return loss(HeadSet::all(total));
        }
        if self.values[0].len() == last && self.values[1].len() == last && self.values[2].len() == last {
            return loss(HeadSet::with_pruned(total, 0..total));
        }
        if self.values[1].len() < last {
            return loss(HeadSet::with_pruned(total, one_shot[..ks[self.values[1].len()]].iter().copied()));
        }
        if self.values[2].len() < last {
            return loss(HeadSet::with_pruned(
                total,
                self.random[..ks[self.values[2].len()]].iter().copied(),
            ));
        }
        let i = self.values[0].len();
        if self.iterative_heads.pruned_count() < ks[i] {
            return gradient(self.iterative_heads.clone());
        }
        loss(self.iterative_heads.clone())
    }

    /// Finishes `work`: a ranking orders the next step, a loss is a point.
    fn finish(&mut self, work: Work) {
        match work {
            Work::Gradient(job) => {
                let (heads, order) = (job.heads(), job.found().expect("every passage read").ranked);
                // The full model's gradients are the one-shot order and the iterative order's
                // first step; later ones prune the iterative order's next step.
                let i = if self.one_shot.is_none() { 1 } else { self.values[0].len() };
                let need = self.ks[i] - heads.pruned_count();
                let next: Vec<usize> =
                    order.iter().copied().filter(|&h| heads.is_active(h)).take(need).collect();
                self.iterative_heads = HeadSet::with_pruned(self.total, heads.pruned().chain(next));
                self.one_shot.get_or_insert(order);
            }
            Work::Loss(job) => {
                let found = job.found().expect("every passage read");
                let v = found.mean_loss;
                match found.heads.pruned_count() {
                    0 => self.values.iter_mut().for_each(|c| c.push(v)),
                    n if n == self.total => self.values.iter_mut().for_each(|c| c.push(v)),
                    _ if self.values[1].len() < self.ks.len() - 1 => {
                        // The first step is the iterative order's too (the same gradients).
                        if self.values[1].len() == 1 {
                            self.values[0].push(v);
                        }
                        self.values[1].push(v)
                    }
                    _ if self.values[2].len() < self.ks.len() - 1 => self.values[2].push(v),
                    _ => self.values[0].push(v),
                }
            }
        }
    }
}

impl Steps for CurveRun {
    type Found = DecoderCurves;

    /// Reads one passage of the pass in flight (starting the next pass when none is); false once
    /// every point is measured.
    fn step(&mut self, decoder: &Decoder, kernel: Kernel) -> bool {
        let Some(mut work) = self.work.take().or_else(|| self.next_work()) else { return false };
        match &mut work {
            Work::Gradient(job) => job.step(decoder, kernel),
            Work::Loss(job) => job.step(decoder, kernel),
        };
        self.done += 1;
        let finished = match &work {
            Work::Gradient(job) => job.progress().0 == job.progress().1,
            Work::Loss(job) => job.progress().0 == job.progress().1,
        };
        if finished {
            self.finish(work);
        } else {
            self.work = Some(work);
        }
        true
    }

    /// The curves, once every point is measured.
    fn found(&self) -> Option<DecoderCurves> {
        // The last point measured is every head pruned, the end of all three curves.
        if self.values[0].len() < self.ks.len() {
            return None;
        }
        let [iterative, one_shot, random] = self.values.clone();
        Some(DecoderCurves {
            ks: self.ks.clone(),
            iterative,
            one_shot,
            random,
            passages: self.passages.len(),
        })
    }
}
