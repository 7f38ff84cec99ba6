//! The pieces of work and their results as bytes, between the page and its web workers (each
//! worker decodes what the page encodes, and the reverse). Little-endian:
//!
//! ```text
//! piece:  "HLW5" tag:u8 body                result:  "HLD2" tag:u8 body
//! heads:  n:u32 then n bytes (1 = kept)     tag 0: Embeddings  count:u32 dim:u32 count*dim f32
//! ids:    n:u32 then n u32                  tag 1: Sums        n:u32 n f64
//!
//! an encoder's pieces:
//! tag 0 (Embed):     precision:u8 (0 = the loaded model's, 1 = f16, 2 = 8-bit), heads, count:u32 then count ids
//! tag 1 (Gradients): heads, count:u32 then count (ids ids score:f64)
//! tag 2 (Ablate):    heads, count:u32 then count head:u32, count:u32 then count ids,
//!                    traces:u32 (0 or one per sentence) then each: layers:u32, embedding,
//!                    then per layer its input and its heads' outputs (floats: n:u32 n f32)
//! tag 3 (Roles):     count:u32 then count (ids, n:u32 then n bytes: 1 = punctuation)
//! tag 4 (Patch):     ids (clean), ids (corrupted), count:u32 then count head:u32
//! tag 5 (Atlas):     count:u32 then count ids
//! a decoder's:
//! tag 6 (NextKl):        ids, count:u32 then count heads
//! tag 7 (Losses):        heads, count:u32 then count ids (the passages)
//! tag 8 (GateGradients): heads, count:u32 then count ids (the passages)
//! tag 9 (Induction):     ids, half:u32, start:u32
//! tag 10 (PrecisionDrift): count:u32 then count ids (the passages)
//! ```
//!
//! Decoding checks every length against what is left and against the limits below, so a
//! damaged message is refused with a [`WireError`], never half-read; [`Piece::check`] then checks
//! the piece against the model that is to run it. A page and a worker of different builds
//! refuse each other's messages by their tags.

use std::sync::Arc;

use crate::attention::precision::Precision;
use crate::attention::HeadSet;
use crate::jobs::work::{Done, Piece, WireError};
use crate::model::encoder::bert::BertOutput;

/// Most sentences (or pairs, passages, head sets, heads removed) in one piece.
pub const MAX_ITEMS: usize = 4096;

/// Most tokens in one sentence of a message (the model's own positions are checked by
/// [`Piece::check`]).
pub const MAX_TOKENS: usize = 8192;

/// Most heads a message's head set may have, and most values in a result.
pub const MAX_VALUES: usize = 1 << 20;

/// What a piece's bytes start with.
const PIECE_TAG: &[u8; 4] = b"HLW5";

/// What a result's bytes start with.
const DONE_TAG: &[u8; 4] = b"HLD2";

