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
//! work:   "HLW1" tag:u8 heads body          done:  "HLD1" tag:u8 body
//! heads:  n:u32 then n bytes (1 = kept)     tag 0: Embeddings  count:u32 dim:u32 count*dim f32
//! ids:    n:u32 then n u32                  tag 1: HeadSums    n:u32 n f64
//! tag 0 (Embed):     count:u32 then count ids                     tag 2: Drifts  n:u32 n f64
//! tag 1 (Gradients): count:u32 then count (ids ids score:f64)
//! tag 2 (Ablate):    count:u32 then count head:u32, then ids
//! ```
//!
//! Decoding checks every length against what is left and against the limits below, so a
//! damaged message is refused with a [`WireError`], never half-read.

use super::bert::{Bert, D_MODEL, HEADS, LAYERS, TOTAL_HEADS};
use super::gradient::{gates, pair_gradients};
use super::pruned::{cost, PrunedBert};
use crate::attention::HeadSet;
use crate::cpu::Kernel;

/// A head-gate gradient pass (a forward and a backward pass) counted as this many forward
/// passes of the same sentences, for timing estimates: the backward pass is about twice a forward.
pub const GRADIENT_COST: u64 = 3;

/// Most sentences (or pairs) in one piece.
pub const MAX_ITEMS: usize = 4096;

/// Most tokens in one sentence (the model's positions).
pub const MAX_TOKENS: usize = 512;

/// Two sentences' token ids and their similarity score in `[0, 1]`.
pub type Pair = (Vec<u32>, Vec<u32>, f64);

/// FLOPs of [`Work::Ablate`] on a sentence of `n` tokens: one unpruned pass, then for each head
/// of `ablate` the layers after its own and, in its own layer, the output projection and the
/// feed-forward layer (its heads' outputs are the unpruned pass's: [`Bert::forward_from`]). The
/// passes run the masked model, which computes every head, so each layer costs a full one.
pub fn ablation_flops(n: usize, ablate: &[usize]) -> u64 {
    let (layers, all) = (LAYERS as u64, cost(&HeadSet::all(TOTAL_HEADS), &[n]));
    let layer = all.total_flops / layers;
    // The head's own layer: all but its attention, then the output projection (`n x 384 x 384`).
    let own = layer - all.attention_flops / layers + 2 * (n * D_MODEL * D_MODEL) as u64;
    let passes = ablate.iter().map(|&h| (layers - 1 - (h / HEADS) as u64) * layer + own);
    layers * layer + passes.sum::<u64>()
}

/// FLOPs of [`super::analysis::ImportanceSweep`] over `n` tokens on the CPU kernel: every
/// head's pass, each from its own layer ([`ablation_flops`] without the unpruned pass, which the
/// sweep is given).
pub fn given_sweep_flops(n: usize) -> u64 {
    let all: Vec<usize> = (0..TOTAL_HEADS).collect();
    ablation_flops(n, &all) - ablation_flops(n, &[])
}

/// The heads of an importance sweep dealt out to `pieces` threads: head `h` goes to piece
/// `h % pieces`, so every piece holds heads of every layer and their passes cost about the same.
pub fn ablation_deal(pieces: usize) -> Vec<Vec<usize>> {
    let pieces = pieces.clamp(1, TOTAL_HEADS);
    (0..pieces).map(|i| (i..TOTAL_HEADS).step_by(pieces).collect()).collect()
}

/// The importance sweep of the sentence `ids` (every head removed alone from the full model) as
/// pieces of [`Work::Ablate`], one per thread, dealt as [`ablation_deal`] deals them.
pub fn ablation_pieces(ids: &[u32], pieces: usize) -> Vec<Work> {
    let piece = |ablate| Work::Ablate { heads: HeadSet::all(TOTAL_HEADS), ids: ids.to_vec(), ablate };
    ablation_deal(pieces).into_iter().map(piece).collect()
}

/// FLOPs of the importance sweep of `n` tokens on `pieces` threads: every piece runs its own
/// unpruned pass, then its heads' ([`ablation_flops`] of each piece of [`ablation_deal`]).
pub fn dealt_sweep_flops(n: usize, pieces: usize) -> u64 {
    ablation_deal(pieces).iter().map(|heads| ablation_flops(n, heads)).sum()
}

