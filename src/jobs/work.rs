//! Pieces of the trained model's batch work that can run on another thread: the page hands
//! them to its web workers (each has its own wasm instance and its own copy of the model, and
//! shares no memory with the page, so it works in an iframe that is not cross-origin isolated)
//! or runs them itself, one at a time, with `?threads=1`.
//!
//! A piece is self-contained (the heads kept and every token id it needs), and its result does
//! not depend on where it ran: the same wasm code on the same inputs gives the same bits, so
//! the page's numbers are equal with one thread or several.
//!
//! The wire format (little-endian; what [`Work::encode`] writes and [`Work::decode`] reads):
//!
//! ```text
//! work:   "HLW3" tag:u8 body                done:  "HLD2" tag:u8 body
//! heads:  n:u32 then n bytes (1 = kept)     tag 0: Embeddings  count:u32 dim:u32 count*dim f32
//! ids:    n:u32 then n u32                  tag 1: HeadSums    n:u32 n f64
//! tag 0 (Embed):     precision:u8 (0 = the loaded model's, 1 = f16, 2 = 8-bit), heads, count:u32 then count ids
//! tag 1 (Gradients): heads, count:u32 then count (ids ids score:f64)
//! tag 2 (Ablate):    heads, count:u32 then count head:u32, count:u32 then count ids,
//!                    traces:u32 (0 or one per sentence) then each: layers:u32, embedding,
//!                    then per layer its input and its heads' outputs (floats: n:u32 n f32)
//! tag 3 (Roles):     count:u32 then count (ids, n:u32 then n bytes: 1 = punctuation)
//! tag 4 (Patch):     ids (clean), ids (corrupted), count:u32 then count head:u32
//! tag 5 (Atlas):     count:u32 then count ids
//! ```
//!
//! Decoding checks every length against what is left and against the limits below, so a
//! damaged message is refused with a [`WireError`], never half-read; [`Work::check`] then checks
//! the piece against the model that is to run it.

use std::sync::Arc;

use crate::attention::atlas::PatternSums;
use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::cpu::Kernel;
use crate::model::encoder::bert::{Bert, BertOutput, Patch};
use crate::model::encoder::gradient::pair_gradients;
use crate::model::encoder::pruned::{cost, PrunedBert};
use crate::model::encoder::roles::RoleCounter;
use crate::model::layers::backward::gates;
use crate::model::spec::ModelSpec;

/// A head-gate gradient pass (a forward and a backward pass) counted as this many forward
/// passes of the same sentences, for timing estimates: the backward pass is about twice a forward.
pub const GRADIENT_COST: u64 = 3;

/// Most sentences (or pairs, or heads removed) in one piece.
pub const MAX_ITEMS: usize = 4096;

/// Most tokens in one sentence of a message (the model's own positions are checked by
/// [`Work::check`]).
pub const MAX_TOKENS: usize = 8192;

/// Most heads a message's head set may have, and most values in a result.
pub const MAX_VALUES: usize = 1 << 20;

/// FLOPs counted for one term of a Jensen-Shannon divergence (a logarithm and a few products).
pub const JS_TERM_FLOPS: u64 = 20;

/// Whether `traces` can start the passes of an ablation of `sentences` with `heads` on a model
/// of shape `spec`: none, or one per sentence of its length with `heads`, an embedding of the
/// model's width, and every layer's input and heads' outputs of `n x d_model`.
fn traces_fit(spec: &ModelSpec, heads: &HeadSet, sentences: &[Vec<u32>], traces: &[Arc<BertOutput>]) -> bool {
    let fits = |ids: &Vec<u32>, t: &Arc<BertOutput>| {
        let rows = ids.len() * spec.d_model;
        t.seq_len == ids.len()
            && t.heads == *heads
            && t.embedding.len() == spec.d_model
            && t.layer_inputs.len() == spec.layers
            && t.head_outputs.len() == spec.layers
            && t.layer_inputs.iter().all(|x| x.len() == rows)
            && t.head_outputs.iter().all(|x| x.len() == rows)
    };
    traces.is_empty()
        || (traces.len() == sentences.len() && sentences.iter().zip(traces).all(|(s, t)| fits(s, t)))
}

/// What a piece's bytes start with (a page and a worker of different builds refuse each other's).
const WORK_TAG: &[u8; 4] = b"HLW4";

/// Two sentences' token ids and their similarity score in `[0, 1]`.
pub type Pair = (Vec<u32>, Vec<u32>, f64);

/// FLOPs of [`Work::Ablate`] on one sentence of `n` tokens for a model of shape `spec`: one
/// unpruned pass, then for each head of `ablate` the layers after its own and, in its own layer,
/// the output projection and the feed-forward layer (its heads' outputs are the unpruned pass's:
/// [`Bert::forward_from`]). The passes run the masked model, which computes every head, so each
/// layer costs a full one.
pub fn ablation_flops(spec: &ModelSpec, n: usize, ablate: &[usize]) -> u64 {
    let (layers, all) = (spec.layers as u64, cost(spec, &HeadSet::all(spec.total_heads()), &[n]));
    let layer = all.total_flops / layers;
    // The head's own layer: all but its attention, then the output projection (`n x d x d`).
    let own = layer - all.attention_flops / layers + 2 * (n * spec.d_model * spec.d_model) as u64;
    let passes = ablate.iter().map(|&h| (layers - 1 - spec.layer_of(h) as u64) * layer + own);
    layers * layer + passes.sum::<u64>()
}

