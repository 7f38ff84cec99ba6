//! A decoder's work for the page: its passes over the reader's text (the full model's, kept while
//! the text stays, and the pruned one's) and what they say about the next token and each token's
//! loss; the engine's part for a decoder ([`engine`]); and the measurements, each a job the one
//! driver runs on the workers or between the page's turns: every head's importance to the next
//! token and the drift curve ([`importance`]), the text set's perplexity and gradients
//! ([`text_set`]), Michel et al.'s three pruning curves ([`curves`]) and the induction test
//! ([`induction`]). What they find is here, with the sentences the page writes of it.

pub mod curves;
pub mod engine;
pub mod importance;
pub mod induction;
pub mod precision;
pub mod text_set;

use std::sync::Arc;

use crate::attention::clock::Clock;
use crate::attention::importance::random_order;
use crate::attention::HeadSet;
use crate::backend::decoder::DecoderRunner;
pub use crate::backend::decoder::DECODER_KERNEL;
use crate::cpu::Kernel;
use crate::jobs::work::decoder::INDUCTION_SCORES;
use crate::model::decoder::gpt2::{DecoderOutput, Keep};
use crate::model::decoder::induction::{DecoderRole, HalfLosses, HeadScores, Repeated};
use crate::model::decoder::next_importance::NextImportance;
use crate::model::decoder::next_token::{log_softmax, perplexity, top, NextDrift};
use crate::model::decoder::texts::TextSet;
use crate::model::decoder::{Decoder, DecoderTokens};
use crate::model::spec::ModelSpec;

/// The most bytes of attention weights a page's pass keeps for every layer; past it (a long text
/// on a large model: gpt2-medium at 1024 tokens would keep 1.6 GB per pass) it keeps only the
/// layer on show, and showing another layer runs the passes again.
pub const KEEP_ALL_BYTES: usize = 64 << 20;

/// What a page's pass over `n` tokens keeps: every layer's attention if it fits
/// [`KEEP_ALL_BYTES`], else only the layer `shown` returns (called only then, so that a page
/// recomputes on a change of layer only when it must).
pub fn keep_for(spec: &ModelSpec, n: usize, shown: impl FnOnce() -> usize) -> Keep {
    if spec.layers * spec.heads * n * n * 4 <= KEEP_ALL_BYTES {
        Keep::All
    } else {
        Keep::Layer(shown().min(spec.layers - 1))
    }
}

/// Tokens the next-token table lists.
pub const TOP_TOKENS: usize = 8;

/// One text's passes: the full model's and the pruned one's (the same pass when nothing is
/// pruned).
#[derive(Clone, Debug)]
pub struct DecoderRun {
    /// The text's tokens.
    pub tokens: DecoderTokens,
    /// Every head active.
    pub full: Arc<DecoderOutput>,
    /// The reader's heads.
    pub pruned: Arc<DecoderOutput>,
    /// Milliseconds the passes this run made took (none: 0, both reused), on the clock it was given.
    pub elapsed_ms: f64,
    /// Where its passes ran, for the page ("the GPU (WebGPU)", "the CPU kernel (…)").
    pub ran_on: String,
    /// Why the passes are not on the GPU when they were meant to be.
    pub note: Option<String>,
}

/// Whether `full` is a full pass over `n` tokens that kept the layers `keep` names.
fn reusable(full: &DecoderOutput, spec: &ModelSpec, n: usize, keep: Keep) -> bool {
    full.seq_len == n
        && !full.heads.any_pruned()
        && full.heads.len() == spec.total_heads()
        && (0..spec.layers).all(|l| !keep.keeps(l) || full.kept(l))
}

impl DecoderRun {
    /// The passes over `tokens` with every head and with `heads`, keeping the attention `keep`
    /// names, reusing `full` when it is a full pass over the same tokens that kept it; timed on
    /// `clock`.
    pub fn new(
        decoder: &Decoder,
        kernel: Kernel,
        tokens: DecoderTokens,
        heads: &HeadSet,
        keep: Keep,
        full: Option<Arc<DecoderOutput>>,
        clock: &dyn Clock,
    ) -> DecoderRun {
        let started = clock.now_ms();
        let all = HeadSet::all(decoder.spec().total_heads());
        let full = full
            .filter(|f| reusable(f, decoder.spec(), tokens.ids.len(), keep))
            .unwrap_or_else(|| Arc::new(decoder.gpt2.forward_keeping(kernel, &tokens.ids, &all, keep)));
        let pruned = if heads.any_pruned() {
            Arc::new(decoder.gpt2.forward_keeping(kernel, &tokens.ids, heads, keep))
        } else {
            full.clone()
        };
        let ran_on = format!("the CPU kernel ({})", kernel.describe());
        DecoderRun { tokens, full, pruned, elapsed_ms: clock.now_ms() - started, ran_on, note: None }
    }