impl Piece {
    /// The piece as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(PIECE_TAG.to_vec());
        match self {
            Piece::Embed { heads, ids, precision } => {
                w.u8(0);
                w.u8(precision
                    .map_or(0, |p| 1 + Precision::ALL.iter().position(|q| *q == p).unwrap_or(0) as u8));
                w.heads(heads);
                w.u32(ids.len());
                ids.iter().for_each(|s| w.ids(s));
            }
            Piece::Gradients { heads, pairs } => {
                w.u8(1);
                w.heads(heads);
                w.u32(pairs.len());
                for (u, v, y) in pairs {
                    w.ids(u);
                    w.ids(v);
                    w.0.extend(y.to_le_bytes());
                }
            }
            Piece::Ablate { heads, sentences, ablate, traces } => {
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
            Piece::Patch { clean, corrupted, patch } => {
                w.u8(4);
                w.ids(clean);
                w.ids(corrupted);
                w.u32(patch.len());
                patch.iter().for_each(|&h| w.u32(h));
            }
            Piece::Atlas { sentences } => {
                w.u8(5);
                w.u32(sentences.len());
                sentences.iter().for_each(|s| w.ids(s));
            }
            Piece::Roles { sentences, punctuation } => {
                w.u8(3);
                w.u32(sentences.len());
                for (s, p) in sentences.iter().zip(punctuation) {
                    w.ids(s);
                    w.u32(p.len());
                    w.0.extend(p.iter().map(|&b| u8::from(b)));
                }
            }
            Piece::NextKl { ids, sets } => {
                w.u8(6);
                w.ids(ids);
                w.u32(sets.len());
                sets.iter().for_each(|h| w.heads(h));
            }
            Piece::Losses { heads, passages } | Piece::GateGradients { heads, passages } => {
                w.u8(if matches!(self, Piece::Losses { .. }) { 7 } else { 8 });
                w.heads(heads);
                w.u32(passages.len());
                passages.iter().for_each(|p| w.ids(p));
            }
            Piece::PrecisionDrift { passages } => {
                w.u8(10);
                w.u32(passages.len());
                passages.iter().for_each(|p| w.ids(p));
            }
            Piece::Induction { ids, half, start } => {
                w.u8(9);
                w.ids(ids);
                w.u32(*half);
                w.u32(*start);
            }
        }
        w.0
    }

    /// A piece from [`Piece::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Piece, WireError> {
        let mut r = Reader::new(bytes, PIECE_TAG)?;
        let piece = match r.u8()? {
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
                Piece::Embed { heads, ids, precision }
            }
            1 => {
                let heads = r.heads()?;
                let count = r.count(MAX_ITEMS)?;
                let pairs = (0..count).map(|_| Ok((r.ids()?, r.ids()?, r.f64()?)));
                Piece::Gradients { heads, pairs: pairs.collect::<Result<_, _>>()? }
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
                Piece::Ablate { heads, ablate, sentences, traces }
            }
            3 => {
                let count = r.count(MAX_ITEMS)?;
                let (mut sentences, mut punctuation) = (Vec::new(), Vec::new());
                for _ in 0..count {
                    sentences.push(r.ids()?);
                    punctuation.push(r.flags()?);
                }
                Piece::Roles { sentences, punctuation }
            }
            4 => {
                let (clean, corrupted) = (r.ids()?, r.ids()?);
                let count = r.count(MAX_ITEMS)?;
                let patch = (0..count).map(|_| r.count(u32::MAX as usize)).collect::<Result<_, _>>()?;
                Piece::Patch { clean, corrupted, patch }
            }
            5 => {
                let count = r.count(MAX_ITEMS)?;
                Piece::Atlas { sentences: (0..count).map(|_| r.ids()).collect::<Result<_, _>>()? }
            }
            6 => {
                let ids = r.ids()?;
                let count = r.count(MAX_ITEMS)?;
                Piece::NextKl { ids, sets: (0..count).map(|_| r.heads()).collect::<Result<_, _>>()? }
            }
            tag @ (7 | 8) => {
                let heads = r.heads()?;
                let count = r.count(MAX_ITEMS)?;
                let passages = (0..count).map(|_| r.ids()).collect::<Result<_, _>>()?;
                match tag {
                    7 => Piece::Losses { heads, passages },
                    _ => Piece::GateGradients { heads, passages },
                }
            }
            9 => {
                let ids = r.ids()?;
                let (half, start) = (r.count(MAX_TOKENS)?, r.count(MAX_TOKENS)?);
                Piece::Induction { ids, half, start }
            }
            10 => {
                let count = r.count(MAX_ITEMS)?;
                Piece::PrecisionDrift { passages: (0..count).map(|_| r.ids()).collect::<Result<_, _>>()? }
            }
            t => return Err(WireError::UnknownTag(t)),
        };
        r.end()?;
        Ok(piece)
    }
}