/// The heads of a model with `total` heads dealt out to `pieces` pieces: head `h` goes to piece
/// `h % pieces`, so every piece holds heads of every layer and their passes cost about the same.
pub fn ablation_deal(total: usize, pieces: usize) -> Vec<Vec<usize>> {
    let pieces = pieces.clamp(1, total.max(1));
    (0..pieces).map(|i| (i..total).step_by(pieces).collect()).collect()
}

/// Every head of `bert`'s model removed alone, on `sentences`, as `pieces` pieces of
/// [`Work::Ablate`] dealt as [`ablation_deal`] deals them (a few per thread, or one per head
/// where the page's own thread runs them and draws between heads), each handed `traces` (the
/// sentences' unpruned passes, or none).
pub fn ablation_pieces(
    spec: &ModelSpec,
    sentences: &[Vec<u32>],
    pieces: usize,
    traces: &[Arc<BertOutput>],
) -> Vec<Work> {
    let piece = |ablate| Work::Ablate {
        heads: HeadSet::all(spec.total_heads()),
        sentences: sentences.to_vec(),
        ablate,
        traces: traces.to_vec(),
    };
    ablation_deal(spec.total_heads(), pieces).into_iter().map(piece).collect()
}

/// A piece of work.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// The sentence embeddings of `ids` by the model with only `heads` kept, really pruned, at
    /// `precision` (`None`: the precision the model was loaded at, the page's).
    Embed {
        /// The heads kept.
        heads: HeadSet,
        /// Each sentence's token ids.
        ids: Vec<Vec<u32>>,
        /// The precision of the model that embeds them, when it is not the loaded model's (a
        /// worker makes a copy at that precision: [`crate::jobs::copies::Copies`]).
        precision: Option<Precision>,
    },
    /// Over `pairs`, the sum of each head's `|dL/d gate|` with only `heads` kept
    /// ([`pair_gradients`]).
    Gradients {
        /// The heads kept.
        heads: HeadSet,
        /// The pairs.
        pairs: Vec<Pair>,
    },
    /// The embeddings of `sentences` with `heads`, then with each head of `ablate` removed alone
    /// from `heads` ([`Done::Embeddings`]: every sentence's unpruned embedding, then, head by
    /// head in `ablate`'s order, every sentence's).
    Ablate {
        /// The heads kept before each removal.
        heads: HeadSet,
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
        /// The heads removed, one at a time.
        ablate: Vec<usize>,
        /// The passes of `sentences` with `heads` that the page ran already, one per sentence,
        /// with every layer's input and heads' outputs (what a pass without one head starts
        /// from; no attention weights), or none: the piece runs them itself.
        traces: Vec<Arc<BertOutput>>,
    },
    /// Activation patching ([`crate::model::encoder::patching`]): the unpruned model's embeddings of `clean` and
    /// `corrupted` (the same number of tokens), then for each head of `patch` in order, the
    /// corrupted run with that head's output taken from the clean run, and the clean run with
    /// that head removed ([`Done::Embeddings`]: clean, corrupted, then two per head).
    Patch {
        /// The clean sentence's token ids.
        clean: Vec<u32>,
        /// The corrupted sentence's, as many.
        corrupted: Vec<u32>,
        /// The heads patched (and removed), one at a time.
        patch: Vec<usize>,
    },
    /// How alike every two heads of the full model attend over `sentences`, summed for the head
    /// atlas ([`Done::HeadSums`], [`PatternSums::to_sums`]).
    Atlas {
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
    },
    /// Where every head of the full model attends over `sentences`, summed for
    /// [`RoleCounter`] ([`Done::HeadSums`], [`RoleCounter::to_sums`]).
    Roles {
        /// The sentences' token ids.
        sentences: Vec<Vec<u32>>,
        /// Per sentence, per token: whether it is punctuation.
        punctuation: Vec<Vec<bool>>,
    },
}

/// What a piece of work gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Done {
    /// Embeddings, in the order the piece says.
    Embeddings(Vec<Vec<f32>>),
    /// Sums per head (one per head, or a fixed number per head for [`Work::Roles`]).
    HeadSums(Vec<f64>),
}

/// Why a message between the page and a worker could not be read, or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// It does not start as a message of this kind does.
    NotAMessage,
    /// It ends before what it announces.
    Truncated,
    /// An unknown kind of work or result.
    UnknownTag(u8),
    /// A count over the limits, or a token id or head set this model cannot run.
    OutOfRange(&'static str),
    /// Bytes after the end of the message.
    TrailingBytes,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::NotAMessage => write!(f, "a worker message is not one headlab sends"),
            WireError::Truncated => write!(f, "a worker message ends early"),
            WireError::UnknownTag(t) => write!(f, "a worker message has an unknown kind ({t})"),
            WireError::OutOfRange(what) => write!(f, "a worker message has {what} out of range"),
            WireError::TrailingBytes => write!(f, "a worker message has bytes after its end"),
        }
    }
}

impl std::error::Error for WireError {}

