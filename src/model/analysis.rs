//! What the page measures on the trained model, as plain async functions over a [`Runner`]:
//! how far pruning moves the sentence embedding, each head's importance (one pass per head,
//! stepped so the page can take its turn between passes), the contrast with half the heads
//! pruned, and a check whose answer can flip: which of two sentences is closer in meaning to a
//! third, and how far each head alone moves that check's margin. Natively the runner is the CPU
//! kernel ([`Bert`] itself); in the page it is the GPU with the CPU kernel as its fallback
//! (`crate::backend::TrainedRunner`).

use std::sync::Arc;

use super::bert::{Bert, BertOutput, HEADS, TOTAL_HEADS};
use super::tokenizer::Tokenizer;
use crate::attention::importance::Ranking;
use crate::attention::{cosine, HeadSet};
use crate::cpu::Kernel;

/// Where the trained model's forward passes run.
// The page is single-threaded: its futures never move between threads, so no `Send` bound.
#[allow(async_fn_in_trait)]
pub trait Runner {
    /// The model on `ids` with only `heads` active, reusing `base`'s layers before the first
    /// one whose heads differ (see [`Bert::forward_from`]). Never fails: a runner that can fail
    /// falls back to one that cannot.
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput;
}

/// The CPU kernel.
impl Runner for Bert {
    async fn run(&self, ids: &[u32], heads: &HeadSet, base: Option<&BertOutput>) -> BertOutput {
        self.forward_from(Kernel::Simd, ids, heads, base)
    }
}

/// How far a pruned pass's sentence embedding moved from the full one: `1 - cosine`.
pub fn embedding_drift(full: &BertOutput, pruned: &BertOutput) -> f64 {
    1.0 - cosine(&full.embedding, &pruned.embedding)
}

/// How far the page's f16 weights may move the cosine of a pruned sentence embedding to the
/// full one from the float32 checkpoint's, at most: [`COSINE_ABS_ERROR`] absolutely, and
/// [`COSINE_DRIFT_ERROR`] of the drift `1 - cosine` (`tests/minilm.rs` measures both, with
/// headroom: 2.2e-4 and 1.2e-3 over its sentences and masks from one head to 66 pruned).
pub const COSINE_ABS_ERROR: f64 = 3e-4;
/// See [`COSINE_ABS_ERROR`].
pub const COSINE_DRIFT_ERROR: f64 = 2e-3;

/// How far the f16 weights may move the meaning check's margin (a difference of two cosines
/// between different sentences) from the float32 checkpoint's: `tests/minilm.rs` measures
/// 2.4e-4 over the masks it tries.
pub const MARGIN_ERROR: f64 = 3e-4;

/// Decimals whose last one is still above `error` (three to six).
fn decimals_above(error: f64) -> usize {
    if error > 0.0 {
        (-error.log10()).floor().clamp(3.0, 6.0) as usize
    } else {
        6
    }
}

/// A cosine of a pruned embedding to the full one, with the decimals the f16 weights support:
/// the last one shown is above the error bound of [`COSINE_ABS_ERROR`], so a large drift shows
/// three decimals and a tiny one up to six (a small drift is known to a fixed share of itself).
pub fn cosine_text(c: f64) -> String {
    let decimals = decimals_above(COSINE_ABS_ERROR.min(COSINE_DRIFT_ERROR * (1.0 - c).abs()));
    format!("{c:.decimals$}")
}

/// The meaning check's margin, or a change of it, with the decimals the f16 weights support
/// ([`MARGIN_ERROR`]); one more where those would round it to zero, so that a small margin's
/// sign shows ("-0.0004", not "-0.000", for a head that flips the check by just over the error).
pub fn margin_text(m: f64) -> String {
    let decimals = decimals_above(MARGIN_ERROR);
    let decimals =
        if m != 0.0 && m.abs() < 0.5 * 10f64.powi(-(decimals as i32)) { decimals + 1 } else { decimals };
    format!("{m:.decimals$}")
}

