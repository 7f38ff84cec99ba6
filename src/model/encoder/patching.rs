//! Activation patching: which heads carry the meaning check's answer, as causes rather than as
//! losses when removed.
//!
//! Two runs of the unpruned model on sentences of the same token count: the *clean* one (the
//! check's anchor, which the model reads as money) and a *corrupted* one (the same sentence with
//! the paycheck replaced by grass, which it reads as a river bank). For each head, the corrupted
//! run is repeated with that head's output (its `n x d_k` values before the output projection,
//! token `t` for token `t`) taken from the clean run ([`Bert::forward_patched`]); the *effect* is
//! the share of the clean-minus-corrupted gap of a [`PatchMetric`] that the one head restores:
//!
//! ```text
//! restored(h) = (m(corrupted, h patched from clean) - m(corrupted)) / (m(clean) - m(corrupted))
//! lost(h)     = (m(clean) - m(clean without h))                     / (m(clean) - m(corrupted))
//! ```
//!
//! `lost` is ablation on the clean run in the same unit, so the two can be compared head by head
//! and by their rank correlation: a head can matter when removed and carry nothing of the
//! answer (it is needed by everything), or carry the answer while others could stand in for it.
//!
//! [`Bert::forward_patched`]: crate::model::bert::Bert::forward_patched

use crate::attention::cosine;
use crate::attention::importance::least_important_first;
use crate::attention::stats::spearman;
use crate::model::digits::{margin_text, MARGIN_ERROR};
use crate::model::encoder::check::ANCHOR;
use crate::model::spec::ModelSpec;

/// The clean sentence the page starts with: the meaning check's anchor.
pub const CLEAN: &str = ANCHOR;

/// The corrupted sentence the page starts with: the anchor with its money replaced by a river
/// bank's grass, of the same 12 tokens in MiniLM's vocabulary (its last five are the anchor's).
pub const CORRUPTED: &str = "I sat down on the grass at the bank.";

/// What a patched run is scored by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PatchMetric {
    /// The meaning check's margin of the run's embedding: its cosine to the candidate the clean
    /// run is closer to, minus its cosine to the other (the candidates as the full model embeds
    /// them).
    Margin,
    /// The run's embedding's cosine to the clean run's.
    Similarity,
}

impl PatchMetric {
    /// Every metric, the page's default first.
    pub const ALL: [PatchMetric; 2] = [PatchMetric::Margin, PatchMetric::Similarity];

    /// The metric's name in the page's controls and files.
    pub fn as_str(self) -> &'static str {
        match self {
            PatchMetric::Margin => "margin",
            PatchMetric::Similarity => "similarity",
        }
    }

    /// The metric named `s` ([`PatchMetric::as_str`]).
    pub fn parse(s: &str) -> Option<PatchMetric> {
        PatchMetric::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// What the page's choice says.
    pub fn label(self) -> &'static str {
        match self {
            PatchMetric::Margin => "the meaning check's margin",
            PatchMetric::Similarity => "the embedding's cosine to the clean run's",
        }
    }

    /// A metric's value printed to the digits the page's f16 weights support.
    fn text(self, v: f64) -> String {
        match self {
            PatchMetric::Margin => margin_text(v),
            PatchMetric::Similarity => format!("{v:.4}"),
        }
    }

    /// The smallest clean-minus-corrupted gap whose shares mean something: for the margin,
    /// twice the f16 weights' error on a margin; for the cosine, its error on a cosine (3e-4).
    fn smallest_gap(self) -> f64 {
        match self {
            PatchMetric::Margin => 2.0 * MARGIN_ERROR,
            PatchMetric::Similarity => 3e-4,
        }
    }
}

/// Why two sentences cannot be patched into each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairError {
    /// Patching takes token `t` of one run for token `t` of the other: the counts must match.
    Lengths {
        /// The clean sentence's tokens, `[CLS]` and `[SEP]` included.
        clean: usize,
        /// The corrupted sentence's.
        corrupted: usize,
    },
    /// The two sentences are the same tokens: nothing to restore.
    Same,
}

impl std::fmt::Display for PairError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairError::Lengths { clean, corrupted } => write!(
                f,
                "Patching puts each token's head output in the same place of the other run, so the two \
                 sentences need the same number of tokens: the clean one has {clean}, the corrupted one \
                 {corrupted}. Change a word for one of as many pieces (the tokens are listed under each)."
            ),
            PairError::Same => {
                write!(f, "The two sentences are the same tokens: a head has nothing to restore.")
            }
        }
    }
}

