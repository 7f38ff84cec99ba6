//! What the page shows about a synthetic layer's heads: how much each matters, how the output
//! drifts as they are pruned in either order, and the drift of the heads pruned now. Computed
//! from the per-head contributions a forward pass keeps, so nothing here runs attention again.

use super::heads::HeadSet;
use super::importance::{overall, random_order, Ranking};
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
        Measuring::new(contributions, full, seed).finish()
    }

    /// Claim 3 on this layer, in words that read right for any head count: the drift of one
    /// head alone (least and most important), then of pruning the least important fifth (at
    /// least one head, never all) against as many at random. A single head has nothing to prune
    /// beside it, and the sentence says so.
    pub fn claim_sentence(&self) -> Option<String> {
        let (r, heads) = (&self.ranking, self.ranking.len());
        let (least, most) = (r.per_head[*r.ranked.first()?], r.max());
        if heads == 1 {
            return Some(format!(
                "This layer has a single head: removing it removes the attention's whole output (it moves by {least:.3}, relative L2), so there is no head to prune beside another. Give it more heads to test the claim."
            ));
        }
        let k = (((heads as f64) * 0.2).round() as usize).clamp(1, heads - 1);
        let (ranked, random) = (self.ranked_curve.get(k)?, self.random_curve.get(k)?);
        Some(format!(
            "Here, removing one head alone moves the output by {least:.3} (least important) to {most:.3} \
             (most important), relative L2. Pruning the {} of {heads} heads ({:.0} %) moves it by \
             {ranked:.3}; {} at random, by {random:.3} on average.",
            if k == 1 { "least important".to_string() } else { format!("{k} least important") },
            100.0 * k as f64 / heads as f64,
            heads_count(k),
        ))
    }
}