/// Every head's importance on one sentence: how far removing that head alone moves the
/// sentence embedding (`1 - cosine`). One pass per head, each reusing the unpruned pass's layers
/// before the head's own; [`ImportanceSweep::step`] runs one, so the caller decides what happens
/// between passes (the page lets the browser draw, and stops when the sentence changed).
#[derive(Clone, Debug)]
pub struct ImportanceSweep {
    ids: Vec<u32>,
    full: Arc<BertOutput>,
    values: Vec<f64>,
}

impl ImportanceSweep {
    /// A sweep over `ids`, whose unpruned pass is `full`.
    pub fn new(ids: Vec<u32>, full: Arc<BertOutput>) -> Self {
        ImportanceSweep { ids, full, values: Vec::with_capacity(TOTAL_HEADS) }
    }

    /// Heads measured so far.
    pub fn done(&self) -> usize {
        self.values.len()
    }

    /// Runs the next head's pass; `false` once every head is measured.
    pub async fn step(&mut self, runner: &impl Runner) -> bool {
        let h = self.values.len();
        if h == TOTAL_HEADS {
            return false;
        }
        let out = runner.run(&self.ids, &HeadSet::with_pruned(TOTAL_HEADS, [h]), Some(&self.full)).await;
        self.values.push(embedding_drift(&self.full, &out));
        self.values.len() < TOTAL_HEADS
    }

    /// The ranking, once every head is measured.
    pub fn ranking(&self) -> Option<Ranking> {
        (self.values.len() == TOTAL_HEADS).then(|| Ranking::new(self.values.clone()))
    }

    /// Runs every pass left and ranks the heads.
    pub async fn finish(mut self, runner: &impl Runner) -> Ranking {
        while self.step(runner).await {}
        Ranking::new(self.values)
    }
}

/// What pruning half the heads does to a sentence, beside what one head does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contrast {
    /// Embedding drift of removing the most important head alone.
    pub most: f64,
    /// The median head's.
    pub median: f64,
    /// Heads pruned: the least important half.
    pub pruned: usize,
    /// Cosine of the embedding with them pruned to the full one.
    pub cosine: f64,
}

/// Prunes the least important half of the heads of `ranking` on `ids` (unpruned pass `full`).
pub async fn contrast(runner: &impl Runner, ids: &[u32], full: &BertOutput, ranking: &Ranking) -> Contrast {
    let pruned = TOTAL_HEADS / 2;
    let half = runner.run(ids, &ranking.least(pruned), Some(full)).await;
    Contrast {
        most: ranking.max(),
        median: ranking.median().unwrap_or(0.0),
        pruned,
        cosine: cosine(&full.embedding, &half.embedding),
    }
}

/// The check's anchor: whose meaning are the candidates compared with?
pub const ANCHOR: &str = "I deposited my paycheck at the bank.";

/// The candidates: the full model reads "bank" in context and picks the financial sentence;
/// without layer 1's heads it falls back to the one that merely shares the word.
pub const CANDIDATES: [&str; 2] =
    ["We sat on the grassy bank by the river.", "The financial institution approved my loan."];

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
    /// This answer against `full`'s choice, with the weights' error in mind.
    pub fn verdict_from(&self, full: &CheckAnswer) -> Verdict {
        Verdict::of_margin(self.margin_toward(full.closer))
    }
}

/// Asks the model with only `heads` active which candidate is closer in meaning to the anchor.
pub async fn meaning_check(runner: &impl Runner, tokenizer: &Tokenizer, heads: &HeadSet) -> CheckAnswer {
    let embed = async |text: &str| {
        let ids: Vec<u32> = tokenizer.encode(text).iter().map(|t| t.id).collect();
        runner.run(&ids, heads, None).await.embedding
    };
    let anchor = embed(ANCHOR).await;
    let candidates = [embed(CANDIDATES[0]).await, embed(CANDIDATES[1]).await];
    answer(&anchor, [&candidates[0], &candidates[1]], heads)
}

/// Every head of layer `layer` (0-based) pruned, and no other.
pub fn layer_pruned(layer: usize) -> HeadSet {
    HeadSet::with_pruned(TOTAL_HEADS, layer * HEADS..(layer + 1) * HEADS)
}