impl Work {
    /// Floating-point operations this piece takes on a model of shape `spec`, counted from its
    /// shapes (gradients as [`GRADIENT_COST`] forward passes, an ablation as [`ablation_flops`]
    /// per sentence).
    pub fn flops(&self, spec: &ModelSpec) -> u64 {
        let all = HeadSet::all(spec.total_heads());
        let lengths = |s: &[Vec<u32>]| s.iter().map(Vec::len).collect::<Vec<_>>();
        match self {
            Work::Embed { heads, ids, .. } => cost(spec, heads, &lengths(ids)).total_flops,
            Work::Gradients { heads, pairs } => {
                let lengths: Vec<usize> = pairs.iter().flat_map(|(a, b, _)| [a.len(), b.len()]).collect();
                GRADIENT_COST * cost(spec, heads, &lengths).total_flops
            }
            Work::Ablate { sentences, ablate, traces, .. } => {
                // A pass the page handed over is not run again.
                let handed = |n: usize| if traces.is_empty() { 0 } else { ablation_flops(spec, n, &[]) };
                sentences.iter().map(|s| ablation_flops(spec, s.len(), ablate) - handed(s.len())).sum()
            }
            Work::Roles { sentences, .. } => cost(spec, &all, &lengths(sentences)).total_flops,
            // Removing a head and patching it cost the same: from its own layer on.
            Work::Patch { clean, patch, .. } => 2 * ablation_flops(spec, clean.len(), patch),
            Work::Atlas { sentences } => {
                let (total, pairs) =
                    (spec.total_heads() as u64, PatternSums::sums_len(spec.total_heads()) as u64);
                let rows: u64 = sentences.iter().map(|s| (s.len() * s.len()) as u64).sum();
                cost(spec, &all, &lengths(sentences)).total_flops + rows * (pairs + total) * JS_TERM_FLOPS
            }
        }
    }

    /// The precision the piece asks the model to run at, if it names one.
    pub fn precision(&self) -> Option<Precision> {
        match self {
            Work::Embed { precision, .. } => *precision,
            _ => None,
        }
    }

    /// Runs the piece on `bert` with `kernel`. The piece must fit the model ([`Work::check`]).
    pub fn run(&self, bert: &Bert, kernel: Kernel) -> Done {
        match self {
            Work::Embed { heads, ids, .. } => {
                Done::Embeddings(PrunedBert::new(bert, heads).embed_batch(kernel, ids))
            }
            Work::Gradients { heads, pairs } => {
                let g = gates(heads);
                let mut sums = vec![0.0; bert.spec().total_heads()];
                for (u, v, y) in pairs {
                    let (_, grads) = pair_gradients(bert, kernel, u, v, *y, &g);
                    sums.iter_mut().zip(&grads).for_each(|(s, d)| *s += d.abs());
                }
                Done::HeadSums(sums)
            }
            Work::Ablate { heads, sentences, ablate, traces } => {
                // Each pass reuses the layers before its head's own, as the page's sweep does.
                let full: Vec<Arc<BertOutput>> = match traces.is_empty() {
                    true => sentences.iter().map(|ids| Arc::new(bert.forward(kernel, ids, heads))).collect(),
                    false => traces.clone(),
                };
                let mut out: Vec<Vec<f32>> = full.iter().map(|f| f.embedding.clone()).collect();
                for &h in ablate {
                    let mut without = heads.clone();
                    without.set(h, false);
                    for (ids, full) in sentences.iter().zip(&full) {
                        out.push(bert.embed_patched(kernel, ids, &without, Some(full), None));
                    }
                }
                Done::Embeddings(out)
            }
            Work::Patch { clean, corrupted, patch } => {
                let all = HeadSet::all(bert.spec().total_heads());
                let (clean_run, corrupted_run) =
                    (bert.forward(kernel, clean, &all), bert.forward(kernel, corrupted, &all));
                let mut out = vec![clean_run.embedding.clone(), corrupted_run.embedding.clone()];
                for &h in patch {
                    let from = Patch { heads: &[h], from: &clean_run };
                    out.push(bert.embed_patched(kernel, corrupted, &all, Some(&corrupted_run), Some(from)));
                    let without = HeadSet::with_pruned(all.len(), [h]);
                    out.push(bert.embed_patched(kernel, clean, &without, Some(&clean_run), None));
                }
                Done::Embeddings(out)
            }
            Work::Atlas { sentences } => {
                let all = HeadSet::all(bert.spec().total_heads());
                let mut sums = PatternSums::new(all.len());
                for ids in sentences {
                    sums.add(&bert.forward(kernel, ids, &all).attention, ids.len());
                }
                Done::HeadSums(sums.to_sums())
            }
            Work::Roles { sentences, punctuation } => {
                let (spec, mut counter) = (bert.spec(), RoleCounter::new(bert.spec()));
                let all = HeadSet::all(spec.total_heads());
                for (ids, punctuation) in sentences.iter().zip(punctuation) {
                    counter.add(&bert.forward(kernel, ids, &all).attention, punctuation);
                }
                Done::HeadSums(counter.to_sums())
            }
        }
    }

    /// Whether `bert` can run this piece: one flag per head, heads removed among them, token ids
    /// in its vocabulary, no sentence longer than its positions or empty, and a punctuation flag
    /// per token.
    pub fn check(&self, bert: &Bert) -> Result<(), WireError> {
        let spec = bert.spec();
        let (heads, sentences): (Option<&HeadSet>, Vec<&Vec<u32>>) = match self {
            Work::Embed { heads, ids, .. } => (Some(heads), ids.iter().collect()),
            Work::Gradients { heads, pairs } => {
                (Some(heads), pairs.iter().flat_map(|(u, v, _)| [u, v]).collect())
            }
            Work::Ablate { heads, sentences, traces, .. } => {
                if !traces_fit(spec, heads, sentences, traces) {
                    return Err(WireError::OutOfRange("a handed pass"));
                }
                (Some(heads), sentences.iter().collect())
            }
            Work::Roles { sentences, .. } => (None, sentences.iter().collect()),
            Work::Patch { clean, corrupted, .. } => (None, vec![clean, corrupted]),
            Work::Atlas { sentences } => (None, sentences.iter().collect()),
        };
        if heads.is_some_and(|h| h.len() != spec.total_heads()) {
            return Err(WireError::OutOfRange("a head set"));
        }
        match self {
            Work::Ablate { ablate: heads, .. } | Work::Patch { patch: heads, .. }
                if heads.iter().any(|&h| h >= spec.total_heads()) =>
            {
                return Err(WireError::OutOfRange("a head"));
            }
            Work::Patch { clean, corrupted, .. } if clean.len() != corrupted.len() => {
                return Err(WireError::OutOfRange("a patched pair's length"));
            }
            Work::Roles { sentences, punctuation }
                if punctuation.len() != sentences.len()
                    || sentences.iter().zip(punctuation).any(|(s, p)| s.len() != p.len()) =>
            {
                return Err(WireError::OutOfRange("a punctuation flag"));
            }
            _ => {}
        }
        let vocab = bert.vocab_size();
        let fits = |s: &&Vec<u32>| {
            !s.is_empty() && s.len() <= spec.positions && s.iter().all(|&t| (t as usize) < vocab)
        };
        if !sentences.iter().all(fits) {
            return Err(WireError::OutOfRange("a token id or sentence length"));
        }
        Ok(())
    }