impl Done {
    /// The result as bytes (see the module's documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(DONE_TAG.to_vec());
        match self {
            Done::Embeddings(e) => {
                w.u8(0);
                w.u32(e.len());
                w.u32(e.first().map_or(0, Vec::len));
                e.iter().flatten().for_each(|x| w.0.extend(x.to_le_bytes()));
            }
            Done::Sums(s) => {
                w.u8(1);
                w.u32(s.len());
                s.iter().for_each(|x| w.0.extend(x.to_le_bytes()));
            }
        }
        w.0
    }

    /// A result from [`Done::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Done, WireError> {
        let mut r = Reader::new(bytes, DONE_TAG)?;
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
                Done::Sums((0..n).map(|_| r.f64()).collect::<Result<_, _>>()?)
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
    /// model by [`Piece::check`]).
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

    /// Both families' pieces of every kind.
    fn samples() -> Vec<Piece> {
        let mut all = crate::jobs::work::encoder::tests::samples();
        all.extend(crate::jobs::work::decoder::tests::samples());
        all
    }

    #[test]
    fn work_and_results_survive_the_wire() {
        for w in samples() {
            assert_eq!(Piece::decode(&w.encode()), Ok(w.clone()));
        }
        let results = [
            Done::Embeddings(vec![vec![0.5, -1.0, f32::MIN_POSITIVE], vec![1.0, 2.0, 3.0]]),
            Done::Embeddings(vec![]),
            Done::Sums((0..72).map(|h| h as f64 / 7.0).collect()),
        ];
        for d in results {
            assert_eq!(Done::decode(&d.encode()), Ok(d.clone()));
        }
    }

    #[test]
    fn every_damaged_message_is_refused() {
        for w in samples() {
            let bytes = w.encode();
            // Every truncation, every trailing byte, and a wrong magic.
            for cut in 0..bytes.len() {
                assert!(Piece::decode(&bytes[..cut]).is_err(), "{w:?} cut at {cut}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert_eq!(Piece::decode(&longer), Err(WireError::TrailingBytes));
            assert_eq!(Done::decode(&bytes), Err(WireError::NotAMessage));
        }
        let mut bad_tag = samples()[0].encode();
        bad_tag[4] = 11;
        assert_eq!(Piece::decode(&bad_tag), Err(WireError::UnknownTag(11)));
        let mut bad_precision = samples()[0].encode();
        bad_precision[5] = 3;
        assert_eq!(Piece::decode(&bad_precision), Err(WireError::OutOfRange("a precision")));
        let mut bad_flag = samples()[0].encode();
        bad_flag[10] = 2;
        assert_eq!(Piece::decode(&bad_flag), Err(WireError::OutOfRange("a head flag")));
        let mut bad_punctuation = samples()[4].encode();
        let at = bad_punctuation.len() - 1;
        bad_punctuation[at] = 7;
        assert_eq!(Piece::decode(&bad_punctuation), Err(WireError::OutOfRange("a flag")));
        // A count far past what the bytes hold is refused before anything is allocated for it.
        let mut huge = b"HLD2\x00".to_vec();
        huge.extend(u32::MAX.to_le_bytes());
        assert_eq!(Done::decode(&huge), Err(WireError::OutOfRange("a count")));
        let mut wide = b"HLD2\x00".to_vec();
        wide.extend(4000u32.to_le_bytes());
        wide.extend(1000u32.to_le_bytes());
        assert_eq!(Done::decode(&wide), Err(WireError::Truncated));
    }

    #[test]
    fn a_decoders_damaged_pieces_are_refused() {
        let pieces = crate::jobs::work::decoder::tests::samples();
        // An induction piece whose halves' counts are past the limit, and a head set's flag that
        // is neither 0 nor 1.
        let mut huge = pieces[3].encode();
        let at = huge.len() - 8;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Piece::decode(&huge), Err(WireError::OutOfRange("a count")));
        let mut flag = pieces[1].encode();
        flag[9] = 2;
        assert_eq!(Piece::decode(&flag), Err(WireError::OutOfRange("a head flag")));
    }
}