/// Whether the token ids `clean` and `corrupted` can be patched into each other.
pub fn check_pair(clean: &[u32], corrupted: &[u32]) -> Result<(), PairError> {
    if clean.len() != corrupted.len() {
        return Err(PairError::Lengths { clean: clean.len(), corrupted: corrupted.len() });
    }
    if clean == corrupted {
        return Err(PairError::Same);
    }
    Ok(())
}

/// What the patching runs gave: embeddings, scored by [`Patching::effects`] for either metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Patching {
    /// The clean run's embedding.
    pub clean: Vec<f32>,
    /// The corrupted run's.
    pub corrupted: Vec<f32>,
    /// The meaning check's candidates ([`crate::model::encoder::check::CANDIDATES`]), embedded by the unpruned
    /// model.
    pub candidates: [Vec<f32>; 2],
    /// Per head, the corrupted run with that head's output taken from the clean run.
    pub patched: Vec<Vec<f32>>,
    /// Per head, the clean run with that head removed.
    pub ablated: Vec<Vec<f32>>,
}

/// Every head's patching and ablation effect by one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchEffects {
    /// The metric.
    pub metric: PatchMetric,
    /// Its value on the clean run.
    pub clean: f64,
    /// Its value on the corrupted run.
    pub corrupted: f64,
    /// Per head, the share of the gap that patching it alone restores (1 = all of it; negative
    /// when the clean output moves the corrupted run further away).
    pub restored: Vec<f64>,
    /// Per head, the share of the gap that removing it from the clean run loses.
    pub lost: Vec<f64>,
}

impl Patching {
    /// The effects by `metric`.
    pub fn effects(&self, metric: PatchMetric) -> PatchEffects {
        let score = |e: &[f32]| match metric {
            // Toward the candidate the clean run is closer to.
            PatchMetric::Margin => {
                let c = [cosine(&self.clean, &self.candidates[0]), cosine(&self.clean, &self.candidates[1])];
                let toward = usize::from(c[1] > c[0]);
                cosine(e, &self.candidates[toward]) - cosine(e, &self.candidates[1 - toward])
            }
            PatchMetric::Similarity => cosine(e, &self.clean),
        };
        let (clean, corrupted) = (score(&self.clean), score(&self.corrupted));
        let gap = clean - corrupted;
        let share = |v: f64| if gap == 0.0 { 0.0 } else { v / gap };
        PatchEffects {
            metric,
            clean,
            corrupted,
            restored: self.patched.iter().map(|e| share(score(e) - corrupted)).collect(),
            lost: self.ablated.iter().map(|e| share(clean - score(e))).collect(),
        }
    }
}

impl PatchEffects {
    /// The clean run's value minus the corrupted one's: what a head can restore.
    pub fn gap(&self) -> f64 {
        self.clean - self.corrupted
    }

    /// Whether the gap is beyond the page's weights' error, so that shares of it mean something.
    pub fn measurable(&self) -> bool {
        self.gap().abs() > self.metric.smallest_gap()
    }

    /// Spearman's rank correlation of the heads' patching and ablation effects (`None` when
    /// either is constant).
    pub fn correlation(&self) -> Option<f64> {
        spearman(&self.restored, &self.lost)
    }

    /// The `k` heads whose patching restores most, most first.
    pub fn top_restoring(&self, k: usize) -> Vec<usize> {
        top(&self.restored, k)
    }

    /// The `k` heads whose removal loses most, most first.
    pub fn top_lost(&self, k: usize) -> Vec<usize> {
        top(&self.lost, k)
    }

    /// What the effects say, for the page (heads named as `spec` numbers them).
    pub fn summary(&self, spec: &ModelSpec) -> String {
        let m = self.metric;
        let runs = format!(
            "By {}: the clean run {}, the corrupted run {}.",
            m.label(),
            m.text(self.clean),
            m.text(self.corrupted)
        );
        if !self.measurable() {
            return format!(
                "{runs} The two runs differ by no more than the page's f16 weights can tell ({}), so no \
                 head's share of the difference is shown: choose sentences the model reads differently.",
                m.text(m.smallest_gap())
            );
        }
        let listed = |heads: Vec<usize>, values: &[f64]| {
            let each = heads.into_iter().map(|h| format!("{} ({})", spec.head_name(h), percent(values[h])));
            each.collect::<Vec<_>>().join(", ")
        };
        let correlation = match self.correlation() {
            Some(r) => format!(
                " Removing each head alone from the clean run ranks the heads with a Spearman \
                 correlation of {r:.2} to patching; the removals that lose most: {}.",
                listed(self.top_lost(3), &self.lost)
            ),
            None => String::new(),
        };
        format!(
            "{runs} The heads whose clean output, put alone into the corrupted run, restores the largest \
             share of the difference: {}.{correlation}",
            listed(self.top_restoring(3), &self.restored)
        )
    }
}