impl CheckAnswer {
    /// How far this answer leans toward candidate `closer`: its cosine to the anchor minus the
    /// other's. With the full model's choice as `closer`, positive while that choice still wins.
    pub fn margin_toward(&self, closer: usize) -> f64 {
        self.cosines[closer] - self.cosines[1 - closer]
    }
}

/// The check's answer from the embeddings of the anchor and of each candidate.
fn answer(anchor: &[f32], candidates: [&[f32]; 2], heads: &HeadSet) -> CheckAnswer {
    let cosines = candidates.map(|c| cosine(anchor, c));
    CheckAnswer { closer: usize::from(cosines[1] > cosines[0]), cosines, heads: heads.clone() }
}

/// Every head's importance to the meaning check: the check's margin (toward the full model's
/// answer) with that head alone pruned. The three sentences' unpruned passes are kept, so each
/// head's passes reuse the layers before the head's own; [`MarginSweep::step`] measures one head,
/// as [`ImportanceSweep::step`] does.
#[derive(Clone, Debug)]
pub struct MarginSweep {
    /// The anchor's and the candidates' token ids and unpruned passes, in that order.
    sentences: Vec<(Vec<u32>, BertOutput)>,
    full: CheckAnswer,
    margins: Vec<f64>,
}

/// The meaning check's margin with each head alone pruned, beside the full model's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct MarginImportance {
    /// The answer with every head active.
    pub full: CheckAnswer,
    /// Per head, the margin toward `full`'s choice with that head alone pruned.
    pub margins: Vec<f64>,
}

impl MarginSweep {
    /// Runs the anchor and the candidates unpruned and asks the check with every head active.
    pub async fn start(runner: &impl Runner, tokenizer: &Tokenizer) -> MarginSweep {
        let all = HeadSet::all(TOTAL_HEADS);
        let mut sentences = Vec::with_capacity(3);
        for text in [ANCHOR, CANDIDATES[0], CANDIDATES[1]] {
            let ids: Vec<u32> = tokenizer.encode(text).iter().map(|t| t.id).collect();
            let out = runner.run(&ids, &all, None).await;
            sentences.push((ids, out));
        }
        let e = |i: usize| sentences[i].1.embedding.as_slice();
        let full = answer(e(0), [e(1), e(2)], &all);
        MarginSweep { sentences, full, margins: Vec::with_capacity(TOTAL_HEADS) }
    }

    /// The answer with every head active.
    pub fn full(&self) -> &CheckAnswer {
        &self.full
    }

    /// Heads measured so far.
    pub fn done(&self) -> usize {
        self.margins.len()
    }

    /// Runs the next head's three passes; `false` once every head is measured.
    pub async fn step(&mut self, runner: &impl Runner) -> bool {
        let h = self.margins.len();
        if h == TOTAL_HEADS {
            return false;
        }
        let heads = HeadSet::with_pruned(TOTAL_HEADS, [h]);
        let mut embeddings = Vec::with_capacity(3);
        for (ids, full) in &self.sentences {
            embeddings.push(runner.run(ids, &heads, Some(full)).await.embedding);
        }
        let pruned = answer(&embeddings[0], [&embeddings[1], &embeddings[2]], &heads);
        self.margins.push(pruned.margin_toward(self.full.closer));
        self.margins.len() < TOTAL_HEADS
    }

    /// The margins, once every head is measured.
    pub fn result(&self) -> Option<MarginImportance> {
        (self.margins.len() == TOTAL_HEADS)
            .then(|| MarginImportance { full: self.full.clone(), margins: self.margins.clone() })
    }

    /// Runs every pass left.
    pub async fn finish(mut self, runner: &impl Runner) -> MarginImportance {
        while self.step(runner).await {}
        MarginImportance { full: self.full, margins: self.margins }
    }
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

