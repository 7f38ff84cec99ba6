//! How much each head matters, and how the output drifts as heads are pruned in some order.
//!
//! A head's importance is the drift caused by removing that head alone (relative L2 change of
//! the whole output). With the output kept as a sum of per-head contributions, removing head `h`
//! leaves `full - C_h`, so its importance is `|C_h| / |full|`: no forward pass needed.

use super::heads::HeadSet;
use super::prune::{Contributions, TokenDrift};
use super::stats::median;
use super::synthetic::hash32;

/// Relative L2 drift of the output when each head alone is removed, in head order.
pub fn head_importance(contributions: &Contributions, full: &[f32]) -> Vec<f64> {
    let norm_sq = |v: &[f32]| v.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>();
    let full_norm = norm_sq(full).sqrt();
    (0..contributions.num_heads)
        .map(|h| if full_norm > 0.0 { norm_sq(contributions.head(h)).sqrt() / full_norm } else { 0.0 })
        .collect()
}

/// Heads ordered least important first (ties broken by head index, so the order is stable).
pub fn least_important_first(importance: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..importance.len()).collect();
    order.sort_by(|&a, &b| importance[a].total_cmp(&importance[b]).then(a.cmp(&b)));
    order
}

/// Every head's importance (the change removing it alone causes, by some measure) and the heads
/// in order of it: the synthetic layer's and the trained model's rankings alike.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranking {
    /// Importance of each head, in head order.
    pub per_head: Vec<f64>,
    /// Heads, least important first.
    pub ranked: Vec<usize>,
}

impl Ranking {
    /// Ranks heads by `per_head`.
    pub fn new(per_head: Vec<f64>) -> Self {
        let ranked = least_important_first(&per_head);
        Ranking { per_head, ranked }
    }

    /// Number of heads ranked.
    pub fn len(&self) -> usize {
        self.per_head.len()
    }

    /// True when no head is ranked.
    pub fn is_empty(&self) -> bool {
        self.per_head.is_empty()
    }

    /// Head `h`'s rank, 1 for the most important; `None` for a head not ranked.
    pub fn rank(&self, h: usize) -> Option<usize> {
        Some(self.len() - self.ranked.iter().position(|&x| x == h)?)
    }

    /// The largest importance (0 without heads).
    pub fn max(&self) -> f64 {
        self.per_head.iter().copied().fold(0.0, f64::max)
    }

    /// The median importance.
    pub fn median(&self) -> Option<f64> {
        median(&self.per_head)
    }

    /// Head `h`'s importance as a share of the largest, 0 to 1.
    pub fn share(&self, h: usize) -> f64 {
        self.per_head.get(h).map_or(0.0, |v| v / self.max().max(f64::MIN_POSITIVE))
    }

    /// The `k` least important heads pruned, of all the heads ranked.
    pub fn least(&self, k: usize) -> HeadSet {
        HeadSet::with_pruned(self.len(), self.ranked.iter().take(k).copied())
    }
}

/// A random order of `num_heads` heads, determined by `seed` (Fisher-Yates on the counter-based
/// generator), for the "prune k at random" comparison.
pub fn random_order(num_heads: usize, seed: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..num_heads).collect();
    for i in (1..num_heads).rev() {
        let j = hash32(hash32(seed ^ 0x5eed_0f0d) ^ i as u32) as usize % (i + 1);
        order.swap(i, j);
    }
    order
}

/// Overall drift after pruning the first `k` heads of `order`, for every `k` from 0 to all.
/// Each step subtracts one more contribution from a running sum: `O(H n d)` in all.
pub fn drift_curve(contributions: &Contributions, full: &[f32], order: &[usize]) -> Vec<TokenDrift> {
    let mut pruned = full.to_vec();
    let mut curve = Vec::with_capacity(order.len() + 1);
    curve.push(overall(full, &pruned));
    for &h in order {
        contributions.take_out(h, &mut pruned);
        curve.push(overall(full, &pruned));
    }
    curve
}