    /// Whether `done` can be this piece's result on a model of shape `spec`: an embedding of the
    /// model's width per sentence (and per head removed), or the sums per head.
    pub fn accepts(&self, spec: &ModelSpec, done: &Done) -> bool {
        let embeddings =
            |e: &[Vec<f32>], count: usize| e.len() == count && e.iter().all(|v| v.len() == spec.d_model);
        match (self, done) {
            (Work::Embed { ids, .. }, Done::Embeddings(e)) => embeddings(e, ids.len()),
            (Work::Ablate { sentences, ablate, .. }, Done::Embeddings(e)) => {
                embeddings(e, sentences.len() * (1 + ablate.len()))
            }
            (Work::Patch { patch, .. }, Done::Embeddings(e)) => embeddings(e, 2 + 2 * patch.len()),
            (Work::Gradients { .. }, Done::HeadSums(s)) => s.len() == spec.total_heads(),
            (Work::Roles { .. }, Done::HeadSums(s)) => s.len() == RoleCounter::sums_len(spec),
            (Work::Atlas { .. }, Done::HeadSums(s)) => s.len() == PatternSums::sums_len(spec.total_heads()),
            _ => false,
        }
    }

    /// The piece as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(WORK_TAG.to_vec());
        match self {
            Work::Embed { heads, ids, precision } => {
                w.u8(0);
                w.u8(precision
                    .map_or(0, |p| 1 + Precision::ALL.iter().position(|q| *q == p).unwrap_or(0) as u8));
                w.heads(heads);
                w.u32(ids.len());
                ids.iter().for_each(|s| w.ids(s));
            }
            Work::Gradients { heads, pairs } => {
                w.u8(1);
                w.heads(heads);
                w.u32(pairs.len());
                for (u, v, y) in pairs {
                    w.ids(u);
                    w.ids(v);
                    w.0.extend(y.to_le_bytes());
                }
            }
            Work::Ablate { heads, sentences, ablate, traces } => {
                w.u8(2);
                w.heads(heads);
                w.u32(ablate.len());
                ablate.iter().for_each(|&h| w.u32(h));
                w.u32(sentences.len());
                sentences.iter().for_each(|s| w.ids(s));
                w.u32(traces.len());
                // The passes' bytes, written below, reserved at once.
                let layers = |t: &BertOutput| {
                    t.layer_inputs
                        .iter()
                        .zip(&t.head_outputs)
                        .map(|(i, o)| 8 + 4 * (i.len() + o.len()))
                        .sum::<usize>()
                };
                w.0.reserve(traces.iter().map(|t| 8 + 4 * t.embedding.len() + layers(t)).sum());
                for t in traces {
                    w.u32(t.layer_inputs.len());
                    w.floats(&t.embedding);
                    for (input, outs) in t.layer_inputs.iter().zip(&t.head_outputs) {
                        w.floats(input);
                        w.floats(outs);
                    }
                }
            }
            Work::Patch { clean, corrupted, patch } => {
                w.u8(4);
                w.ids(clean);
                w.ids(corrupted);
                w.u32(patch.len());
                patch.iter().for_each(|&h| w.u32(h));
            }
            Work::Atlas { sentences } => {
                w.u8(5);
                w.u32(sentences.len());
                sentences.iter().for_each(|s| w.ids(s));
            }
            Work::Roles { sentences, punctuation } => {
                w.u8(3);
                w.u32(sentences.len());
                for (s, p) in sentences.iter().zip(punctuation) {
                    w.ids(s);
                    w.u32(p.len());
                    w.0.extend(p.iter().map(|&b| u8::from(b)));
                }
            }
        }
        w.0
    }

    /// A piece from [`Work::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Work, WireError> {
        let mut r = Reader::new(bytes, WORK_TAG)?;
        let work = match r.u8()? {
            0 => {
                let precision = match r.u8()? {
                    0 => None,
                    p => Some(
                        *Precision::ALL.get(p as usize - 1).ok_or(WireError::OutOfRange("a precision"))?,
                    ),
                };
                let heads = r.heads()?;
                let count = r.count(MAX_ITEMS)?;
                let ids = (0..count).map(|_| r.ids()).collect::<Result<_, _>>()?;
                Work::Embed { heads, ids, precision }
            }
            1 => {
                let heads = r.heads()?;
                let count = r.count(MAX_ITEMS)?;
                let pairs = (0..count).map(|_| Ok((r.ids()?, r.ids()?, r.f64()?)));
                Work::Gradients { heads, pairs: pairs.collect::<Result<_, _>>()? }
            }
            2 => {
                let heads = r.heads()?;
                let count = r.count(MAX_ITEMS)?;
                let ablate = (0..count).map(|_| r.count(u32::MAX as usize)).collect::<Result<_, _>>()?;
                let count = r.count(MAX_ITEMS)?;
                let sentences: Vec<Vec<u32>> = (0..count).map(|_| r.ids()).collect::<Result<_, _>>()?;
                let traces = match r.count(count)? {
                    0 => Vec::new(),
                    n if n == count => {
                        sentences.iter().map(|ids| r.trace(ids.len(), &heads)).collect::<Result<_, _>>()?
                    }
                    _ => return Err(WireError::OutOfRange("a count of handed passes")),
                };
                Work::Ablate { heads, ablate, sentences, traces }
            }
            3 => {
                let count = r.count(MAX_ITEMS)?;
                let (mut sentences, mut punctuation) = (Vec::new(), Vec::new());
                for _ in 0..count {
                    sentences.push(r.ids()?);
                    punctuation.push(r.flags()?);
                }
                Work::Roles { sentences, punctuation }
            }
            4 => {
                let (clean, corrupted) = (r.ids()?, r.ids()?);
                let count = r.count(MAX_ITEMS)?;
                let patch = (0..count).map(|_| r.count(u32::MAX as usize)).collect::<Result<_, _>>()?;
                Work::Patch { clean, corrupted, patch }
            }
            5 => {
                let count = r.count(MAX_ITEMS)?;
                Work::Atlas { sentences: (0..count).map(|_| r.ids()).collect::<Result<_, _>>()? }
            }
            t => return Err(WireError::UnknownTag(t)),
        };
        r.end()?;
        Ok(work)
    }
}

