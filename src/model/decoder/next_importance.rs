//! How much each of a decoder's heads matters to the token after a text, and how the next token
//! drifts as heads are removed: KL(full || pruned) of the next-token distribution, in nats.
//!
//! A head's importance is the KL when that head alone is removed (Michel et al.'s ablation, with
//! the decoder's own output as the yardstick). Every pass starts at the first layer that has a
//! pruned head: the layers before it are the full model's, kept once in a [`Trace`], so a head of
//! the last layer costs one layer's pass, not the whole model's.
//!
//! The work is made one pass at a time ([`NextSweep::step`]): the page yields to the browser
//! between passes and says how far it got.

use crate::attention::importance::{random_order, Ranking};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::decoder::gpt2::{Gpt2, Trace};
use crate::model::decoder::next_token::kl;

/// The full model's pass over a text, and the KL of the next token with any heads pruned.
#[derive(Clone, Debug, PartialEq)]
pub struct NextKl {
    trace: Trace,
}

impl NextKl {
    /// The full model's pass over `ids`.
    pub fn new(model: &Gpt2, kernel: Kernel, ids: &[u32]) -> NextKl {
        NextKl { trace: model.trace(kernel, ids) }
    }

    /// The full model's next-token logits.
    pub fn full_logits(&self) -> &[f32] {
        &self.trace.next_logits
    }

    /// KL(full || pruned) of the next token with only `heads` active (0 with every head, no pass).
    pub fn with(&self, model: &Gpt2, kernel: Kernel, heads: &HeadSet) -> f64 {
        let per_layer = model.spec.heads;
        match heads.pruned().next() {
            None => 0.0,
            Some(first) => {
                let pruned = model.next_logits_from(kernel, &self.trace, first / per_layer, heads);
                kl(&self.trace.next_logits, &pruned)
            }
        }
    }
}

/// How a sweep is laid out: the drift curve's points and its random orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// Steps between none and all heads pruned at which the curve is measured (at least 1).
    pub points: usize,
    /// Random orders whose mean is the random curve.
    pub random_orders: u32,
    /// The first random order's seed (the others follow it).
    pub seed: u32,
}

impl SweepPlan {
    /// The page's: 12 steps, the mean of 4 random orders.
    pub const PAGE: SweepPlan = SweepPlan { points: 12, random_orders: 4, seed: 1 };
}

/// The heads pruned at each measured point of a curve over `total` heads: 0, `total` and
/// `points - 1` evenly spaced counts between them (fewer when `total` is small).
pub fn curve_ks(total: usize, points: usize) -> Vec<usize> {
    let points = points.max(1);
    let mut ks: Vec<usize> = (0..=points).map(|i| (i * total + points / 2) / points).collect();
    ks.dedup();
    ks
}

/// The drift of the next token as heads are pruned least important first and at random.
#[derive(Clone, Debug, PartialEq)]
pub struct NextCurve {
    /// Heads pruned at each measured point, from 0 to all.
    pub ks: Vec<usize>,
    /// KL at each point, least important first.
    pub ranked: Vec<f64>,
    /// The mean KL of the random orders at each point.
    pub random: Vec<f64>,
    /// Random orders in the mean.
    pub random_orders: u32,
}

impl NextCurve {
    /// `values` (one per measured point) at every count from 0 to all heads, straight lines
    /// between the measured points: what a chart of the points draws.
    pub fn dense(&self, values: &[f64]) -> Vec<f64> {
        let total = *self.ks.last().unwrap_or(&0);
        (0..=total)
            .map(|k| {
                let i = self.ks.partition_point(|&m| m < k);
                if self.ks[i] == k || i == 0 {
                    return values[i];
                }
                let (k0, k1) = (self.ks[i - 1] as f64, self.ks[i] as f64);
                let t = (k as f64 - k0) / (k1 - k0);
                values[i - 1] + t * (values[i] - values[i - 1])
            })
            .collect()
    }
}

/// What a finished sweep found.
#[derive(Clone, Debug, PartialEq)]
pub struct NextImportance {
    /// Every head's KL when removed alone.
    pub ranking: Ranking,
    /// The drift curve.
    pub curve: NextCurve,
}

/// Every head's importance, then the drift curve, one pass per step.
#[derive(Clone, Debug)]
pub struct NextSweep {
    base: NextKl,
    plan: SweepPlan,
    total: usize,
    /// Whether the heads' importance came measured (only the curve is left to measure).
    given: bool,
    per_head: Vec<f64>,
    ks: Vec<usize>,
    /// The ranked order, then the random ones (once every head is measured).
    orders: Vec<Vec<usize>>,
    /// Per order, the KL at each measured point so far.
    values: Vec<Vec<f64>>,
}

impl NextSweep {
    /// A sweep over the text `ids` (runs the full model's pass).
    pub fn new(model: &Gpt2, kernel: Kernel, ids: &[u32], plan: SweepPlan) -> NextSweep {
        let total = model.spec.total_heads();
        NextSweep {
            base: NextKl::new(model, kernel, ids),
            plan,
            total,
            given: false,
            per_head: Vec::with_capacity(total),
            ks: curve_ks(total, plan.points),
            orders: Vec::new(),
            values: Vec::new(),
        }
    }

