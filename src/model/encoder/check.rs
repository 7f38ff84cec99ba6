//! The meaning check: which of two sentences a model finds closer in meaning to a third, how far
//! its answer can be trusted with f16 weights, and what removing each head alone does to it.

use crate::attention::importance::Ranking;
use crate::attention::{cosine, HeadSet};
use crate::model::digits::{margin_text, MARGIN_ERROR};
use crate::model::encoder::runner::Runner;
use crate::model::spec::ModelSpec;
use crate::model::tokenize::wordpiece::WordPiece;

/// The check's anchor: whose meaning are the candidates compared with?
pub const ANCHOR: &str = "I deposited my paycheck at the bank.";

/// The candidates: the full model reads "bank" in context and picks the financial sentence;
/// without layer 1's heads it falls back to the one that merely shares the word.
pub const CANDIDATES: [&str; 2] =
    ["We sat on the grassy bank by the river.", "The financial institution approved my loan."];

/// The anchor and the candidates, in that order: the sentences the check runs.
pub const SENTENCES: [&str; 3] = [ANCHOR, CANDIDATES[0], CANDIDATES[1]];

/// The check's answer with some heads pruned.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckAnswer {
    /// Index into [`CANDIDATES`] of the sentence closer to the anchor.
    pub closer: usize,
    /// Cosine of each candidate's embedding to the anchor's.
    pub cosines: [f64; 2],
    /// The heads active when it was asked.
    pub heads: HeadSet,
}

/// What a pruned model's answer to the meaning check says against the full model's, as far as the
/// page's f16 weights can tell: a margin within [`MARGIN_ERROR`] of zero may have either sign in
/// the float32 checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The full model's choice still wins, by more than the weights' error.
    Holds,
    /// The two cosines are within the weights' error of each other.
    TooClose,
    /// The other sentence wins, by more than the weights' error.
    Flips,
}

impl Verdict {
    /// The verdict of a margin toward the full model's choice.
    pub fn of_margin(margin: f64) -> Verdict {
        if margin.abs() <= MARGIN_ERROR {
            Verdict::TooClose
        } else if margin < 0.0 {
            Verdict::Flips
        } else {
            Verdict::Holds
        }
    }
}

impl CheckAnswer {
    /// The check's answer from the embeddings of the anchor and of each candidate.
    pub fn from_embeddings(anchor: &[f32], candidates: [&[f32]; 2], heads: &HeadSet) -> CheckAnswer {
        let cosines = candidates.map(|c| cosine(anchor, c));
        CheckAnswer { closer: usize::from(cosines[1] > cosines[0]), cosines, heads: heads.clone() }
    }

    /// How far this answer leans toward candidate `closer`: its cosine to the anchor minus the
    /// other's. With the full model's choice as `closer`, positive while that choice still wins.
    pub fn margin_toward(&self, closer: usize) -> f64 {
        self.cosines[closer] - self.cosines[1 - closer]
    }

    /// This answer against `full`'s choice, with the weights' error in mind.
    pub fn verdict_from(&self, full: &CheckAnswer) -> Verdict {
        Verdict::of_margin(self.margin_toward(full.closer))
    }

    /// The check line the page shows for this (pruned) answer against the full model's.
    pub fn sentence(&self, full: &CheckAnswer) -> String {
        let name = |i: usize| format!("\"{}\"", CANDIDATES[i]);
        format!(
            "Check: which is closer in meaning to \"{ANCHOR}\"? Full model: {} ({:.3} vs {:.3}). Pruned: {} ({:.3} vs {:.3}){}",
            name(full.closer),
            full.cosines[0],
            full.cosines[1],
            name(self.closer),
            self.cosines[0],
            self.cosines[1],
            match self.verdict_from(full) {
                Verdict::Holds => ".",
                Verdict::Flips => " — the answer flipped.",
                Verdict::TooClose => {
                    " — too close to call: the two cosines are within the f16 weights' error of each other."
                }
            }
        )
    }
}