    /// What the margins say, in a sentence or two for the page: which heads flip the check alone
    /// (or, if none does, which moves it most), and which leave it too close to call.
    pub fn summary(&self) -> String {
        let name = |h: usize| format!("layer {} head {}", h / HEADS + 1, h % HEADS);
        let full = margin_text(self.full_margin());
        let listed = |heads: &[usize]| {
            let each = heads
                .iter()
                .map(|&h| format!("{} (margin {full} → {})", name(h), margin_text(self.margins[h])));
            each.collect::<Vec<_>>().join(", ")
        };
        let first = match (self.heads_with(Verdict::Flips).as_slice(), self.ranking().ranked.last().copied())
        {
            ([], Some(h)) => format!(
                "No single head's removal flips the meaning check (margin {full}); {} moves it most, to {}.",
                name(h),
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::attention::synthetic::hash32;
    use crate::model::bert::{Layer, Linear, Norm, D_MODEL, FFN, LAYERS, MAX_POSITIONS};

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
    fn a_cosine_shows_the_decimals_the_f16_weights_support() {
        // 1 - cosine 0.43: the error bound is 3e-4, three decimals.
        assert_eq!(cosine_text(0.571_278), "0.571");
        // 1 - cosine 0.1: 2e-4, still three.
        assert_eq!(cosine_text(0.894_423), "0.894");
        // 1 - cosine 0.003: 6e-6, five.
        assert_eq!(cosine_text(0.996_943_5), "0.99694");
        // 1 - cosine 3e-5: 6e-8, capped at six; nothing pruned is exactly one.
        assert_eq!(cosine_text(0.999_970_12), "0.999970");
        assert_eq!(cosine_text(1.0), "1.000000");
        assert_eq!(cosine_text(-0.25), "-0.250");
        // A margin's error is 3e-4 whatever its size: three decimals.
        assert_eq!((margin_text(0.022_814), margin_text(-0.004_23)), ("0.023".into(), "-0.004".into()));
        // Three decimals would show both as "-0.000": a flip by just over the error, and one
        // within it (too close to call), each with its sign.
        assert_eq!((margin_text(-4.1e-4), margin_text(-1.6e-4)), ("-0.0004".into(), "-0.0002".into()));
        assert_eq!((margin_text(0.0), margin_text(5e-4)), ("0.000".into(), "0.001".into()));
    }

    /// `len` deterministic values uniform in `(-scale, scale)`, a different stream for every `seed`.
    fn values(len: usize, seed: u32, scale: f32) -> Vec<f32> {
        let key = hash32(seed ^ 0x0dd_ba11);
        (0..len as u32).map(|i| scale * ((hash32(hash32(i ^ key)) >> 8) as f32 / 8_388_608.0 - 1.0)).collect()
    }

    /// A dense layer of unit gain: uniform weights of variance `1 / inp`.
    fn linear(out: usize, inp: usize, seed: u32) -> Linear {
        Linear { w: values(out * inp, seed, (3.0 / inp as f32).sqrt()), b: values(out, seed + 1, 0.1) }
    }

    fn norm(seed: u32) -> Norm {
        Norm {
            w: values(D_MODEL, seed, 0.2).iter().map(|v| 1.0 + v).collect(),
            b: values(D_MODEL, seed + 1, 0.1),
        }
    }

    /// A model of MiniLM's shape with made-up weights, and a tokenizer that knows the check's
    /// words: the real checkpoint is only for the tests under tests/.
    fn made_up_model() -> (Bert, Tokenizer) {
        let words =
            format!("{ANCHOR} {} {}", CANDIDATES[0], CANDIDATES[1]).to_lowercase().replace('.', " . ");
        let mut vocab: Vec<&str> = vec!["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
        for w in words.split_whitespace() {
            if !vocab.contains(&w) {
                vocab.push(w);
            }
        }
        let tokenizer = Tokenizer::from_vocab(&vocab.join("\n")).unwrap();
        let layers = (0..LAYERS)
            .map(|l| {
                let s = 20 * l as u32;
                Layer {
                    qkv: [
                        linear(D_MODEL, D_MODEL, s + 1),
                        linear(D_MODEL, D_MODEL, s + 3),
                        linear(D_MODEL, D_MODEL, s + 5),
                    ],
                    out: linear(D_MODEL, D_MODEL, s + 7),
                    ln1: norm(s + 9),
                    ffn_in: linear(FFN, D_MODEL, s + 11),
                    ffn_out: linear(D_MODEL, FFN, s + 13),
                    ln2: norm(s + 15),
                }
            })
            .collect();
        let bert = Bert {
            word: values(vocab.len() * D_MODEL, 200, 1.0),
            position: values(MAX_POSITIONS * D_MODEL, 202, 0.3),
            token_type: values(D_MODEL, 204, 0.1),
            ln_embed: norm(206),
            layers,
        };
        (bert, tokenizer)
    }

    #[test]
    fn the_margin_sweep_is_each_heads_own_meaning_check() {
        let (bert, tok) = made_up_model();
        let all = HeadSet::all(TOTAL_HEADS);
        let mut sweep = pollster::block_on(MarginSweep::start(&bert, &tok));
        assert_eq!(sweep.full(), &pollster::block_on(meaning_check(&bert, &tok, &all)));
        assert!(sweep.result().is_none());
        let (mut steps, mut part_way) = (0, None);
        while pollster::block_on(sweep.step(&bert)) {
            steps += 1;
            assert!(sweep.result().is_none());
            if sweep.done() == 60 {
                part_way = Some(sweep.clone());
            }
        }
        assert_eq!((steps + 1, sweep.done()), (TOTAL_HEADS, TOTAL_HEADS));
        assert!(!pollster::block_on(sweep.step(&bert)), "nothing left to step");
        let result = sweep.result().unwrap();
        assert_eq!(result, pollster::block_on(part_way.unwrap().finish(&bert)), "stepped vs finished");

        let full_margin = result.full_margin();
        assert!(full_margin >= 0.0 && full_margin == result.full.margin_toward(result.full.closer));
        let ranking = result.ranking();
        for h in [0, 13, 40, 71] {
            let direct =
                pollster::block_on(meaning_check(&bert, &tok, &HeadSet::with_pruned(TOTAL_HEADS, [h])));
            let margin = direct.margin_toward(result.full.closer);
            assert!((result.margins[h] - margin).abs() < 1e-9, "head {h}: {} vs {margin}", result.margins[h]);
            assert_eq!(direct.closer != result.full.closer, margin < 0.0, "head {h}");
        }
        for (h, m) in result.margins.iter().enumerate() {
            assert!((ranking.per_head[h] - (full_margin - m).abs()).abs() < 1e-15, "head {h}");
        }
        let flips = result.heads_with(Verdict::Flips);
        assert!(flips.windows(2).all(|w| w[0] < w[1]), "{flips:?}");
        assert_eq!(
            flips,
            (0..TOTAL_HEADS).filter(|&h| result.margins[h] < -MARGIN_ERROR).collect::<Vec<_>>()
        );
        let (holds, close) = (result.heads_with(Verdict::Holds), result.heads_with(Verdict::TooClose));
        assert_eq!(flips.len() + holds.len() + close.len(), TOTAL_HEADS, "every head has one verdict");
        assert!(result.margins.iter().any(|&m| m != full_margin), "some head matters");
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
            result.summary(),
            "Removing one head alone flips the meaning check for each of these heads: layer 1 head 1 \
             (margin 0.500 → -0.125), layer 1 head 4 (margin 0.500 → -1.000). Too close to call for \
             layer 1 head 2 (margin 0.500 → 0.000): the margin is within the f16 weights' error \
             (0.0003) of zero, so the float32 model may answer either way."
        );
        // No flip: the head that moves it most; a margin just over the error keeps its sign.
        let full = result.full.clone();
        let calm = MarginImportance { full: full.clone(), margins: vec![0.5, 0.25, 0.45] };
        assert_eq!(
            calm.summary(),
            "No single head's removal flips the meaning check (margin 0.500); layer 1 head 1 moves it \
             most, to 0.250."
        );
        let one = MarginImportance { full, margins: vec![0.5, -4.1e-4, 0.45] };
        assert!(one.summary().starts_with("Removing one head alone flips the meaning check for this head: layer 1 head 1 (margin 0.500 → -0.0004)."));
        assert_eq!(result.ranking().per_head, vec![0.0, 0.625, 0.5, 0.125, 1.5]);
        assert_eq!(result.ranking().rank(4), Some(1));
    }
}