/// A piece of work.
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    /// The sentence embeddings of `ids` by the model with only `heads` kept, really pruned.
    Embed {
        /// The heads kept.
        heads: HeadSet,
        /// Each sentence's token ids.
        ids: Vec<Vec<u32>>,
    },
    /// Over `pairs`, the sum of each head's `|dL/d gate|` with only `heads` kept
    /// ([`pair_gradients`]).
    Gradients {
        /// The heads kept.
        heads: HeadSet,
        /// The pairs.
        pairs: Vec<Pair>,
    },
    /// For each head of `ablate`, how far removing it alone from `heads` moves the embedding
    /// of `ids` (`1 - cosine`), as [`super::analysis::ImportanceSweep`] measures it.
    Ablate {
        /// The heads kept before each removal.
        heads: HeadSet,
        /// The sentence's token ids.
        ids: Vec<u32>,
        /// The heads removed, one at a time.
        ablate: Vec<usize>,
    },
}

/// What a piece of work gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Done {
    /// One embedding per sentence, in order.
    Embeddings(Vec<Vec<f32>>),
    /// One sum per head.
    HeadSums(Vec<f64>),
    /// One drift per head removed.
    Drifts(Vec<f64>),
}

/// Why a message between the page and a worker could not be read.
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
    /// Floating-point operations this piece takes, counted from its shapes (gradients as
    /// [`GRADIENT_COST`] forward passes, an ablation as [`ablation_flops`]).
    pub fn flops(&self) -> Option<u64> {
        match self {
            Work::Embed { heads, ids } => {
                Some(cost(heads, &ids.iter().map(Vec::len).collect::<Vec<_>>()).total_flops)
            }
            Work::Gradients { heads, pairs } => {
                let lengths: Vec<usize> = pairs.iter().flat_map(|(a, b, _)| [a.len(), b.len()]).collect();
                Some(GRADIENT_COST * cost(heads, &lengths).total_flops)
            }
            Work::Ablate { ids, ablate, .. } => Some(ablation_flops(ids.len(), ablate)),
        }
    }

    /// Runs the piece on `bert` with `kernel`. The piece must fit the model ([`Work::check`]).
    pub fn run(&self, bert: &Bert, kernel: Kernel) -> Done {
        match self {
            Work::Embed { heads, ids } => {
                Done::Embeddings(PrunedBert::new(bert, heads).embed_batch(kernel, ids))
            }
            Work::Gradients { heads, pairs } => {
                let g = gates(heads);
                let mut sums = vec![0.0; TOTAL_HEADS];
                for (u, v, y) in pairs {
                    let (_, grads) = pair_gradients(bert, kernel, u, v, *y, &g);
                    sums.iter_mut().zip(&grads).for_each(|(s, d)| *s += d.abs());
                }
                Done::HeadSums(sums)
            }
            Work::Ablate { heads, ids, ablate } => {
                // Each pass reuses the layers before its head's own, as the page's sweep does.
                let full = bert.forward(kernel, ids, heads);
                let drifts = ablate.iter().map(|&h| {
                    let mut without = heads.clone();
                    without.set(h, false);
                    super::analysis::embedding_drift(
                        &full,
                        &bert.forward_from(kernel, ids, &without, Some(&full)),
                    )
                });
                Done::Drifts(drifts.collect())
            }
        }
    }

    /// Whether `bert` can run this piece: one flag per head, token ids in its vocabulary, no
    /// sentence longer than its positions or empty.
    pub fn check(&self, bert: &Bert) -> Result<(), WireError> {
        let (heads, mut sentences): (&HeadSet, Box<dyn Iterator<Item = &Vec<u32>>>) = match self {
            Work::Embed { heads, ids } => (heads, Box::new(ids.iter())),
            Work::Gradients { heads, pairs } => (heads, Box::new(pairs.iter().flat_map(|(u, v, _)| [u, v]))),
            Work::Ablate { heads, ids, .. } => (heads, Box::new(std::iter::once(ids))),
        };
        if heads.len() != TOTAL_HEADS {
            return Err(WireError::OutOfRange("a head set"));
        }
        if let Work::Ablate { ablate, .. } = self {
            if ablate.iter().any(|&h| h >= TOTAL_HEADS) {
                return Err(WireError::OutOfRange("a head"));
            }
        }
        let vocab = bert.vocab_size();
        if !sentences
            .all(|s| !s.is_empty() && s.len() <= MAX_TOKENS && s.iter().all(|&t| (t as usize) < vocab))
        {
            return Err(WireError::OutOfRange("a token id or sentence length"));
        }
        Ok(())
    }

    /// Whether `done` can be this piece's result: an embedding of the model's width per
    /// sentence, or a sum per head.
    pub fn accepts(&self, done: &Done) -> bool {
        match (self, done) {
            (Work::Embed { ids, .. }, Done::Embeddings(e)) => {
                e.len() == ids.len() && e.iter().all(|v| v.len() == super::bert::D_MODEL)
            }
            (Work::Gradients { .. }, Done::HeadSums(s)) => s.len() == TOTAL_HEADS,
            (Work::Ablate { ablate, .. }, Done::Drifts(d)) => d.len() == ablate.len(),
            _ => false,
        }
    }

    /// The piece as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(b"HLW1".to_vec());
        match self {
            Work::Embed { heads, ids } => {
                w.u8(0);
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
            Work::Ablate { heads, ids, ablate } => {
                w.u8(2);
                w.heads(heads);
                w.u32(ablate.len());
                ablate.iter().for_each(|&h| w.u32(h));
                w.ids(ids);
            }
        }
        w.0
    }

    /// A piece from [`Work::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Work, WireError> {
        let mut r = Reader::new(bytes, b"HLW1")?;
        let tag = r.u8()?;
        let heads = r.heads()?;
        let count = r.count(MAX_ITEMS)?;
        let work = match tag {
            0 => Work::Embed { heads, ids: (0..count).map(|_| r.ids()).collect::<Result<_, _>>()? },
            1 => Work::Gradients {
                heads,
                pairs: (0..count).map(|_| Ok((r.ids()?, r.ids()?, r.f64()?))).collect::<Result<_, _>>()?,
            },
            2 => {
                let ablate = (0..count).map(|_| r.count(u32::MAX as usize)).collect::<Result<_, _>>()?;
                Work::Ablate { heads, ablate, ids: r.ids()? }
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
                Done::HeadSums(_) | Done::Drifts(_) => Vec::new(),
            })
            .collect()
    }

    /// The result as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(b"HLD1".to_vec());
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
            Done::Drifts(d) => {
                w.u8(2);
                w.u32(d.len());
                d.iter().for_each(|x| w.0.extend(x.to_le_bytes()));
            }
        }
        w.0
    }

    /// A result from [`Done::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Done, WireError> {
        let mut r = Reader::new(bytes, b"HLD1")?;
        let done = match r.u8()? {
            0 => {
                let (count, dim) = (r.count(MAX_ITEMS)?, r.count(super::bert::D_MODEL)?);
                let mut e = Vec::with_capacity(count);
                for _ in 0..count {
                    e.push((0..dim).map(|_| r.f32()).collect::<Result<Vec<f32>, _>>()?);
                }
                Done::Embeddings(e)
            }
            1 => {
                let n = r.count(TOTAL_HEADS)?;
                Done::HeadSums((0..n).map(|_| r.f64()).collect::<Result<_, _>>()?)
            }
            2 => {
                let n = r.count(MAX_ITEMS)?;
                Done::Drifts((0..n).map(|_| r.f64()).collect::<Result<_, _>>()?)
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
        let n = self.count(TOTAL_HEADS)?;
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

    fn samples() -> Vec<Work> {
        let heads = HeadSet::with_pruned(TOTAL_HEADS, [0, 13, 71]);
        vec![
            Work::Embed { heads: heads.clone(), ids: vec![vec![101, 7592, 102], vec![101, 102]] },
            Work::Embed { heads: HeadSet::all(TOTAL_HEADS), ids: vec![] },
            Work::Gradients { heads: heads.clone(), pairs: vec![(vec![101, 2, 102], vec![101, 102], 0.25)] },
            Work::Ablate { heads, ids: vec![101, 7592, 102], ablate: vec![1, 2, 70] },
        ]
    }

    #[test]
    fn an_ablation_counts_the_unpruned_pass_and_each_heads_layers_from_its_own() {
        // Counted here from the shapes: a layer is Q, K, V, scores, weighted sums, output
        // projection and the feed-forward layer; a head's own layer is the last two.
        let (d, f) = (384u64, 1536u64);
        let layer = |n: u64| 2 * n * d * 3 * d + 2 * 2 * n * n * d + 2 * n * d * d + 2 * 2 * n * d * f;
        let own = |n: u64| 2 * n * d * d + 2 * 2 * n * d * f;
        for n in [1usize, 32, 512] {
            let m = n as u64;
            assert_eq!(ablation_flops(n, &[]), 6 * layer(m));
            // Layer 1's head 0: its own layer's end, then five whole layers; layer 6's: only its own.
            assert_eq!(ablation_flops(n, &[0]), 6 * layer(m) + own(m) + 5 * layer(m));
            assert_eq!(ablation_flops(n, &[71]), 6 * layer(m) + own(m));
            // The page's own sweep is given the unpruned pass.
            let every: Vec<usize> = (0..TOTAL_HEADS).collect();
            assert_eq!(given_sweep_flops(n), ablation_flops(n, &every) - 6 * layer(m));
            // Dealt out in pieces, each piece adds its own unpruned pass.
            let every: Vec<usize> = (0..TOTAL_HEADS).collect();
            let (even, odd): (Vec<usize>, Vec<usize>) = every.iter().partition(|&&h| h % 2 == 0);
            assert_eq!(
                ablation_flops(n, &even) + ablation_flops(n, &odd),
                ablation_flops(n, &every) + 6 * layer(m)
            );
        }
        // The sweeps of BENCHMARKS.md 6: 27 GFLOP at 32 tokens, 510 at 512.
        let sweep = |n| ablation_flops(n, &(0..TOTAL_HEADS).collect::<Vec<_>>()) as f64 / 1e9;
        assert_eq!((sweep(32).round(), sweep(512).round()), (27.0, 510.0));
        let piece =
            Work::Ablate { heads: HeadSet::all(TOTAL_HEADS), ids: vec![101; 32], ablate: vec![3, 40] };
        assert_eq!(piece.flops(), Some(ablation_flops(32, &[3, 40])));
    }

    #[test]
    fn a_sweep_is_dealt_out_with_every_head_once_and_every_layer_in_every_piece() {
        for pieces in [0, 1, 2, 5, 12, 72, 100] {
            let work = ablation_pieces(&[101, 7592, 102], pieces);
            assert_eq!(work.len(), pieces.clamp(1, 72));
            let mut seen: Vec<usize> = work
                .iter()
                .flat_map(|w| match w {
                    Work::Ablate { heads, ids, ablate } => {
                        assert!(!heads.any_pruned() && ids == &[101, 7592, 102]);
                        if pieces <= HEADS {
                            // Every layer in every piece, and pieces within one head of each other.
                            assert!((0..LAYERS).all(|l| ablate.iter().any(|h| h / HEADS == l)), "{pieces}");
                            assert!(ablate.len().abs_diff(TOTAL_HEADS / work.len()) <= 1);
                        }
                        ablate.clone()
                    }
                    _ => panic!("an ablation"),
                })
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..TOTAL_HEADS).collect::<Vec<_>>());
            // What the page's estimate counts is what the pieces run.
            let ids = vec![101; 40];
            let run: u64 = ablation_pieces(&ids, pieces).iter().filter_map(Work::flops).sum();
            assert_eq!(dealt_sweep_flops(40, pieces), run, "{pieces} pieces");
        }
        // Two threads: one more unpruned pass than the page's own-thread sweep and its given one.
        let every: Vec<usize> = (0..TOTAL_HEADS).collect();
        assert_eq!(dealt_sweep_flops(40, 2), ablation_flops(40, &every) + ablation_flops(40, &[]));
    }

    #[test]
    fn work_and_results_survive_the_wire() {
        for w in samples() {
            assert_eq!(Work::decode(&w.encode()), Ok(w.clone()));
        }
        let results = [
            Done::Embeddings(vec![vec![0.5, -1.0, f32::MIN_POSITIVE], vec![1.0, 2.0, 3.0]]),
            Done::Embeddings(vec![]),
            Done::HeadSums((0..TOTAL_HEADS).map(|h| h as f64 / 7.0).collect()),
            Done::Drifts(vec![0.5, 1e-9]),
        ];
        for d in results {
            assert_eq!(Done::decode(&d.encode()), Ok(d.clone()));
        }
    }

    #[test]
    fn a_result_is_accepted_only_for_its_own_kind_of_piece() {
        let [embed, _, gradients, ablate] = <[Work; 4]>::try_from(samples()).unwrap();
        let two = Done::Embeddings(vec![vec![0.0; super::super::bert::D_MODEL]; 2]);
        let sums = Done::HeadSums(vec![0.0; TOTAL_HEADS]);
        assert!(embed.accepts(&two) && gradients.accepts(&sums));
        assert!(!embed.accepts(&sums) && !gradients.accepts(&two));
        assert!(!embed.accepts(&Done::Embeddings(vec![vec![0.0; 3]; 2])));
        assert!(!gradients.accepts(&Done::HeadSums(vec![0.0; 3])));
        assert!(ablate.accepts(&Done::Drifts(vec![0.0; 3])) && !ablate.accepts(&Done::Drifts(vec![0.0; 2])));
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
        let mut bad_flag = samples()[0].encode();
        bad_flag[9] = 2;
        assert_eq!(Work::decode(&bad_flag), Err(WireError::OutOfRange("a head flag")));
        // A count far past what the bytes hold is refused before anything is allocated for it.
        let mut huge = b"HLD1\x00".to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(Done::decode(&huge), Err(WireError::OutOfRange("a count")));
    }
}