    /// [`DecoderRun::new`] where `runner` puts the page's passes (the GPU or the CPU kernel).
    pub async fn on(
        runner: &DecoderRunner,
        tokens: DecoderTokens,
        heads: &HeadSet,
        keep: Keep,
        full: Option<Arc<DecoderOutput>>,
        clock: &dyn Clock,
    ) -> DecoderRun {
        let run = DecoderRun::on_while(runner, tokens, (heads, keep), full, clock, &|| true).await;
        run.expect("passes wanted throughout end")
    }

    /// [`DecoderRun::on`] for as long as `wanted` holds (the text, heads and view still those it
    /// is for, the panel still shown): `None` once it does not, at a pass's next turn.
    pub async fn on_while(
        runner: &DecoderRunner,
        tokens: DecoderTokens,
        (heads, keep): (&HeadSet, Keep),
        full: Option<Arc<DecoderOutput>>,
        clock: &dyn Clock,
        wanted: &dyn Fn() -> bool,
    ) -> Option<DecoderRun> {
        let started = clock.now_ms();
        let spec = runner.decoder().spec();
        let (all, ids) = (HeadSet::all(spec.total_heads()), &tokens.ids);
        let full = match full.filter(|f| reusable(f, spec, ids.len(), keep)) {
            Some(f) => f,
            None => Arc::new(runner.pass_while(ids, &all, keep, wanted).await?),
        };
        let pruned = match heads.any_pruned() {
            true => Arc::new(runner.pass_while(ids, heads, keep, wanted).await?),
            false => full.clone(),
        };
        let (elapsed_ms, n) = (clock.now_ms() - started, tokens.ids.len());
        Some(DecoderRun { tokens, full, pruned, elapsed_ms, ran_on: runner.ran_on(n), note: runner.note() })
    }

    /// What the last change cost, in a sentence (`step_ms`: the clock's step).
    pub fn cost_sentence(&self, layers: usize, step_ms: f64) -> String {
        format!(
            "Last change recomputed layers 1-{layers} (a decoder's pass over {} tokens, the full model's kept while the text stays) in {}.",
            self.tokens.ids.len(),
            crate::attention::clock::show_ms(self.elapsed_ms, step_ms)
        )
    }

    /// The next token, full against pruned.
    pub fn next_table(&self, decoder: &Decoder) -> NextTable {
        NextTable::new(decoder, &self.full.next_logits, &self.pruned.next_logits)
    }

    /// Each token's loss, full against pruned.
    pub fn loss_strip(&self, decoder: &Decoder) -> LossStrip {
        LossStrip::new(decoder, &self.tokens.ids, &self.full.losses, &self.pruned.losses)
    }
}

/// A row of the next-token table: a token, its probability under the full model and under the
/// pruned one.
#[derive(Clone, Debug, PartialEq)]
pub struct NextRow {
    /// The token's text.
    pub text: String,
    /// Its id.
    pub id: u32,
    /// Its probability, full model.
    pub full: f64,
    /// Its probability, pruned model.
    pub pruned: f64,
}

/// The most likely next tokens of both models (the full model's first, then the pruned one's
/// that the full list lacks), and how far the distribution moved.
#[derive(Clone, Debug, PartialEq)]
pub struct NextTable {
    /// The rows.
    pub rows: Vec<NextRow>,
    /// KL(full || pruned) and the two top tokens.
    pub drift: NextDrift,
}

impl NextTable {
    /// The table of the logits `full` and `pruned` (over `decoder`'s vocabulary).
    pub fn new(decoder: &Decoder, full: &[f32], pruned: &[f32]) -> NextTable {
        let (top_full, top_pruned) = (top(full, TOP_TOKENS), top(pruned, TOP_TOKENS));
        let (log_full, log_pruned) = (log_softmax(full), log_softmax(pruned));
        let mut ids: Vec<u32> = top_full.iter().map(|t| t.0).collect();
        ids.extend(top_pruned.iter().map(|t| t.0).filter(|id| !top_full.iter().any(|t| t.0 == *id)));
        let rows = ids
            .into_iter()
            .map(|id| NextRow {
                text: decoder.bpe.text_of(id),
                id,
                full: log_full[id as usize].exp(),
                pruned: log_pruned[id as usize].exp(),
            })
            .collect();
        NextTable { rows, drift: NextDrift::between(full, pruned) }
    }

