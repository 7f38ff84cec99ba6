//! What a decoder's heads do, measured the standard way (Olsson et al., 2022, "In-context
//! learning and induction heads"): on a sequence of random tokens repeated once,
//!
//! ```text
//! [bos] a_0 a_1 ... a_{L-1} a_0 a_1 ... a_{L-1}
//!                           ^ second half: query at i reads
//!       i - L      (the same token, earlier)              duplicate-token
//!       i - L + 1  (the token that followed it last time) prefix matching: an induction head
//!       i - 1      (the token before it, on every row)    previous-token
//! ```
//!
//! A score is a head's mean attention weight on its target over the rows that have one. An
//! induction head also *copies*: what it writes raises the logit of the token it attends to.
//! The copying score is that head's direct effect on the logits (its output through `W_O` and the
//! unembedding, LayerNorm's scale applied, its centring and norm left out), measured as the share
//! of the sequence's other tokens the attended token beats, averaged over the second half: 1 is a
//! perfect copier, about 0.5 a head that writes nothing about it.
//!
//! Random tokens carry no meaning and no grammar, so only a mechanism that reads the context can
//! predict the second half: a model's loss there falls far below the first half's when it has
//! induction heads, and rises back when they are pruned ([`HalfLosses`]).

use std::sync::Arc;

use crate::attention::summary::FOCUSED;
use crate::attention::synthetic::hash32;
use crate::model::decoder::gpt2::{DecoderOutput, Gpt2};
use crate::model::spec::ModelSpec;

/// Copying score above which a prefix-matching head is an induction head.
pub const COPYING: f64 = 0.7;

/// A random sequence repeated once, optionally after a beginning-of-text token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repeated {
    /// The whole sequence: `[bos] first first`.
    pub ids: Vec<u32>,
    /// `L`, the length of one half.
    pub half: usize,
    /// Where the first half starts (1 after a beginning-of-text token, else 0).
    pub start: usize,
}

impl Repeated {
    /// `half` distinct tokens drawn (seeded) from `0..vocab`, repeated, after `bos` when given.
    pub fn random(vocab: u32, half: usize, seed: u32, bos: Option<u32>) -> Repeated {
        assert!(half >= 2 && (half as u32) < vocab, "2 to vocab - 1 distinct tokens");
        let mut first = Vec::with_capacity(half);
        let mut i = 0u32;
        while first.len() < half {
            let t = hash32(hash32(seed ^ 0x1d0c_7104).wrapping_add(i)) % vocab;
            if Some(t) != bos && !first.contains(&t) {
                first.push(t);
            }
            i += 1;
        }
        let mut ids: Vec<u32> = bos.into_iter().collect();
        let start = ids.len();
        ids.extend(first.iter().chain(&first));
        Repeated { ids, half, start }
    }

    /// The positions of the second half.
    pub fn second_half(&self) -> std::ops::Range<usize> {
        self.start + self.half..self.start + 2 * self.half
    }
}

/// One head's scores on a repeated sequence (mean attention weights, and the copying share).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadScores {
    /// On the token before, over every row after the first.
    pub previous_token: f64,
    /// On the same token's earlier occurrence, over the second half.
    pub duplicate_token: f64,
    /// On the token after that occurrence, over the second half.
    pub prefix_matching: f64,
    /// The share of the sequence's other tokens its output favours the attended one over.
    pub copying: f64,
}

/// A decoder head's role, from its scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecoderRole {
    /// Attends to the token after the current one's earlier occurrence and copies it.
    Induction,
    /// Attends to the token before.
    PreviousToken,
    /// Attends to the current token's earlier occurrence.
    DuplicateToken,
    /// None of these.
    None,
}

impl DecoderRole {
    /// A short label for the head grid.
    pub fn short(self) -> &'static str {
        match self {
            DecoderRole::Induction => "ind",
            DecoderRole::PreviousToken => "prev",
            DecoderRole::DuplicateToken => "dup",
            DecoderRole::None => "",
        }
    }

    /// Its name in a sentence.
    pub fn name(self) -> &'static str {
        match self {
            DecoderRole::Induction => "induction",
            DecoderRole::PreviousToken => "previous-token",
            DecoderRole::DuplicateToken => "duplicate-token",
            DecoderRole::None => "no role",
        }
    }
}

impl HeadScores {
    /// The head's role: induction when it prefix-matches at least [`FOCUSED`] and copies at
    /// least [`COPYING`]; else the larger of previous-token and duplicate-token that reaches
    /// [`FOCUSED`]; else none.
    pub fn role(&self) -> DecoderRole {
        if self.prefix_matching >= FOCUSED && self.copying >= COPYING {
            return DecoderRole::Induction;
        }
        let best = if self.previous_token >= self.duplicate_token {
            (self.previous_token, DecoderRole::PreviousToken)
        } else {
            (self.duplicate_token, DecoderRole::DuplicateToken)
        };
        if best.0 >= FOCUSED {
            best.1
        } else {
            DecoderRole::None
        }
    }
}