/// The mean drift curve of `orders` random orders (seeds `seed`, `seed + 1`, ...): the
/// expected drift of pruning k heads at random, without one unlucky draw deciding the picture.
pub fn mean_random_curve(contributions: &Contributions, full: &[f32], orders: u32, seed: u32) -> Vec<f64> {
    let mut mean = vec![0.0; contributions.num_heads + 1];
    for s in 0..orders {
        let order = random_order(contributions.num_heads, seed.wrapping_add(s));
        for (m, d) in mean.iter_mut().zip(drift_curve(contributions, full, &order)) {
            *m += d.rel_l2 / orders as f64;
        }
    }
    mean
}

/// The drift of `pruned` from `full` over the whole matrix.
pub(super) fn overall(full: &[f32], pruned: &[f32]) -> TokenDrift {
    // Drift over the flattened matrix is a one-row drift of width len.
    super::prune::drift(full, pruned, full.len().max(1)).overall
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::HeadSet;

    fn fixture() -> (Contributions, Vec<f32>) {
        // Three heads of very different size: importance must rank them 1, 2, 0.
        let c =
            Contributions { num_heads: 3, seq_len: 1, d_model: 2, data: vec![3.0, 0.0, 0.0, 0.1, 1.0, 0.0] };
        let full = c.recompose(&HeadSet::all(3));
        (c, full)
    }

    #[test]
    fn importance_is_the_drift_of_removing_one_head() {
        let (c, full) = fixture();
        let imp = head_importance(&c, &full);
        for (h, importance) in imp.iter().enumerate() {
            let pruned = c.recompose(&HeadSet::with_pruned(3, [h]));
            let direct = crate::attention::drift(&full, &pruned, 2).overall.rel_l2;
            assert!((importance - direct).abs() < 1e-12, "head {h}: {importance} vs {direct}");
        }
        assert_eq!(least_important_first(&imp), vec![1, 2, 0]);
    }

    #[test]
    fn with_orthogonal_heads_least_important_first_drift_grows_monotonically() {
        // Each head writes its own columns: drift^2 after pruning a set is the sum of the set's
        // |C_h|^2 over |full|^2, so the curve must rise at every step, smallest steps first.
        let (h, d) = (6, 6);
        let sizes = [0.5f32, 3.0, 0.1, 2.0, 1.0, 0.25];
        let mut data = vec![0.0f32; h * d];
        for (head, size) in sizes.iter().enumerate() {
            data[head * d + head] = *size;
        }
        let c = Contributions { num_heads: h, seq_len: 1, d_model: d, data };
        let full = c.recompose(&HeadSet::all(h));
        let order = least_important_first(&head_importance(&c, &full));
        assert_eq!(order, vec![2, 5, 0, 4, 3, 1]);
        let curve = drift_curve(&c, &full, &order);
        let total: f64 = sizes.iter().map(|&s| (s as f64).powi(2)).sum();
        let mut removed = 0.0;
        for (k, point) in curve.iter().enumerate().skip(1) {
            removed += (sizes[order[k - 1]] as f64).powi(2);
            assert!((point.rel_l2 - (removed / total).sqrt()).abs() < 1e-6, "k = {k}");
            assert!(point.rel_l2 > curve[k - 1].rel_l2, "k = {k}");
        }
    }

    #[test]
    fn ties_keep_head_order_and_random_orders_are_permutations() {
        assert_eq!(least_important_first(&[0.5, 0.1, 0.5, 0.1]), vec![1, 3, 0, 2]);
        for n in [0, 1, 2, 12, 96] {
            let mut o = random_order(n, 7);
            assert_eq!(o, random_order(n, 7));
            o.sort();
            assert_eq!(o, (0..n).collect::<Vec<_>>());
        }
        assert_ne!(random_order(12, 1), random_order(12, 2));
    }

    #[test]
    fn a_ranking_orders_ranks_and_prunes_the_least_important() {
        let r = Ranking::new(vec![0.3, 0.1, 0.9, 0.2]);
        assert_eq!(r.ranked, vec![1, 3, 0, 2]);
        assert_eq!((r.rank(2), r.rank(1), r.rank(7)), (Some(1), Some(4), None));
        assert_eq!((r.max(), r.median()), (0.9, Some(0.25)));
        assert!((r.share(0) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.least(2), HeadSet::with_pruned(4, [1, 3]));
        assert_eq!(r.least(9).active_count(), 0);
        assert!(Ranking::new(vec![]).is_empty());
    }
}
