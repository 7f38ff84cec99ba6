//! How much each of a decoder's heads matters to the token after a text, and how the next token
//! drifts as heads are removed: KL(full || pruned) of the next-token distribution, in nats.
//!
//! A head's importance is the KL when that head alone is removed (Michel et al.'s ablation, with
//! the decoder's own output as the yardstick). Every pass starts at the first layer that has a
//! pruned head: the layers before it are the full model's, kept once in a [`Residuals`], so a head of
//! the last layer costs one layer's pass, not the whole model's.
//!
//! The passes are `crate::jobs::decoder::importance`'s job: each head alone, then the curve's
//! points, dealt to the workers or made one at a time between the page's turns.

use crate::attention::importance::Ranking;
use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::decoder::gpt2::{Gpt2, Residuals};
use crate::model::decoder::next_token::kl;

/// The full model's pass over a text, and the KL of the next token with any heads pruned.
#[derive(Clone, Debug, PartialEq)]
pub struct NextKl {
    trace: Residuals,
}

impl NextKl {
    /// The full model's pass over `ids`.
    pub fn new(model: &Gpt2, kernel: Kernel, ids: &[u32]) -> NextKl {
        at_once(NextKl::new_in_turns(model, kernel, ids, &AtOnce))
    }

    /// [`NextKl::new`] with the pass in `turns`' steps.
    pub async fn new_in_turns(model: &Gpt2, kernel: Kernel, ids: &[u32], turns: &dyn Turns) -> NextKl {
        NextKl { trace: model.residuals_in_turns(kernel, ids, turns).await }
    }

    /// The full model's next-token logits.
    pub fn full_logits(&self) -> &[f32] {
        &self.trace.next_logits
    }

    /// KL(full || pruned) of the next token with only `heads` active (0 with every head, no pass).
    pub fn with(&self, model: &Gpt2, kernel: Kernel, heads: &HeadSet) -> f64 {
        at_once(self.with_in_turns(model, kernel, heads, &AtOnce))
    }

    /// [`NextKl::with`] with the pass in `turns`' steps.
    pub async fn with_in_turns(
        &self,
        model: &Gpt2,
        kernel: Kernel,
        heads: &HeadSet,
        turns: &dyn Turns,
    ) -> f64 {
        let per_layer = model.spec.heads;
        match heads.pruned().next() {
            None => 0.0,
            Some(first) => {
                let from = first / per_layer;
                let pruned = model.next_logits_from_in_turns(kernel, &self.trace, from, heads, turns).await;
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
    fn the_dense_curve_draws_straight_lines_between_the_points() {
        let c =
            NextCurve { ks: vec![0, 2, 6], ranked: vec![0.0, 1.0, 3.0], random: vec![], random_orders: 0 };
        assert_eq!(c.dense(&c.ranked), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
    }
}