    /// The table in a sentence: the two top tokens and the KL.
    pub fn sentence(&self, decoder: &Decoder) -> String {
        let (a, b) = (decoder.bpe.text_of(self.drift.full_top), decoder.bpe.text_of(self.drift.pruned_top));
        if self.drift.top_changed() {
            format!(
                "Pruning changed the most likely next token from {a:?} to {b:?} (KL divergence {:.3} nats).",
                self.drift.kl
            )
        } else {
            format!("The most likely next token is {a:?} for both (KL divergence {:.3} nats).", self.drift.kl)
        }
    }
}

/// Each token's loss under both models: token `t`'s is the loss of predicting it from the tokens
/// before it (the first token has none).
#[derive(Clone, Debug, PartialEq)]
pub struct LossStrip {
    /// Each token's text.
    pub tokens: Vec<String>,
    /// Per token after the first, the full model's loss (nats).
    pub full: Vec<f64>,
    /// The pruned model's.
    pub pruned: Vec<f64>,
}

impl LossStrip {
    /// The strip of `ids` from the two passes' losses.
    pub fn new(decoder: &Decoder, ids: &[u32], full: &[f64], pruned: &[f64]) -> LossStrip {
        LossStrip {
            tokens: ids.iter().map(|&id| decoder.bpe.text_of(id)).collect(),
            full: full.to_vec(),
            pruned: pruned.to_vec(),
        }
    }

    /// Mean loss and perplexity of each model over the text, as a sentence.
    pub fn sentence(&self) -> String {
        match (perplexity(&self.full), perplexity(&self.pruned)) {
            (Some((lf, pf)), Some((lp, pp))) => format!(
                "Mean loss over the text: {lf:.3} nats per token (perplexity {}) with every head, {lp:.3} ({}) pruned.",
                perplexity_text(pf),
                perplexity_text(pp)
            ),
            _ => "One token: nothing before it to predict from.".to_string(),
        }
    }
}

/// A perplexity as the page writes it: one decimal, or in powers of ten past 10 000 (a random
/// model's can be astronomical).
pub fn perplexity_text(p: f64) -> String {
    if p < 1e4 {
        format!("{p:.1}")
    } else {
        format!("{p:.2e}")
    }
}

/// The induction test's result on a model.
#[derive(Clone, Debug, PartialEq)]
pub struct InductionRun {
    /// The sequence it ran on.
    pub sequence: Repeated,
    /// Every head's scores, numbered `layer * heads + head`.
    pub scores: Vec<HeadScores>,
    /// The halves' losses with every head.
    pub full: HalfLosses,
}

/// Tokens in each half of the test's sequence (at most a third of the model's positions).
pub const INDUCTION_HALF: usize = 50;

impl InductionRun {
    /// The test's sequence for `decoder`: `half` random tokens (seeded) repeated once, after its
    /// end-of-text token when it has one, `half` at most [`INDUCTION_HALF`] and what its
    /// positions hold after one more token; or why the model is too small for the test.
    pub fn sequence(decoder: &Decoder, seed: u32) -> Result<Repeated, String> {
        let spec = decoder.spec();
        let bos = decoder.bpe.id("<|endoftext|>");
        let room = (spec.positions - 1) / 2;
        let half = INDUCTION_HALF.min(room).min(spec.vocab.saturating_sub(2));
        if half < 2 {
            return Err(format!(
                "The induction test needs two different tokens repeated once: {} reads at most {} tokens of a vocabulary of {}.",
                decoder.name, spec.positions, spec.vocab
            ));
        }
        Ok(Repeated::random(spec.vocab as u32, half, seed, bos))
    }

    /// The test's result from an induction piece's numbers ([`crate::jobs::work::Piece::Induction`]:
    /// four scores per head, then the halves' losses).
    pub fn from_sums(sequence: Repeated, sums: &[f64]) -> InductionRun {
        let (per_head, halves) = sums.split_at(sums.len() - 2);
        let scores = per_head
            .chunks_exact(INDUCTION_SCORES)
            .map(|s| HeadScores {
                previous_token: s[0],
                duplicate_token: s[1],
                prefix_matching: s[2],
                copying: s[3],
            })
            .collect();
        InductionRun { sequence, scores, full: HalfLosses { first: halves[0], repeated: halves[1] } }
    }

    /// The heads with role `role`.
    pub fn heads_with(&self, role: DecoderRole) -> Vec<usize> {
        (0..self.scores.len()).filter(|&h| self.scores[h].role() == role).collect()
    }

    /// The halves' losses with `heads` active.
    pub fn losses_with(&self, decoder: &Decoder, kernel: Kernel, heads: &HeadSet) -> HalfLosses {
        let pass = decoder.gpt2.forward(kernel, &self.sequence.ids, heads);
        HalfLosses::of(&pass.losses, &self.sequence)
    }
}