/// Asks the model with only `heads` active which candidate is closer in meaning to the anchor.
pub async fn meaning_check(runner: &impl Runner, tokenizer: &WordPiece, heads: &HeadSet) -> CheckAnswer {
    let embed = async |text: &str| {
        let ids: Vec<u32> = tokenizer.encode(text).iter().map(|t| t.id).collect();
        runner.run(&ids, heads, None).await.embedding
    };
    let anchor = embed(ANCHOR).await;
    let candidates = [embed(CANDIDATES[0]).await, embed(CANDIDATES[1]).await];
    CheckAnswer::from_embeddings(&anchor, [&candidates[0], &candidates[1]], heads)
}

/// The meaning check's margin with each head alone pruned, beside the full model's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct MarginImportance {
    /// The answer with every head active.
    pub full: CheckAnswer,
    /// Per head, the margin toward `full`'s choice with that head alone pruned.
    pub margins: Vec<f64>,
}

impl MarginImportance {
    /// The full model's margin toward its own answer (never negative).
    pub fn full_margin(&self) -> f64 {
        self.full.margin_toward(self.full.closer)
    }

    /// Heads ranked by how far removing each alone moves the margin: `|full - without it|`.
    pub fn ranking(&self) -> Ranking {
        let full = self.full_margin();
        Ranking::new(self.margins.iter().map(|m| (full - m).abs()).collect())
    }

    /// The heads whose removal alone gives `verdict`, in increasing order: [`Verdict::Flips`] for
    /// the heads that flip the answer beyond the weights' error, [`Verdict::TooClose`] for those
    /// that leave it too close to call.
    pub fn heads_with(&self, verdict: Verdict) -> Vec<usize> {
        let heads = self.margins.iter().enumerate();
        heads.filter(|(_, &m)| Verdict::of_margin(m) == verdict).map(|(h, _)| h).collect()
    }

