//! Michel et al.'s three pruning curves for a decoder, on the text set's loss, as a job
//! ([`TextSetCurves`]): heads pruned in steps of a tenth, least important first by the gate
//! gradients of the full model (one-shot), by gradients measured again after each step with the
//! heads pruned so far (iterative, as Michel et al. prune), and in a random order. Each point is
//! the mean loss per predicted token over the text set's passages (its perplexity is `e` to it).
//!
//! Each measurement is one pass over the passages (`super::text_set`'s, a piece per passage):
//! the ends (no head pruned, every head pruned) are the same for the three orders and measured
//! once, and the iterative order's first step is the one-shot's (the same gradients), measured
//! once.

use super::text_set::SetPass;
use crate::attention::importance::random_order;
use crate::attention::HeadSet;
use crate::jobs::driver::{Next, Plan, Progress};
use crate::jobs::engine::Engine;
use crate::jobs::work::{Done, Piece, GRADIENT_COST};
use crate::model::decoder::cost::pass_flops;
use crate::model::decoder::next_importance::curve_ks;
use crate::model::decoder::Decoder;

/// Steps from none to every head pruned: a tenth at a time, as Michel et al.'s iterative pruning.
pub const CURVE_STEPS: usize = 10;

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
        let p = |v: f64| super::perplexity_text(v.exp());
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

/// What one pass over the set measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Measure {
    /// The heads' gate gradients: the next step of an order.
    Gradients,
    /// The loss: a point.
    Loss,
}

/// The three curves' measurements, a pass over the set at a time.
pub struct TextSetCurves {
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
    /// The pass out (or about to be), and what it measures.
    pass: Option<(Measure, SetPass)>,
    /// Passes over the set made, of each kind.
    made: [usize; 2],
}

impl TextSetCurves {
    /// The curves of a decoder of `total` heads on `passages` (token ids, 2 or more each), the
    /// random order from `seed`; `None` without a passage (nothing to predict).
    pub fn new(passages: Vec<Vec<u32>>, total: usize, seed: u32) -> Option<TextSetCurves> {
        (!passages.is_empty()).then(|| TextSetCurves {
            passages,
            ks: curve_ks(total, CURVE_STEPS),
            total,
            random: random_order(total, seed),
            one_shot: None,
            iterative_heads: HeadSet::all(total),
            values: [vec![], vec![], vec![]],
            pass: None,
            made: [0, 0],
        })
    }

    /// Passes over the set in all, of each kind: the gradients of the full model and of each
    /// iterative step before the last, and each order's points between the shared ends.
    fn planned(&self) -> [usize; 2] {
        let points = self.ks.len();
        let gradients = 1 + points.saturating_sub(3);
        let shared_first_step = usize::from(points >= 3);
        [gradients, 2 + 3 * points.saturating_sub(2) - shared_first_step]
    }

    /// Passage passes in all.
    pub fn passes(&self) -> usize {
        self.planned().iter().sum::<usize>() * self.passages.len()
    }

    /// Passage passes made.
    pub fn done(&self) -> usize {
        let in_flight = self.pass.as_ref().map_or(0, |(_, p)| p.done());
        self.made.iter().sum::<usize>() * self.passages.len() + in_flight
    }

    /// The next pass over the set, or `None` when every point is measured.
    fn next_pass(&self) -> Option<(Measure, HeadSet)> {
        let (ks, total, last) = (&self.ks, self.total, self.ks.len() - 1);
        let Some(one_shot) = &self.one_shot else { return Some((Measure::Gradients, HeadSet::all(total))) };
        let loss = |heads: HeadSet| Some((Measure::Loss, heads));
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
            return Some((Measure::Gradients, self.iterative_heads.clone()));
        }
        loss(self.iterative_heads.clone())
    }

    /// Takes a finished pass: gradients order the next step, a loss is a point.
    fn finish(&mut self, measure: Measure, pass: &SetPass) {
        let heads = pass.heads().cloned().unwrap_or_default();
        match measure {
            Measure::Gradients => {
                let order = pass.ranking().ranked;
                // The full model's gradients are the one-shot order and the iterative order's
                // first step; later ones prune the iterative order's next step.
                let i = if self.one_shot.is_none() { 1 } else { self.values[0].len() };
                let need = self.ks[i] - heads.pruned_count();
                let next: Vec<usize> =
                    order.iter().copied().filter(|&h| heads.is_active(h)).take(need).collect();
                self.iterative_heads = HeadSet::with_pruned(self.total, heads.pruned().chain(next));
                self.one_shot.get_or_insert(order);
                self.made[0] += 1;
            }
            Measure::Loss => {
                let v = pass.perplexity().mean_loss;
                match heads.pruned_count() {
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
                self.made[1] += 1;
            }
        }
    }

    /// The curves, once every point is measured (the last is every head pruned, the end of all
    /// three).
    fn found(&self) -> DecoderCurves {
        let [iterative, one_shot, random] = self.values.clone();
        DecoderCurves { ks: self.ks.clone(), iterative, one_shot, random, passages: self.passages.len() }
    }
}

impl Plan<Decoder> for TextSetCurves {
    type Output = DecoderCurves;

    fn next(&mut self) -> Next<DecoderCurves> {
        if let Some((measure, pass)) = self.pass.take() {
            self.finish(measure, &pass);
        }
        match self.next_pass() {
            None => Next::Finished(self.found()),
            Some((measure, heads)) => {
                let pass = match measure {
                    Measure::Gradients => SetPass::gradients(&self.passages, &heads),
                    Measure::Loss => SetPass::losses(&self.passages, &heads),
                };
                let pieces = pass.pieces();
                self.pass = Some((measure, pass));
                Next::Run(pieces)
            }
        }
    }

    fn absorb(&mut self, done: Done) {
        if let Some((_, pass)) = &mut self.pass {
            pass.absorb(done);
        }
    }

    fn progress(&self, engine: &Engine<Decoder>) -> Progress {
        let spec = engine.spec();
        let set: u64 = self.passages.iter().map(|p| pass_flops(spec, p.len())).sum();
        let [gradients, losses] = self.planned();
        let out = |m: Measure| usize::from(self.pass.as_ref().is_some_and(|(k, _)| *k == m));
        let to_come =
            GRADIENT_COST * set * gradients.saturating_sub(self.made[0] + out(Measure::Gradients)) as u64
                + set * losses.saturating_sub(self.made[1] + out(Measure::Loss)) as u64;
        let current = self.pass.as_ref().map_or(0, |(_, p)| p.left(engine));
        let probe = Piece::Losses { heads: HeadSet::all(self.total), passages: self.passages[..1].to_vec() };
        Progress {
            done: self.done(),
            total: self.passes(),
            left: Some((to_come + current, engine.place_of(&probe))),
        }
    }
}