/// "1 head", "k heads".
pub fn heads_count(k: usize) -> String {
    if k == 1 {
        "1 head".to_string()
    } else {
        format!("{k} heads")
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

/// [`Importance::measure`] in steps that each read one head's contribution once (a step's work
/// is `O(n d)`, whatever the head count), so that the page's thread can give the browser a turn
/// between them: each head's norm, then the drift curve of the heads least important first and
/// of [`RANDOM_ORDERS`] random orders, one head pruned per step. The same sums in the same order
/// as [`importance::drift_curve`](super::importance::drift_curve) and
/// [`importance::mean_random_curve`](super::importance::mean_random_curve), so the same bits.
pub struct Measuring<'a> {
    contributions: &'a Contributions,
    full: &'a [f32],
    seed: u32,
    full_norm: f64,
    per_head: Vec<f64>,
    ranking: Option<Ranking>,
    /// The curve being measured: 0 for the ranking's order, `1 + s` for random order `s`.
    curve: u32,
    order: Vec<usize>,
    pruned: Vec<f32>,
    points: Vec<f64>,
    ranked_curve: Vec<f64>,
    random_curve: Vec<f64>,
    done: usize,
}

impl<'a> Measuring<'a> {
    /// Starts measuring the layer whose per-head contributions are `contributions` and whose
    /// full output is `full`; the random orders come from `seed`.
    pub fn new(contributions: &'a Contributions, full: &'a [f32], seed: u32) -> Self {
        let full_norm = full.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt();
        Measuring {
            contributions,
            full,
            seed,
            full_norm,
            per_head: Vec::with_capacity(contributions.num_heads),
            ranking: None,
            curve: 0,
            order: Vec::new(),
            pruned: Vec::new(),
            points: Vec::new(),
            ranked_curve: Vec::new(),
            random_curve: vec![0.0; contributions.num_heads + 1],
            done: 0,
        }
    }

    /// Steps in the whole measurement: one per head's norm, one per point of each curve.
    pub fn steps(&self) -> usize {
        let heads = self.contributions.num_heads;
        heads + (1 + RANDOM_ORDERS as usize) * (heads + 1)
    }

    /// Fraction of the steps done, 0 to 1.
    pub fn progress(&self) -> f64 {
        self.done as f64 / self.steps().max(1) as f64
    }

    /// Does the next step; `false` once every step is done.
    pub fn step(&mut self) -> bool {
        let heads = self.contributions.num_heads;
        if self.done >= self.steps() {
            return false;
        }
        if self.per_head.len() < heads {
            let h = self.per_head.len();
            let norm =
                self.contributions.head(h).iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt();
            self.per_head.push(if self.full_norm > 0.0 { norm / self.full_norm } else { 0.0 });
        } else if self.points.is_empty() {
            let ranking = self.ranking.get_or_insert_with(|| Ranking::new(self.per_head.clone()));
            self.order = match self.curve {
                0 => ranking.ranked.clone(),
                s => random_order(heads, self.seed.wrapping_add(s - 1)),
            };
            self.pruned = self.full.to_vec();
            self.points.push(overall(self.full, &self.pruned).rel_l2);
        } else {
            let h = self.order[self.points.len() - 1];
            self.contributions.take_out(h, &mut self.pruned);
            self.points.push(overall(self.full, &self.pruned).rel_l2);
        }
        if !self.points.is_empty() && self.points.len() == heads + 1 {
            let points = std::mem::take(&mut self.points);
            match self.curve {
                0 => self.ranked_curve = points,
                _ => {
                    for (m, d) in self.random_curve.iter_mut().zip(points) {
                        *m += d / RANDOM_ORDERS as f64;
                    }
                }
            }
            self.curve += 1;
        }
        self.done += 1;
        self.done < self.steps()
    }

    /// The finished measurement (runs any steps left).
    pub fn finish(mut self) -> Importance {
        while self.step() {}
        let ranking = self.ranking.unwrap_or_else(|| Ranking::new(self.per_head));
        Importance { ranking, ranked_curve: self.ranked_curve, random_curve: self.random_curve }
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
    let output = contributions.recompose_from_full(full, heads);
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

    /// The measure in steps is the one-call functions' measure, bit for bit: each head's norm,
    /// the ranked order's curve and the mean of the random orders' curves.
    #[test]
    fn the_stepped_measure_equals_the_one_call_functions() {
        use crate::attention::importance::{drift_curve, head_importance, mean_random_curve};
        let (heads, seq_len, d_model) = (7, 3, 5);
        let data = (0..heads * seq_len * d_model).map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0).collect();
        let c = Contributions { num_heads: heads, seq_len, d_model, data };
        let full = c.recompose(&HeadSet::all(heads));
        let got = Importance::measure(&c, &full, 5);
        let ranking = Ranking::new(head_importance(&c, &full));
        let ranked: Vec<f64> = drift_curve(&c, &full, &ranking.ranked).iter().map(|d| d.rel_l2).collect();
        let want = Importance {
            ranking,
            ranked_curve: ranked,
            random_curve: mean_random_curve(&c, &full, RANDOM_ORDERS, 5),
        };
        assert_eq!(got, want);
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

    /// Claim 3's sentence for every head count from one to 16 and two large ones: a whole
    /// number of heads pruned (at least one, never all), singular and plural right, and the
    /// drift it quotes the curve's at that count.
    #[test]
    fn claim_sentence_reads_right_for_every_head_count() {
        for heads in (1..=16).chain([96, 128]) {
            let data = (0..heads * heads)
                .map(|i| if i % (heads + 1) == 0 { 1.0 + (i % 7) as f32 } else { 0.0 })
                .collect();
            let c = Contributions { num_heads: heads, seq_len: 1, d_model: heads, data };
            let full = c.recompose(&HeadSet::all(heads));
            let text = Importance::measure(&c, &full, 1).claim_sentence().unwrap();
            for wrong in [" 0 least", " 0 heads", " 1 heads", " 1 least", "(0 %)", "(100 %)", "NaN"] {
                assert!(!text.contains(wrong), "{heads} heads: {wrong:?} in {text}");
            }
            if heads == 1 {
                assert!(text.starts_with("This layer has a single head"), "{text}");
                continue;
            }
            let k = (((heads as f64) * 0.2).round() as usize).clamp(1, heads - 1);
            let pruned = if k == 1 {
                "Pruning the least important of".to_string()
            } else {
                format!("Pruning the {k} least important of")
            };
            assert!(text.contains(&format!("{pruned} {heads} heads")), "{text}");
            assert!(text.contains(&format!("{} at random", heads_count(k))), "{text}");
        }
        assert_eq!(
            (heads_count(1), heads_count(2), heads_count(0)),
            ("1 head".into(), "2 heads".into(), "0 heads".into())
        );
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