    /// What the margins say, in a sentence or two for the page (heads named as `spec` numbers
    /// them): which heads flip the check alone (or, if none does, which moves it most), and
    /// which leave it too close to call.
    pub fn summary(&self, spec: &ModelSpec) -> String {
        let full = margin_text(self.full_margin());
        let listed = |heads: &[usize]| {
            let each = heads.iter().map(|&h| {
                format!("{} (margin {full} → {})", spec.head_name(h), margin_text(self.margins[h]))
            });
            each.collect::<Vec<_>>().join(", ")
        };
        let first = match (self.heads_with(Verdict::Flips).as_slice(), self.ranking().ranked.last().copied())
        {
            ([], Some(h)) => format!(
                "No single head's removal flips the meaning check (margin {full}); {} moves it most, to {}.",
                spec.head_name(h),
                margin_text(self.margins[h])
            ),
            ([], None) => return String::new(),
            (heads, _) => format!(
                "Removing one head alone flips the meaning check for {}: {}.",
                if heads.len() == 1 { "this head" } else { "each of these heads" },
                listed(heads)
            ),
        };
        match self.heads_with(Verdict::TooClose).as_slice() {
            [] => first,
            close => format!(
                "{first} Too close to call for {}: the margin is within the f16 weights' error \
                 ({MARGIN_ERROR}) of zero, so the float32 model may answer either way.",
                listed(close)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One layer of 12 heads, as the summaries number them.
    const SPEC: ModelSpec = ModelSpec { layers: 1, ..ModelSpec::MINILM_L6_V2 };

    #[test]
    fn a_margin_within_the_weights_error_of_zero_is_too_close_to_call() {
        // What the explain test's page showed as "0.023 -> -0.000": about -2e-4.
        assert_eq!(Verdict::of_margin(-2e-4), Verdict::TooClose);
        assert_eq!(Verdict::of_margin(2e-4), Verdict::TooClose);
        assert_eq!(Verdict::of_margin(0.0), Verdict::TooClose);
        assert_eq!(Verdict::of_margin(MARGIN_ERROR), Verdict::TooClose);
        assert_eq!(Verdict::of_margin(-MARGIN_ERROR * 1.01), Verdict::Flips);
        assert_eq!(Verdict::of_margin(MARGIN_ERROR * 1.01), Verdict::Holds);
        assert_eq!(Verdict::of_margin(-0.3), Verdict::Flips);
        let full = CheckAnswer { closer: 1, cosines: [0.5, 0.52], heads: HeadSet::all(2) };
        let near = CheckAnswer { closer: 0, cosines: [0.6101, 0.61], heads: HeadSet::with_pruned(2, [0]) };
        assert_ne!(near.closer, full.closer, "the closer sentence changed");
        assert_eq!(near.verdict_from(&full), Verdict::TooClose, "by 1e-4 only");
        assert_eq!(full.verdict_from(&full), Verdict::Holds);
    }

    #[test]
    fn the_check_line_names_both_answers_and_the_verdict() {
        let full = CheckAnswer { closer: 1, cosines: [0.380, 0.403], heads: HeadSet::all(2) };
        let flipped = CheckAnswer { closer: 0, cosines: [0.5, 0.4], heads: HeadSet::with_pruned(2, [0]) };
        assert_eq!(
            flipped.sentence(&full),
            "Check: which is closer in meaning to \"I deposited my paycheck at the bank.\"? Full model: \
             \"The financial institution approved my loan.\" (0.380 vs 0.403). Pruned: \"We sat on the \
             grassy bank by the river.\" (0.500 vs 0.400) — the answer flipped."
        );
        assert!(full.sentence(&full).ends_with("(0.380 vs 0.403)."));
        let close = CheckAnswer { closer: 0, cosines: [0.4001, 0.4], heads: HeadSet::all(2) };
        assert!(close.sentence(&full).ends_with("within the f16 weights' error of each other."));
    }

    #[test]
    fn the_margin_is_signed_toward_the_given_candidate_and_flips_are_negative_margins() {
        let answer = CheckAnswer { closer: 1, cosines: [0.25, 0.75], heads: HeadSet::all(2) };
        assert_eq!((answer.margin_toward(1), answer.margin_toward(0)), (0.5, -0.5));
        let result = MarginImportance { full: answer, margins: vec![0.5, -0.125, 0.0, 0.625, -1.0] };
        assert_eq!(result.heads_with(Verdict::Flips), vec![1, 4]);
        assert_eq!(result.heads_with(Verdict::TooClose), vec![2]);
        assert_eq!(result.heads_with(Verdict::Holds), vec![0, 3]);
        assert_eq!(
            result.summary(&SPEC),
            "Removing one head alone flips the meaning check for each of these heads: layer 1 head 1 \
             (margin 0.500 → -0.125), layer 1 head 4 (margin 0.500 → -1.000). Too close to call for \
             layer 1 head 2 (margin 0.500 → 0.000): the margin is within the f16 weights' error \
             (0.0003) of zero, so the float32 model may answer either way."
        );
        // No flip: the head that moves it most; a margin just over the error keeps its sign.
        let full = result.full.clone();
        let calm = MarginImportance { full: full.clone(), margins: vec![0.5, 0.25, 0.45] };
        assert_eq!(
            calm.summary(&SPEC),
            "No single head's removal flips the meaning check (margin 0.500); layer 1 head 1 moves it \
             most, to 0.250."
        );
        let one = MarginImportance { full, margins: vec![0.5, -4.1e-4, 0.45] };
        assert!(one.summary(&SPEC).starts_with("Removing one head alone flips the meaning check for this head: layer 1 head 1 (margin 0.500 → -0.0004)."));
        assert_eq!(result.ranking().per_head, vec![0.0, 0.625, 0.5, 0.125, 1.5]);
        assert_eq!(result.ranking().rank(4), Some(1));
        // A model of two layers of 4 heads numbers its heads its own way.
        let small = ModelSpec { layers: 2, heads: 4, d_model: 16, ..SPEC };
        let five =
            MarginImportance { full: result.full.clone(), margins: vec![0.5, 0.5, 0.5, 0.5, 0.5, -0.3] };
        assert!(
            five.summary(&small).contains("layer 2 head 1 (margin 0.500 → -0.300)"),
            "{}",
            five.summary(&small)
        );
    }
}