/// Every head's attention scores on `seq` (`attention[l]`: layer `l`'s `heads x n x n`), as
/// `[previous-token, duplicate-token, prefix-matching]`, numbered `layer * heads + head`.
pub fn attention_scores(spec: &ModelSpec, attention: &[Arc<Vec<f32>>], seq: &Repeated) -> Vec<[f64; 3]> {
    let n = seq.ids.len();
    let second = seq.second_half();
    let mut scores = Vec::with_capacity(spec.total_heads());
    for layer in attention.iter().take(spec.layers) {
        assert_eq!(layer.len(), spec.heads * n * n, "heads x n x n weights of the sequence");
        for map in layer.chunks_exact(n * n) {
            let at = |i: usize, j: usize| map[i * n + j] as f64;
            let previous = (1..n).map(|i| at(i, i - 1)).sum::<f64>() / (n - 1).max(1) as f64;
            let duplicate = second.clone().map(|i| at(i, i - seq.half)).sum::<f64>() / seq.half as f64;
            let prefix = second.clone().map(|i| at(i, i - seq.half + 1)).sum::<f64>() / seq.half as f64;
            scores.push([previous, duplicate, prefix]);
        }
    }
    scores
}

/// Every head's copying score on `seq` from a pass of `model` over it (which kept its heads'
/// outputs): at each second-half position, the head's direct logits of the sequence's tokens,
/// and the share of the others the token it should copy (at `i - L + 1`) beats, ties half.
pub fn copying_scores(model: &Gpt2, pass: &DecoderOutput, seq: &Repeated) -> Vec<f64> {
    let spec = &model.spec;
    let (d, d_k) = (spec.d_model, spec.d_k());
    let mut candidates: Vec<u32> = seq.ids[seq.start..seq.start + seq.half].to_vec();
    candidates.sort_unstable();
    // Their embedding rows, read once (a model held at 8 bits keeps them in f16: each read
    // widens one), not once per head and position.
    let rows: Vec<_> = candidates.iter().map(|&t| model.word.row(t as usize, d)).collect();
    let mut scores = Vec::with_capacity(spec.total_heads());
    for (l, block) in model.blocks.iter().enumerate() {
        let outs = &pass.head_outputs[l];
        let w_out = block.out.weights();
        for h in 0..spec.heads {
            let cols = h * d_k..(h + 1) * d_k;
            let mut share = 0.0;
            for i in seq.second_half() {
                let o = &outs[i * d + cols.start..i * d + cols.end];
                // What the head writes into the residual stream: W_O's columns of head h times o.
                let mut written: Vec<f64> = (0..d)
                    .map(|r| {
                        w_out[r * d + cols.start..r * d + cols.end]
                            .iter()
                            .zip(o)
                            .map(|(&w, &v)| w as f64 * v as f64)
                            .sum()
                    })
                    .collect();
                let mean = written.iter().sum::<f64>() / d as f64;
                written.iter_mut().zip(&model.ln_f.w).for_each(|(v, &g)| *v = (*v - mean) * g as f64);
                let logit = |e: &[f32]| -> f64 { e.iter().zip(&written).map(|(&e, w)| e as f64 * w).sum() };
                let target = seq.ids[i - seq.half + 1];
                let want = match candidates.binary_search(&target) {
                    Ok(k) => logit(&rows[k]),
                    Err(_) => logit(&model.word.row(target as usize, d)),
                };
                let beaten: f64 = candidates
                    .iter()
                    .zip(&rows)
                    .filter(|(&c, _)| c != target)
                    .map(|(_, e)| match logit(e).total_cmp(&want) {
                        std::cmp::Ordering::Less => 1.0,
                        std::cmp::Ordering::Equal => 0.5,
                        std::cmp::Ordering::Greater => 0.0,
                    })
                    .sum();
                share += beaten / (candidates.len() - 1) as f64;
            }
            scores.push(share / seq.half as f64);
        }
    }
    scores
}

/// Every head's scores on `seq` from a pass of `model` over it with every head active.
pub fn head_scores(model: &Gpt2, pass: &DecoderOutput, seq: &Repeated) -> Vec<HeadScores> {
    let copying = copying_scores(model, pass, seq);
    attention_scores(&model.spec, &pass.attention, seq)
        .into_iter()
        .zip(copying)
        .map(|([previous_token, duplicate_token, prefix_matching], copying)| HeadScores {
            previous_token,
            duplicate_token,
            prefix_matching,
            copying,
        })
        .collect()
}

/// A pass's mean loss (nats per token) on the tokens of each half that could be predicted: the
/// first half's after its first token (random: about `ln vocab` for a model that cannot know
/// them), the second half's after its first (predictable by copying).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HalfLosses {
    /// Over `a_1 .. a_{L-1}` the first time.
    pub first: f64,
    /// Over `a_1 .. a_{L-1}` the second time.
    pub repeated: f64,
}