    /// A sweep over the text `ids` whose heads are already ranked by another measure (say, the
    /// loss on a text set): only the drift curve, in that order and at random, is measured.
    pub fn ranked_by(
        model: &Gpt2,
        kernel: Kernel,
        ids: &[u32],
        plan: SweepPlan,
        ranking: &Ranking,
    ) -> NextSweep {
        let mut sweep = NextSweep::new(model, kernel, ids, plan);
        assert_eq!(ranking.len(), sweep.total, "a ranking of the model's heads");
        sweep.per_head = ranking.per_head.clone();
        sweep.given = true;
        sweep
    }

    /// Passes in all (a point with no head pruned costs none but counts as one).
    pub fn passes(&self) -> usize {
        let heads = if self.given { 0 } else { self.total };
        heads + (1 + self.plan.random_orders as usize) * self.ks.len()
    }

    /// Passes made.
    pub fn done(&self) -> usize {
        let heads = if self.given { 0 } else { self.per_head.len() };
        heads + self.values.iter().map(Vec::len).sum::<usize>()
    }

    /// Makes the next pass; false once there is none left.
    pub fn step(&mut self, model: &Gpt2, kernel: Kernel) -> bool {
        let h = self.per_head.len();
        if h < self.total {
            let v = self.base.with(model, kernel, &HeadSet::with_pruned(self.total, [h]));
            self.per_head.push(v);
            return true;
        }
        if self.orders.is_empty() {
            self.orders.push(Ranking::new(self.per_head.clone()).ranked);
            self.orders
                .extend((0..self.plan.random_orders).map(|i| random_order(self.total, self.plan.seed + i)));
            self.values = vec![Vec::with_capacity(self.ks.len()); self.orders.len()];
        }
        let Some(o) = self.values.iter().position(|v| v.len() < self.ks.len()) else { return false };
        let k = self.ks[self.values[o].len()];
        let heads = HeadSet::with_pruned(self.total, self.orders[o][..k].iter().copied());
        let v = self.base.with(model, kernel, &heads);
        self.values[o].push(v);
        true
    }

    /// The result, once every pass is made.
    pub fn result(&self) -> Option<NextImportance> {
        if self.done() < self.passes() {
            return None;
        }
        let points = self.ks.len();
        let orders = self.plan.random_orders.max(1) as f64;
        let random =
            (0..points).map(|i| self.values[1..].iter().map(|v| v[i]).sum::<f64>() / orders).collect();
        Some(NextImportance {
            ranking: Ranking::new(self.per_head.clone()),
            curve: NextCurve {
                ks: self.ks.clone(),
                ranked: self.values[0].clone(),
                random,
                random_orders: self.plan.random_orders,
            },
        })
    }

    /// Runs every pass.
    pub fn run(mut self, model: &Gpt2, kernel: Kernel) -> NextImportance {
        while self.step(model, kernel) {}
        self.result().expect("every pass made")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_is_measured_at_both_ends_and_evenly_between() {
        assert_eq!(curve_ks(144, 12), (0..=12).map(|i| 12 * i).collect::<Vec<_>>());
        assert_eq!(curve_ks(8, 12), (0..=8).collect::<Vec<_>>());
        assert_eq!(curve_ks(10, 4), [0, 3, 5, 8, 10]);
        assert_eq!(curve_ks(1, 0), [0, 1]);
    }

    #[test]
    fn a_sweep_of_heads_ranked_by_another_measure_measures_only_the_curve() {
        use crate::model::spec::{Activation, ModelSpec};
        let spec = ModelSpec {
            layers: 2,
            heads: 2,
            d_model: 8,
            ffn: 12,
            vocab: 20,
            positions: 10,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        };
        let model = Gpt2::random(spec, 4);
        let ranking = Ranking::new(vec![0.4, 0.1, 0.3, 0.2]);
        let plan = SweepPlan { points: 4, random_orders: 1, seed: 2 };
        let mut sweep = NextSweep::ranked_by(&model, Kernel::Scalar, &[1, 5, 7, 2], plan, &ranking);
        assert_eq!((sweep.done(), sweep.passes()), (0, 2 * 5));
        let mut steps = 0;
        while sweep.step(&model, Kernel::Scalar) {
            steps += 1;
        }
        assert_eq!(steps, 10);
        let found = sweep.result().unwrap();
        assert_eq!(found.ranking, ranking);
        let base = NextKl::new(&model, Kernel::Scalar, &[1, 5, 7, 2]);
        let two_least = HeadSet::with_pruned(4, [1, 3]);
        assert_eq!(found.curve.ranked[2], base.with(&model, Kernel::Scalar, &two_least));
    }

    #[test]
    fn the_dense_curve_draws_straight_lines_between_the_points() {
        let c =
            NextCurve { ks: vec![0, 2, 6], ranked: vec![0.0, 1.0, 3.0], random: vec![], random_orders: 0 };
        assert_eq!(c.dense(&c.ranked), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
    }
}