/// What makes a decoder's head important.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderMeasure {
    /// How far the next token after the reader's text moves (KL) when the head alone is removed.
    NextToken,
    /// The mean |gradient| of the text set's loss with respect to the head's gate (Michel et al.).
    SetLoss,
}

impl DecoderMeasure {
    /// A head's importance by this measure, for its tooltip.
    pub fn value_text(self, v: f64) -> String {
        match self {
            DecoderMeasure::NextToken => format!("removing it alone moves the next token by KL {v:.4}"),
            DecoderMeasure::SetLoss => {
                format!("|dL/d gate| {v:.5} on the {} passages", crate::model::decoder::texts::NAME)
            }
        }
    }
}

/// A text's measured importance.
#[derive(Clone, Debug, PartialEq)]
pub struct TextImportance {
    /// The text it was measured on (its drift curve's).
    pub text: String,
    /// What ranked the heads.
    pub measure: DecoderMeasure,
    /// What the sweep found.
    pub found: NextImportance,
}

impl TextImportance {
    /// The sweep in a sentence: the heads that matter most, and the curve at Michel et al.'s 40 %.
    /// (`top` written with three significant decimals of the measure.)
    pub fn sentence(&self, spec: &crate::model::spec::ModelSpec) -> String {
        let ranking = &self.found.ranking;
        let top: Vec<String> = ranking
            .ranked
            .iter()
            .rev()
            .take(3)
            .map(|&h| format!("{} ({:.3})", spec.head_name(h), ranking.per_head[h]))
            .collect();
        let curve = &self.found.curve;
        let total = ranking.len();
        let at = curve.ks.iter().position(|&k| 5 * k >= 2 * total).unwrap_or(curve.ks.len() - 1);
        let most = match self.measure {
            DecoderMeasure::NextToken => "Removing one head alone moves the next token most for".to_string(),
            DecoderMeasure::SetLoss => format!(
                "By the gradient of the loss on {} (Michel et al.), the heads that matter most are",
                crate::model::decoder::texts::NAME
            ),
        };
        format!(
            "{most} {}. With the {} least important pruned (40 %, as Michel et al. pruned BERT), the next token after your text moves by KL {:.3}; as many at random, {:.3} on average.",
            top.join(", "),
            curve.ks[at],
            curve.ranked[at],
            curve.random[at],
        )
    }
}

/// `k` of `total` heads pruned at random (the order `seed` draws).
pub fn random_heads(total: usize, k: usize, seed: u32) -> HeadSet {
    HeadSet::with_pruned(total, random_order(total, seed).into_iter().take(k))
}

/// Tokens of a passage the text set's perplexity reads (at most; and at most the model's positions).
pub const PASSAGE_TOKENS: usize = 64;

/// The text set's perplexity with some heads.
#[derive(Clone, Debug, PartialEq)]
pub struct SetPerplexity {
    /// The heads that were active.
    pub heads: HeadSet,
    /// Mean loss per predicted token, nats.
    pub mean_loss: f64,
    /// `exp(mean_loss)`.
    pub perplexity: f64,
    /// Tokens predicted (each passage's tokens after its first).
    pub tokens: usize,
    /// Passages read.
    pub passages: usize,
}

impl SetPerplexity {
    /// The full model's and `self`'s (a pruned model's) perplexity in a sentence.
    pub fn sentence(full: &SetPerplexity, pruned: &SetPerplexity) -> String {
        let set = format!(
            "On {} passages of {} ({} tokens predicted, at most {PASSAGE_TOKENS} per passage)",
            full.passages,
            crate::model::decoder::texts::NAME,
            full.tokens
        );
        if pruned.heads.any_pruned() {
            format!(
                "{set}: perplexity {} with every head, {} with your {} pruned (mean loss {:.3} and {:.3} nats per token).",
                perplexity_text(full.perplexity),
                perplexity_text(pruned.perplexity),
                match pruned.heads.pruned_count() {
                    1 => "head".to_string(),
                    n => format!("{n} heads"),
                },
                full.mean_loss,
                pruned.mean_loss
            )
        } else {
            format!(
                "{set}: perplexity {} with every head (mean loss {:.3} nats per token). Prune heads and measure again to compare.",
                perplexity_text(full.perplexity),
                full.mean_loss
            )
        }
    }
}

/// `set`'s passages as `decoder` reads them: each cut to [`PASSAGE_TOKENS`] and the model's
/// positions, those of one token (which predict nothing) left out.
pub fn set_passages(decoder: &Decoder, set: &TextSet) -> Vec<Vec<u32>> {
    let most = PASSAGE_TOKENS.min(decoder.spec().positions);
    set.passages
        .iter()
        .map(|p| decoder.tokens(p).ids.into_iter().take(most).collect::<Vec<u32>>())
        .filter(|ids| ids.len() > 1)
        .collect()
}