impl HalfLosses {
    /// The two halves' losses of a pass over `seq` (`losses[t]`: the loss of token `t + 1`).
    pub fn of(losses: &[f64], seq: &Repeated) -> HalfLosses {
        let mean = |tokens: std::ops::Range<usize>| {
            let n = tokens.len().max(1) as f64;
            tokens.map(|t| losses[t - 1]).sum::<f64>() / n
        };
        let (s, l) = (seq.start, seq.half);
        HalfLosses { first: mean(s + 1..s + l), repeated: mean(s + l + 1..s + 2 * l) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::HeadSet;
    use crate::cpu::Kernel;
    use crate::model::spec::Activation;

    fn spec(heads: usize, d: usize) -> ModelSpec {
        ModelSpec {
            layers: 1,
            heads,
            d_model: d,
            ffn: 8,
            vocab: 60,
            positions: 64,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        }
    }

    /// One layer of five heads, each a pure pattern on `seq`: previous-token, induction,
    /// duplicate-token, uniform over what it may read, and on the first token.
    fn built(seq: &Repeated) -> Vec<Arc<Vec<f32>>> {
        let n = seq.ids.len();
        let mut maps = vec![0.0f32; 5 * n * n];
        for i in 0..n {
            let second = seq.second_half().contains(&i);
            let rows = [
                vec![(i.saturating_sub(1), 1.0)],
                if second { vec![(i - seq.half + 1, 1.0)] } else { vec![(0, 1.0)] },
                if second { vec![(i - seq.half, 1.0)] } else { vec![(0, 1.0)] },
                (0..=i).map(|j| (j, 1.0 / (i + 1) as f32)).collect(),
                vec![(0, 1.0)],
            ];
            for (h, row) in rows.iter().enumerate() {
                for &(j, w) in row {
                    maps[h * n * n + i * n + j] += w;
                }
            }
        }
        vec![Arc::new(maps)]
    }

    #[test]
    fn each_built_pattern_scores_one_on_its_own_target_and_little_elsewhere() {
        let seq = Repeated::random(50, 10, 7, Some(0));
        assert_eq!((seq.ids.len(), seq.ids[0], seq.second_half()), (21, 0, 11..21));
        assert_eq!(seq.ids[1..11], seq.ids[11..21]);
        let s = attention_scores(&spec(5, 10), &built(&seq), &seq);
        assert_eq!(s[0][0], 1.0, "previous-token");
        assert_eq!((s[1][2], s[1][1]), (1.0, 0.0), "induction: prefix matching, not duplicate");
        assert_eq!((s[2][1], s[2][2]), (1.0, 0.0), "duplicate-token, not prefix matching");
        for h in [3, 4] {
            assert!(s[h].iter().all(|&v| v < 0.3), "head {h} has no role: {:?}", s[h]);
        }
        let role = |[previous_token, duplicate_token, prefix_matching]: [f64; 3], copying| {
            HeadScores { previous_token, duplicate_token, prefix_matching, copying }.role()
        };
        assert_eq!(
            [
                role(s[0], 0.5),
                role(s[1], 0.9),
                role(s[1], 0.5),
                role(s[2], 0.5),
                role(s[3], 0.9),
                role(s[4], 0.5)
            ],
            [
                DecoderRole::PreviousToken,
                DecoderRole::Induction,
                DecoderRole::None,
                DecoderRole::DuplicateToken,
                DecoderRole::None,
                DecoderRole::None
            ],
            "a head that attends like an induction head but does not copy is not one"
        );
    }

    #[test]
    fn a_head_that_writes_the_attended_token_copies_and_one_that_writes_its_opposite_does_not() {
        let mut model = Gpt2::random(spec(1, 16), 3);
        let d = 16;
        model.blocks[0].out.w =
            (0..d * d).map(|x| if x % (d + 1) == 0 { 1.0 } else { 0.0 }).collect::<Vec<_>>().into();
        model.ln_f.w = vec![1.0; d];
        let seq = Repeated::random(60, 8, 5, None);
        let mut pass = model.forward(Kernel::Scalar, &seq.ids, &HeadSet::all(1));
        let mut copy = vec![0.0f32; seq.ids.len() * d];
        for i in seq.second_half() {
            let t = seq.ids[i - seq.half + 1] as usize;
            copy[i * d..(i + 1) * d].copy_from_slice(&model.word.row(t, d));
        }
        pass.head_outputs[0] = Arc::new(copy.clone());
        let copying = copying_scores(&model, &pass, &seq)[0];
        assert!(copying > 0.9, "{copying}");
        pass.head_outputs[0] = Arc::new(copy.iter().map(|v| -v).collect());
        let opposite = copying_scores(&model, &pass, &seq)[0];
        assert!(opposite < 0.1, "{opposite}");
    }

    #[test]
    fn the_halves_losses_average_the_predictable_tokens_of_each_half() {
        let seq = Repeated { ids: vec![9, 1, 2, 3, 1, 2, 3], half: 3, start: 1 };
        // losses[t] is token t + 1's: tokens 2, 3 (first half), 5, 6 (second half after its first).
        let losses = [10.0, 4.0, 6.0, 7.0, 1.0, 3.0];
        assert_eq!(HalfLosses::of(&losses, &seq), HalfLosses { first: 5.0, repeated: 2.0 });
    }
}
