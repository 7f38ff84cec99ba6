//! What the page measures on the trained model, as plain async functions over a [`Runner`]:
//! how far pruning moves the sentence embedding, each head's importance (one pass per head,
//! stepped so the page can take its turn between passes), the contrast with half the heads
//! pruned, and a check whose answer can flip: which of two sentences is closer in meaning to a
//! third. Natively the runner is the CPU kernel ([`Bert`] itself); in the page it is the GPU with
//! the CPU kernel as its fallback (`crate::backend::TrainedRunner`).

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

impl CheckAnswer {
    /// Whether this answer picks another sentence than `full`'s.
    pub fn flipped_from(&self, full: &CheckAnswer) -> bool {
        self.closer != full.closer
    }
}

/// Asks the model with only `heads` active which candidate is closer in meaning to the anchor.
pub async fn meaning_check(runner: &impl Runner, tokenizer: &Tokenizer, heads: &HeadSet) -> CheckAnswer {
    let embed = async |text: &str| {
        let ids: Vec<u32> = tokenizer.encode(text).iter().map(|t| t.id).collect();
        runner.run(&ids, heads, None).await.embedding
    };
    let anchor = embed(ANCHOR).await;
    let mut cosines = [0.0; 2];
    for (c, text) in cosines.iter_mut().zip(CANDIDATES) {
        *c = cosine(&anchor, &embed(text).await);
    }
    CheckAnswer { closer: usize::from(cosines[1] > cosines[0]), cosines, heads: heads.clone() }
}

/// Every head of layer `layer` (0-based) pruned, and no other.
pub fn layer_pruned(layer: usize) -> HeadSet {
    HeadSet::with_pruned(TOTAL_HEADS, layer * HEADS..(layer + 1) * HEADS)
}