/// A share as a percentage of whole points ("38 %", "-4 %").
pub fn percent(share: f64) -> String {
    format!("{} %", percent_points(share))
}

/// A share in whole percentage points, as a grid cell shows it ("27", "-4"; "0", never "-0").
pub fn percent_points(share: f64) -> String {
    let points = (100.0 * share).round();
    format!("{}", if points == 0.0 { 0.0 } else { points })
}

/// The `k` largest values' indices, largest first.
fn top(values: &[f64], k: usize) -> Vec<usize> {
    least_important_first(values).into_iter().rev().take(k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ModelSpec = ModelSpec { layers: 1, heads: 3, d_model: 6, ..ModelSpec::MINILM_L6_V2 };

    fn unit(v: [f32; 3]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn patching() -> Patching {
        // Candidate 1 along y, candidate 0 along x; the clean run leans to y, the corrupted to x.
        Patching {
            clean: unit([0.2, 1.0, 0.0]),
            corrupted: unit([1.0, 0.1, 0.0]),
            candidates: [unit([1.0, 0.0, 0.0]), unit([0.0, 1.0, 0.0])],
            patched: vec![unit([0.2, 1.0, 0.0]), unit([1.0, 0.1, 0.0]), unit([1.0, 0.4, 0.0])],
            ablated: vec![unit([1.0, 0.1, 0.0]), unit([0.2, 1.0, 0.0]), unit([0.25, 1.0, 0.0])],
        }
    }

    #[test]
    fn a_head_restoring_the_clean_run_restores_all_and_one_changing_nothing_none() {
        let p = patching();
        for metric in PatchMetric::ALL {
            let e = p.effects(metric);
            assert!(e.gap() > 0.0, "{metric:?}: the clean run scores higher than the corrupted one");
            // Head 0's patched run is the clean run; head 1's the corrupted run itself.
            assert!((e.restored[0] - 1.0).abs() < 1e-6, "{metric:?} {:?}", e.restored);
            assert!(e.restored[1].abs() < 1e-12, "{metric:?} {:?}", e.restored);
            assert!(e.restored[2] > 0.0 && e.restored[2] < 1.0, "{metric:?} {:?}", e.restored);
            // Removing head 0 from the clean run gives the corrupted run: all of it lost.
            assert!((e.lost[0] - 1.0).abs() < 1e-6 && e.lost[1].abs() < 1e-12, "{metric:?} {:?}", e.lost);
            assert!(e.measurable());
            assert_eq!(e.top_restoring(2), vec![0, 2]);
        }
        let margin = p.effects(PatchMetric::Margin);
        let want = |e: &[f32]| e[1] as f64 - e[0] as f64;
        assert!((margin.clean - want(&p.clean)).abs() < 1e-6, "{}", margin.clean);
        assert!((margin.corrupted - want(&p.corrupted)).abs() < 1e-6, "{}", margin.corrupted);
        assert!((p.effects(PatchMetric::Similarity).clean - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_margin_is_taken_toward_the_clean_runs_choice() {
        let mut p = patching();
        p.candidates.swap(0, 1);
        let e = p.effects(PatchMetric::Margin);
        assert!(e.clean > 0.0 && e.corrupted < 0.0, "{} {}", e.clean, e.corrupted);
    }

    #[test]
    fn a_gap_within_the_weights_error_gives_no_shares_and_says_why() {
        let mut p = patching();
        p.corrupted = p.clean.clone();
        let e = p.effects(PatchMetric::Margin);
        assert_eq!(e.gap(), 0.0);
        assert!(!e.measurable());
        assert!(e.restored.iter().all(|r| r.is_finite()), "no division by zero: {:?}", e.restored);
        let s = e.summary(&SPEC);
        assert!(s.contains("no head's share of the difference is shown"), "{s}");
    }

    #[test]
    fn the_summary_names_the_heads_that_restore_and_lose_most_and_their_correlation() {
        let e = patching().effects(PatchMetric::Margin);
        let s = e.summary(&SPEC);
        assert!(s.starts_with("By the meaning check's margin: the clean run 0."), "{s}");
        assert!(s.contains("share of the difference: layer 1 head 0 (100 %), layer 1 head 2 ("), "{s}");
        assert!(s.contains("Spearman correlation of"), "{s}");
        assert_eq!(percent(0.384), "38 %");
        assert_eq!(percent(-0.04), "-4 %");
        assert_eq!(
            (percent_points(0.2704), percent_points(-0.004), percent_points(-0.04)),
            ("27".into(), "0".into(), "-4".into())
        );
    }

    #[test]
    fn a_pair_of_other_lengths_or_the_same_tokens_is_refused_with_its_counts() {
        assert_eq!(check_pair(&[1, 2, 3], &[1, 5, 3]), Ok(()));
        assert_eq!(check_pair(&[1, 2, 3], &[1, 2, 3]), Err(PairError::Same));
        let e = check_pair(&[1, 2, 3], &[1, 2]).unwrap_err();
        assert_eq!(e, PairError::Lengths { clean: 3, corrupted: 2 });
        assert!(e.to_string().contains("the clean one has 3, the corrupted one 2"), "{e}");
        assert_eq!(PatchMetric::parse("similarity"), Some(PatchMetric::Similarity));
        assert_eq!(PatchMetric::parse("nope"), None);
    }

    /// Runs on a random model of odd sizes: 3 layers of 3 heads of 5.
    mod runs {
        use super::*;
        use crate::attention::HeadSet;
        use crate::cpu::Kernel;
        use crate::model::encoder::bert::{Bert, Patch};

        const ODD: ModelSpec = ModelSpec {
            layers: 3,
            heads: 3,
            d_model: 15,
            ffn: 23,
            vocab: 40,
            positions: 9,
            ..ModelSpec::MINILM_L6_V2
        };
        const CLEAN: [u32; 6] = [1, 7, 8, 9, 3, 2];
        const CORRUPTED: [u32; 6] = [1, 30, 31, 9, 3, 2];

        #[test]
        fn patching_from_a_pass_on_the_same_tokens_changes_nothing() {
            let bert = Bert::random(ODD, 3);
            let all = HeadSet::all(ODD.total_heads());
            for kernel in Kernel::ALL {
                let run = bert.forward(kernel, &CORRUPTED, &all);
                for heads in [vec![0], vec![4, 8], (0..9).collect()] {
                    let patch = Patch { heads: &heads, from: &run };
                    let same = bert.forward_patched(kernel, &CORRUPTED, &all, None, Some(patch));
                    assert_eq!(same.embedding, run.embedding, "{kernel:?} {heads:?}");
                    let reused = bert.forward_patched(kernel, &CORRUPTED, &all, Some(&run), Some(patch));
                    assert_eq!(reused.embedding, run.embedding, "{kernel:?} {heads:?} from the trace");
                }
            }
        }

        #[test]
        fn a_patched_head_is_the_clean_runs_in_its_layer_and_nothing_before_it_changes() {
            let bert = Bert::random(ODD, 5);
            let all = HeadSet::all(ODD.total_heads());
            let (d, d_k) = (ODD.d_model, ODD.d_k());
            let kernel = Kernel::Simd;
            let (clean, corrupted) =
                (bert.forward(kernel, &CLEAN, &all), bert.forward(kernel, &CORRUPTED, &all));
            for h in 0..ODD.total_heads() {
                let (l, i) = (ODD.layer_of(h), ODD.head_in_layer(h));
                let patch = Patch { heads: &[h], from: &clean };
                let scratch = bert.forward_patched(kernel, &CORRUPTED, &all, None, Some(patch));
                let reused = bert.forward_patched(kernel, &CORRUPTED, &all, Some(&corrupted), Some(patch));
                // Reusing the corrupted run's layers before the patched one is exact.
                assert_eq!(reused.first_computed, l, "head {h}");
                let parts = |o: &crate::model::encoder::bert::BertOutput| {
                    (o.embedding.clone(), o.head_outputs.clone())
                };
                assert!(parts(&scratch) == parts(&reused), "head {h}: reusing the trace is exact");
                for row in 0..CLEAN.len() {
                    let cols = row * d + i * d_k..row * d + (i + 1) * d_k;
                    assert_eq!(
                        scratch.head_outputs[l][cols.clone()],
                        clean.head_outputs[l][cols],
                        "head {h}"
                    );
                }
                // Layers before the patched one are the corrupted run's; the embedding moves.
                assert_eq!(scratch.layer_inputs[..=l], corrupted.layer_inputs[..=l], "head {h}");
                assert_ne!(scratch.embedding, corrupted.embedding, "head {h}");
            }
            // Every head patched: every layer's heads' outputs are the clean run's, but the residual
            // stream still carries the corrupted tokens, so the run is between the two.
            let every: Vec<usize> = (0..ODD.total_heads()).collect();
            let all_patched = bert.forward_patched(
                kernel,
                &CORRUPTED,
                &all,
                None,
                Some(Patch { heads: &every, from: &clean }),
            );
            assert_eq!(all_patched.head_outputs, clean.head_outputs);
            let to_clean = |e: &[f32]| cosine(e, &clean.embedding);
            assert!(to_clean(&all_patched.embedding) > to_clean(&corrupted.embedding));
        }
    }
}
