//! Michel et al.'s three pruning curves for a decoder, on the text set's loss, as a job
//! ([`TextSetCurves`]): heads pruned in steps of a tenth, least important first by the gate
//! gradients of the full model (one-shot), by gradients measured again after each step with the
//! heads pruned so far (iterative, as Michel et al. prune), and in a random order. Each point is
//! the mean loss per predicted token over the text set's passages (its perplexity is `e` to it).
//!
//! Each measurement is one pass over the passages (`super::text_set`'s, a piece per passage):
//! the ends (no head pruned, every head pruned) are the same for the three orders and measured
//! once, and the iterative order's first step is the one-shot's (the same gradients), measured
//! once. A gradients pass's forward pass gives the loss where it is taken, so the iterative
//! order's points come with its gradients: 9 gradient and 19 loss passes for 11 points (28
//! loss passes before; BENCHMARKS.md section 23).

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
    /// iterative step but the last two (whose next steps need none), and the points no
    /// gradients pass gives: the last iterative step's, the one-shot and random orders' between
    /// the shared ends, and every head pruned.
    fn planned(&self) -> [usize; 2] {
        let points = self.ks.len();
        [points.saturating_sub(2).max(1), (2 * points).saturating_sub(3).max(1)]
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

    /// Which point of the curves `heads` (the iterative order's so far) stands at.
    fn step_of(&self, heads: &HeadSet) -> usize {
        let pruned = heads.pruned_count();
        self.ks.iter().position(|&k| k == pruned).expect("the iterative order stops at the curves' points")
    }

    /// The next pass over the set, or `None` when every point is measured. The iterative order
    /// first: a gradients pass at the heads pruned so far gives the loss there (its forward
    /// pass's) and the next step's heads; then the other orders' points, then every head pruned.
    fn next_pass(&self) -> Option<(Measure, HeadSet)> {
        let (ks, total, last) = (&self.ks, self.total, self.ks.len() - 1);
        let Some(one_shot) = &self.one_shot else { return Some((Measure::Gradients, HeadSet::all(total))) };
        let loss = |heads: HeadSet| Some((Measure::Loss, heads));
        let [iterative, shot, random] = [0, 1, 2].map(|o| self.values[o].len());
        if iterative < last {
            // The step before every head is pruned needs no next step: its loss alone.
            return match self.step_of(&self.iterative_heads) + 1 < last {
                true => Some((Measure::Gradients, self.iterative_heads.clone())),
                false => loss(self.iterative_heads.clone()),
            };
        }
        if shot < last {
            return loss(HeadSet::with_pruned(total, one_shot[..ks[shot]].iter().copied()));
        }
        if random < last {
            return loss(HeadSet::with_pruned(total, self.random[..ks[random]].iter().copied()));
        }
        (iterative < ks.len()).then(|| (Measure::Loss, HeadSet::with_pruned(total, 0..total)))
    }

    /// The iterative order's next point: its first is every order's (no head pruned), its
    /// second the one-shot order's too (the full model's gradients pick both).
    fn record_iterative(&mut self, v: f64) {
        match self.values[0].len() {
            0 => self.values.iter_mut().for_each(|c| c.push(v)),
            1 => self.values[..2].iter_mut().for_each(|c| c.push(v)),
            _ => self.values[0].push(v),
        }
    }

    /// Takes a finished pass: gradients give the iterative order's point where they were taken
    /// and order its next step; a loss is a point.
    fn finish(&mut self, measure: Measure, pass: &SetPass) {
        let heads = pass.heads().cloned().unwrap_or_default();
        let last = self.ks.len() - 1;
        match measure {
            Measure::Gradients => {
                let step = self.step_of(&heads);
                debug_assert_eq!(self.values[0].len(), step, "gradients where the iterative order stands");
                self.record_iterative(pass.perplexity().mean_loss);
                let order = pass.ranking().ranked;
                // The full model's gradients are the one-shot order and the iterative order's
                // first step; later ones prune the iterative order's next step.
                let need = self.ks[step + 1] - heads.pruned_count();
                let next: Vec<usize> =
                    order.iter().copied().filter(|&h| heads.is_active(h)).take(need).collect();
                self.iterative_heads = HeadSet::with_pruned(self.total, heads.pruned().chain(next));
                self.one_shot.get_or_insert(order);
                self.made[0] += 1;
            }
            Measure::Loss => {
                let v = pass.perplexity().mean_loss;
                match self.values.each_ref().map(Vec::len) {
                    [i, ..] if i < last => self.record_iterative(v),
                    [_, shot, _] if shot < last => self.values[1].push(v),
                    [_, _, random] if random < last => self.values[2].push(v),
                    // Every head pruned: the end of all three.
                    _ => self.values.iter_mut().for_each(|c| c.push(v)),
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