impl Done {
    /// The embeddings of several pieces' results, in order (other results have none).
    pub fn embeddings(done: Vec<Done>) -> Vec<Vec<f32>> {
        done.into_iter()
            .flat_map(|d| match d {
                Done::Embeddings(e) => e,
                Done::HeadSums(_) => Vec::new(),
            })
            .collect()
    }

    /// The result as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(b"HLD2".to_vec());
        match self {
            Done::Embeddings(e) => {
                w.u8(0);
                w.u32(e.len());
                w.u32(e.first().map_or(0, Vec::len));
                e.iter().flatten().for_each(|x| w.0.extend(x.to_le_bytes()));
            }
            Done::HeadSums(s) => {
                w.u8(1);
                w.u32(s.len());
                s.iter().for_each(|x| w.0.extend(x.to_le_bytes()));
            }
        }
        w.0
    }

    /// A result from [`Done::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Done, WireError> {
        let mut r = Reader::new(bytes, b"HLD2")?;
        let done = match r.u8()? {
            0 => {
                let (count, dim) = (r.count(MAX_ITEMS * MAX_ITEMS)?, r.count(MAX_VALUES)?);
                // The values must be there before anything is allocated for them.
                if (r.rest.len() as u64) < count as u64 * dim as u64 * 4 {
                    return Err(WireError::Truncated);
                }
                let mut e = Vec::with_capacity(count);
                for _ in 0..count {
                    e.push((0..dim).map(|_| r.f32()).collect::<Result<Vec<f32>, _>>()?);
                }
                Done::Embeddings(e)
            }
            1 => {
                let n = r.count(MAX_VALUES)?;
                Done::HeadSums((0..n).map(|_| r.f64()).collect::<Result<_, _>>()?)
            }
            t => return Err(WireError::UnknownTag(t)),
        };
        r.end()?;
        Ok(done)
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u32(&mut self, v: usize) {
        self.0.extend(u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
    }

    fn heads(&mut self, heads: &HeadSet) {
        self.u32(heads.len());
        self.0.extend((0..heads.len()).map(|h| u8::from(heads.is_active(h))));
    }

    fn ids(&mut self, ids: &[u32]) {
        self.u32(ids.len());
        ids.iter().for_each(|t| self.0.extend(t.to_le_bytes()));
    }

    /// `values` after their count, sized once and written in place: a piece handing a 503-token
    /// pass to a worker holds 9 MB of them, and grown four bytes at a time the buffer's growth
    /// and copies took 0.2 s of the page's thread per sweep (BENCHMARKS.md section 13).
    fn floats(&mut self, values: &[f32]) {
        self.u32(values.len());
        let start = self.0.len();
        self.0.resize(start + 4 * values.len(), 0);
        for (bytes, v) in self.0[start..].chunks_exact_mut(4).zip(values) {
            bytes.copy_from_slice(&v.to_le_bytes());
        }
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], magic: &[u8; 4]) -> Result<Self, WireError> {
        match bytes.strip_prefix(magic.as_slice()) {
            Some(rest) => Ok(Reader { rest }),
            None => Err(WireError::NotAMessage),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let (head, rest) = self.rest.split_first_chunk::<N>().ok_or(WireError::Truncated)?;
        self.rest = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take::<1>()?[0])
    }

    fn f32(&mut self) -> Result<f32, WireError> {
        Ok(f32::from_le_bytes(self.take()?))
    }

    fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_le_bytes(self.take()?))
    }

    /// A count of at most `max`.
    fn count(&mut self, max: usize) -> Result<usize, WireError> {
        let n = u32::from_le_bytes(self.take()?) as usize;
        if n > max {
            return Err(WireError::OutOfRange("a count"));
        }
        Ok(n)
    }

    fn heads(&mut self) -> Result<HeadSet, WireError> {
        let n = self.count(MAX_VALUES)?;
        let flags = self.rest.get(..n).ok_or(WireError::Truncated)?;
        if flags.iter().any(|&f| f > 1) {
            return Err(WireError::OutOfRange("a head flag"));
        }
        let heads = HeadSet::with_pruned(n, (0..n).filter(|&h| flags[h] == 0));
        self.rest = &self.rest[n..];
        Ok(heads)
    }

    fn ids(&mut self) -> Result<Vec<u32>, WireError> {
        let n = self.count(MAX_TOKENS)?;
        (0..n).map(|_| Ok(u32::from_le_bytes(self.take()?))).collect()
    }

    /// `n:u32` then `n` f32, within what is left.
    fn floats(&mut self) -> Result<Vec<f32>, WireError> {
        let n = self.count(u32::MAX as usize)?;
        let len = n.checked_mul(4).ok_or(WireError::Truncated)?;
        let bytes = self.rest.get(..len).ok_or(WireError::Truncated)?;
        self.rest = &self.rest[len..];
        Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    /// A handed pass of a sentence of `n` tokens with `heads` (its shape is checked against the
    /// model by [`Work::check`]).
    fn trace(&mut self, n: usize, heads: &HeadSet) -> Result<Arc<BertOutput>, WireError> {
        let layers = self.count(MAX_TOKENS)?;
        let embedding = self.floats()?;
        let (mut layer_inputs, mut head_outputs) = (Vec::new(), Vec::new());
        for _ in 0..layers {
            layer_inputs.push(self.floats()?);
            head_outputs.push(Arc::new(self.floats()?));
        }
        Ok(Arc::new(BertOutput {
            embedding,
            attention: Vec::new(),
            head_outputs,
            seq_len: n,
            layer_inputs,
            heads: heads.clone(),
            first_computed: 0,
        }))
    }

    /// `n:u32` then `n` bytes, each 0 or 1.
    fn flags(&mut self) -> Result<Vec<bool>, WireError> {
        let n = self.count(MAX_TOKENS)?;
        let bytes = self.rest.get(..n).ok_or(WireError::Truncated)?;
        if bytes.iter().any(|&b| b > 1) {
            return Err(WireError::OutOfRange("a flag"));
        }
        self.rest = &self.rest[n..];
        Ok(bytes.iter().map(|&b| b == 1).collect())
    }

    fn end(&self) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(WireError::TrailingBytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: ModelSpec = ModelSpec::MINILM_L6_V2;
    const TOTAL: usize = 72;

    fn samples() -> Vec<Work> {
        let heads = HeadSet::with_pruned(TOTAL, [0, 13, 71]);
        vec![
            Work::Embed {
                heads: heads.clone(),
                ids: vec![vec![101, 7592, 102], vec![101, 102]],
                precision: None,
            },
            Work::Embed { heads: HeadSet::all(TOTAL), ids: vec![], precision: Some(Precision::Int8) },
            Work::Gradients { heads: heads.clone(), pairs: vec![(vec![101, 2, 102], vec![101, 102], 0.25)] },
            Work::Ablate {
                heads: heads.clone(),
                sentences: vec![vec![101, 7592, 102], vec![101, 102]],
                ablate: vec![1, 2, 70],
                // (Shapes a model would refuse: the wire carries whatever it is given.)
                traces: [3, 2].map(|n| tiny_trace(n, &heads)).to_vec(),
            },
            Work::Roles {
                sentences: vec![vec![101, 1012, 102], vec![101, 102]],
                punctuation: vec![vec![false, true, false], vec![false, false]],
            },
            Work::Patch {
                clean: vec![101, 7592, 102],
                corrupted: vec![101, 2088, 102],
                patch: vec![0, 71, 5],
            },
            Work::Atlas { sentences: vec![vec![101, 7592, 102], vec![101, 102]] },
        ]
    }

    /// A pass of `n` tokens with `heads` of two layers of two values per token.
    fn tiny_trace(n: usize, heads: &HeadSet) -> Arc<BertOutput> {
        let values = |seed: f32| (0..2 * n).map(|i| seed + i as f32 / 8.0).collect::<Vec<f32>>();
        Arc::new(BertOutput {
            embedding: vec![0.5, -0.25],
            attention: Vec::new(),
            head_outputs: vec![Arc::new(values(1.0)), Arc::new(values(2.0))],
            seq_len: n,
            layer_inputs: vec![values(-1.0), values(-2.0)],
            heads: heads.clone(),
            first_computed: 0,
        })
    }

    #[test]
    fn an_ablation_counts_the_unpruned_pass_and_each_heads_layers_from_its_own() {
        // Counted here from the shapes: a layer is Q, K, V, scores, weighted sums, output
        // projection and the feed-forward layer; a head's own layer is the last two.
        let (d, f) = (384u64, 1536u64);
        let layer = |n: u64| 2 * n * d * 3 * d + 2 * 2 * n * n * d + 2 * n * d * d + 2 * 2 * n * d * f;
        let own = |n: u64| 2 * n * d * d + 2 * 2 * n * d * f;
        let every: Vec<usize> = (0..TOTAL).collect();
        for n in [1usize, 32, 512] {
            let m = n as u64;
            assert_eq!(ablation_flops(&SPEC, n, &[]), 6 * layer(m));
            // Layer 1's head 0: its own layer's end, then five whole layers; layer 6's: only its own.
            assert_eq!(ablation_flops(&SPEC, n, &[0]), 6 * layer(m) + own(m) + 5 * layer(m));
            assert_eq!(ablation_flops(&SPEC, n, &[71]), 6 * layer(m) + own(m));
            // Dealt out in pieces, each piece adds its own unpruned pass.
            let (even, odd): (Vec<usize>, Vec<usize>) = every.iter().partition(|&&h| h % 2 == 0);
            assert_eq!(
                ablation_flops(&SPEC, n, &even) + ablation_flops(&SPEC, n, &odd),
                ablation_flops(&SPEC, n, &every) + 6 * layer(m)
            );
        }
        // The sweeps of BENCHMARKS.md 6: 27 GFLOP at 32 tokens, 510 at 512.
        let sweep = |n| ablation_flops(&SPEC, n, &every) as f64 / 1e9;
        assert_eq!((sweep(32).round(), sweep(512).round()), (27.0, 510.0));
        let piece = Work::Ablate {
            heads: HeadSet::all(TOTAL),
            sentences: vec![vec![101; 32], vec![101; 5]],
            ablate: vec![3, 40],
            traces: vec![],
        };
        assert_eq!(
            piece.flops(&SPEC),
            ablation_flops(&SPEC, 32, &[3, 40]) + ablation_flops(&SPEC, 5, &[3, 40])
        );
        // Handed the unpruned passes, a piece does not count them.
        let all = HeadSet::all(TOTAL);
        let handed = Work::Ablate {
            heads: all.clone(),
            sentences: vec![vec![101; 32], vec![101; 5]],
            ablate: vec![3, 40],
            traces: vec![tiny_trace(32, &all), tiny_trace(5, &all)],
        };
        let unpruned = ablation_flops(&SPEC, 32, &[]) + ablation_flops(&SPEC, 5, &[]);
        assert_eq!(handed.flops(&SPEC), piece.flops(&SPEC) - unpruned);
    }

    #[test]
    fn a_sweep_is_dealt_out_with_every_head_once_and_every_layer_in_every_piece() {
        let small = ModelSpec { layers: 2, heads: 4, d_model: 16, ..SPEC };
        for spec in [SPEC, small] {
            let total = spec.total_heads();
            for pieces in [0, 1, 2, 5, 12, 72, 100] {
                let work = ablation_pieces(&spec, &[vec![101, 7592, 102]], pieces, &[]);
                assert_eq!(work.len(), pieces.clamp(1, total));
                let mut seen: Vec<usize> = work
                    .iter()
                    .flat_map(|w| match w {
                        Work::Ablate { heads, sentences, ablate, .. } => {
                            assert!(!heads.any_pruned() && sentences == &[vec![101, 7592, 102]]);
                            if pieces <= spec.heads {
                                // Every layer in every piece, and pieces within one head of each other.
                                let layers = |l| ablate.iter().any(|&h| spec.layer_of(h) == l);
                                assert!((0..spec.layers).all(layers), "{pieces}");
                                assert!(ablate.len().abs_diff(total / work.len()) <= 1);
                            }
                            ablate.clone()
                        }
                        _ => panic!("an ablation"),
                    })
                    .collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..total).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn work_and_results_survive_the_wire() {
        for w in samples() {
            assert_eq!(Work::decode(&w.encode()), Ok(w.clone()));
        }
        let results = [
            Done::Embeddings(vec![vec![0.5, -1.0, f32::MIN_POSITIVE], vec![1.0, 2.0, 3.0]]),
            Done::Embeddings(vec![]),
            Done::HeadSums((0..TOTAL).map(|h| h as f64 / 7.0).collect()),
        ];
        for d in results {
            assert_eq!(Done::decode(&d.encode()), Ok(d.clone()));
        }
    }

    #[test]
    fn a_result_is_accepted_only_for_its_own_kind_of_piece() {
        let [embed, _, gradients, ablate, roles, patch, atlas] = <[Work; 7]>::try_from(samples()).unwrap();
        let embeddings = |count| Done::Embeddings(vec![vec![0.0; SPEC.d_model]; count]);
        let sums = Done::HeadSums(vec![0.0; TOTAL]);
        assert!(embed.accepts(&SPEC, &embeddings(2)) && gradients.accepts(&SPEC, &sums));
        assert!(!embed.accepts(&SPEC, &sums) && !gradients.accepts(&SPEC, &embeddings(2)));
        assert!(!embed.accepts(&SPEC, &Done::Embeddings(vec![vec![0.0; 3]; 2])));
        assert!(!gradients.accepts(&SPEC, &Done::HeadSums(vec![0.0; 3])));
        // Two sentences, unpruned and with each of three heads removed.
        assert!(ablate.accepts(&SPEC, &embeddings(8)) && !ablate.accepts(&SPEC, &embeddings(6)));
        let role_sums = Done::HeadSums(vec![0.0; RoleCounter::sums_len(&SPEC)]);
        assert!(roles.accepts(&SPEC, &role_sums) && !roles.accepts(&SPEC, &sums));
        // Both runs, then a patched and an ablated run per head.
        assert!(patch.accepts(&SPEC, &embeddings(8)) && !patch.accepts(&SPEC, &embeddings(5)));
        assert!(!patch.accepts(&SPEC, &sums));
        // Every two heads' sum, and the rows.
        assert!(
            atlas.accepts(&SPEC, &Done::HeadSums(vec![0.0; 72 * 71 / 2 + 1])) && !atlas.accepts(&SPEC, &sums)
        );
    }

    #[test]
    fn a_piece_that_does_not_fit_the_model_is_refused() {
        let spec = ModelSpec { layers: 2, heads: 4, d_model: 16, ffn: 24, vocab: 30, positions: 8, ..SPEC };
        let bert = Bert::random(spec, 1);
        let all = HeadSet::all(8);
        let ablation = |traces| Work::Ablate {
            heads: all.clone(),
            sentences: vec![vec![2, 5, 3]],
            ablate: vec![0, 7],
            traces,
        };
        let ok = ablation(vec![]);
        assert_eq!(ok.check(&bert), Ok(()));
        // Handed its unpruned pass (without attention weights, as the wire carries it), the same
        // embeddings, bit for bit; a pass of another length or other heads is refused.
        let pass = |ids: &[u32], heads: &HeadSet| {
            let full = bert.forward(Kernel::Simd, ids, heads);
            Arc::new(BertOutput { attention: Vec::new(), ..full })
        };
        let handed = ablation(vec![pass(&[2, 5, 3], &all)]);
        let through = Work::decode(&handed.encode()).unwrap();
        assert_eq!((through.check(&bert), &through), (Ok(()), &handed));
        assert_eq!(through.run(&bert, Kernel::Simd), ok.run(&bert, Kernel::Simd));
        for bad in [pass(&[2, 5], &all), pass(&[2, 5, 3], &HeadSet::with_pruned(8, [1])), tiny_trace(3, &all)]
        {
            let refused = ablation(vec![bad]);
            assert_eq!(refused.check(&bert), Err(WireError::OutOfRange("a handed pass")));
        }
        assert_eq!(
            Work::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6, 3], patch: vec![0, 7] }.check(&bert),
            Ok(())
        );
        let refused = [
            Work::Ablate {
                heads: all.clone(),
                sentences: vec![vec![2, 5, 3]],
                ablate: vec![8],
                traces: vec![],
            },
            Work::Embed { heads: HeadSet::all(72), ids: vec![vec![2, 3]], precision: None },
            Work::Embed { heads: all.clone(), ids: vec![vec![2, 30]], precision: None },
            Work::Embed { heads: all.clone(), ids: vec![vec![2; 9]], precision: None },
            Work::Embed { heads: all, ids: vec![vec![]], precision: None },
            Work::Roles { sentences: vec![vec![2, 3]], punctuation: vec![vec![false]] },
            Work::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6], patch: vec![0] },
            Work::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 6, 3], patch: vec![8] },
            Work::Patch { clean: vec![2, 5, 3], corrupted: vec![2, 30, 3], patch: vec![1] },
            Work::Patch { clean: vec![], corrupted: vec![], patch: vec![1] },
            Work::Atlas { sentences: vec![vec![2, 30]] },
        ];
        for w in refused {
            assert!(w.check(&bert).is_err(), "{w:?}");
        }
    }

    #[test]
    fn every_damaged_message_is_refused() {
        for w in samples() {
            let bytes = w.encode();
            // Every truncation, every trailing byte, and a wrong magic.
            for cut in 0..bytes.len() {
                assert!(Work::decode(&bytes[..cut]).is_err(), "{w:?} cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(Work::decode(&longer), Err(WireError::TrailingBytes));
            assert_eq!(Done::decode(&bytes), Err(WireError::NotAMessage));
        }
        let mut bad_tag = samples()[0].encode();
        bad_tag[4] = 9;
        assert_eq!(Work::decode(&bad_tag), Err(WireError::UnknownTag(9)));
        let mut bad_precision = samples()[0].encode();
        bad_precision[5] = 3;
        assert_eq!(Work::decode(&bad_precision), Err(WireError::OutOfRange("a precision")));
        let mut bad_flag = samples()[0].encode();
        bad_flag[10] = 2;
        assert_eq!(Work::decode(&bad_flag), Err(WireError::OutOfRange("a head flag")));
        let mut bad_punctuation = samples()[4].encode();
        let at = bad_punctuation.len() - 1;
        bad_punctuation[at] = 7;
        assert_eq!(Work::decode(&bad_punctuation), Err(WireError::OutOfRange("a flag")));
        // A count far past what the bytes hold is refused before anything is allocated for it.
        let mut huge = b"HLD2\x00".to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(Done::decode(&huge), Err(WireError::OutOfRange("a count")));
        let mut wide = b"HLD2\x00".to_vec();
        wide.extend(4000u32.to_le_bytes());
        wide.extend(1000u32.to_le_bytes());
        assert_eq!(Done::decode(&wide), Err(WireError::Truncated));
    }

    /// A random model of odd sizes (3 layers of 3 heads of 5) and two sentences of six tokens.
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
    fn the_work_piece_gives_the_direct_passes_and_survives_any_dealing() {
        let bert = Bert::random(ODD, 7);
        let all = HeadSet::all(ODD.total_heads());
        let kernel = Kernel::Scalar;
        let work =
            |patch: Vec<usize>| Work::Patch { clean: CLEAN.to_vec(), corrupted: CORRUPTED.to_vec(), patch };
        let Done::Embeddings(e) = work(vec![7, 2]).run(&bert, kernel) else { panic!("embeddings") };
        let clean = bert.forward(kernel, &CLEAN, &all);
        assert_eq!((&e[0], &e[1]), (&clean.embedding, &bert.forward(kernel, &CORRUPTED, &all).embedding));
        for (k, h) in [7usize, 2].into_iter().enumerate() {
            let patched = bert.forward_patched(
                kernel,
                &CORRUPTED,
                &all,
                None,
                Some(Patch { heads: &[h], from: &clean }),
            );
            assert_eq!(e[2 + 2 * k], patched.embedding, "head {h} patched");
            let ablated = bert.forward(kernel, &CLEAN, &HeadSet::with_pruned(all.len(), [h]));
            assert_eq!(e[3 + 2 * k], ablated.embedding, "head {h} removed");
        }
        // One piece per head or all in one: the same bits.
        let Done::Embeddings(one) = work(vec![2]).run(&bert, kernel) else { panic!("embeddings") };
        assert_eq!(one[2..], e[4..]);
    }
}
