//! What the page shows about a synthetic layer's heads: how much each matters, how the output
//! drifts as they are pruned in either order, and the drift of the heads pruned now. Computed
//! from the per-head contributions a forward pass keeps, so nothing here runs attention again.

use super::heads::HeadSet;
use super::importance::{drift_curve, head_importance, mean_random_curve, Ranking};
use super::prune::{drift, Contributions, Drift};

/// Random orders averaged for the "pruned at random" curve.
pub const RANDOM_ORDERS: u32 = 8;

/// Every head's importance, and the drift curves of pruning least important first and at random.
#[derive(Clone, Debug, PartialEq)]
pub struct Importance {
    /// Relative L2 drift when each head alone is removed, and the heads in that order.
    pub ranking: Ranking,
    /// Drift after pruning the first k of the ranking, k = 0..=heads.
    pub ranked_curve: Vec<f64>,
    /// Mean drift after pruning k heads at random, k = 0..=heads.
    pub random_curve: Vec<f64>,
}

impl Importance {
    /// Measures the layer whose per-head contributions are `contributions` and whose full output
    /// is `full`; the random curve's orders come from `seed`.
    pub fn measure(contributions: &Contributions, full: &[f32], seed: u32) -> Self {
        let ranking = Ranking::new(head_importance(contributions, full));
        let ranked_curve =
            drift_curve(contributions, full, &ranking.ranked).iter().map(|d| d.rel_l2).collect();
        let random_curve = mean_random_curve(contributions, full, RANDOM_ORDERS, seed);
        Importance { ranking, ranked_curve, random_curve }
    }
}

/// Drift of the pruned output, and what producing it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct DriftView {
    /// Per-token and overall drift.
    pub drift: Drift,
    /// Heads still active.
    pub active: usize,
    /// All heads.
    pub total: usize,
    /// Milliseconds spent recomposing and measuring (no attention recomputed).
    pub elapsed_ms: f64,
}

impl DriftView {
    /// Heads pruned.
    pub fn pruned(&self) -> usize {
        self.total - self.active
    }
}

/// The output with only `heads` active, recomposed from `contributions`, against `full`;
/// `now` is a millisecond clock for the cost.
pub fn measure_drift(
    contributions: &Contributions,
    full: &[f32],
    heads: &HeadSet,
    now: impl Fn() -> f64,
) -> DriftView {
    let t0 = now();
    let output = contributions.recompose(heads);
    let drift = drift(full, &output, contributions.d_model);
    DriftView { drift, active: heads.active_count(), total: heads.len(), elapsed_ms: now() - t0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer() -> (Contributions, Vec<f32>) {
        // Four heads writing their own columns, of sizes 1, 3, 2, 0.5.
        let data = vec![
            1.0, 0.0, 0.0, 0.0, //
            0.0, 3.0, 0.0, 0.0, //
            0.0, 0.0, 2.0, 0.0, //
            0.0, 0.0, 0.0, 0.5,
        ];
        let c = Contributions { num_heads: 4, seq_len: 1, d_model: 4, data };
        let full = c.recompose(&HeadSet::all(4));
        (c, full)
    }

    #[test]
    fn importance_ranks_heads_and_both_curves_run_from_none_to_all() {
        let (c, full) = layer();
        let imp = Importance::measure(&c, &full, 3);
        assert_eq!(imp.ranking.ranked, vec![3, 0, 2, 1]);
        for curve in [&imp.ranked_curve, &imp.random_curve] {
            assert_eq!(curve.len(), 5);
            assert_eq!(curve[0], 0.0);
            assert!((curve[4] - 1.0).abs() < 1e-12);
        }
        // Least important first is the cheapest order at every k for orthogonal heads.
        for k in 0..=4 {
            assert!(imp.ranked_curve[k] <= imp.random_curve[k] + 1e-12, "k = {k}");
        }
    }

    #[test]
    fn drift_of_the_pruned_set_counts_its_heads() {
        let (c, full) = layer();
        let clock = std::cell::Cell::new(0.0);
        let tick = || {
            clock.set(clock.get() + 0.5);
            clock.get()
        };
        let view = measure_drift(&c, &full, &HeadSet::with_pruned(4, [1]), tick);
        assert_eq!((view.active, view.total, view.pruned(), view.elapsed_ms), (3, 4, 1, 0.5));
        let norm = (1.0f64 + 9.0 + 4.0 + 0.25).sqrt();
        assert!((view.drift.overall.rel_l2 - 3.0 / norm).abs() < 1e-6);
        let none = measure_drift(&c, &full, &HeadSet::all(4), || 0.0);
        assert_eq!((none.drift.overall.rel_l2, none.drift.overall.cosine), (0.0, 1.0));
    }
}
