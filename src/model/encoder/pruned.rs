//! The model really pruned: each layer keeps only its active heads' rows of `W_q`, `W_k` and
//! `W_v` (and their biases) and those heads' columns of `W_o`, as Hugging Face's `prune_heads`
//! does, so a pass does less work instead of computing heads and zeroing them. A layer with no
//! head left skips attention: its branch is `W_o`'s bias alone. The feed-forward layers and
//! embeddings are shared with the full model, not copied.
//!
//! Its output equals the masked model's ([`Bert::forward`] with the same heads pruned): the kept
//! heads' products run over the same terms in the same order, without the zeros.
//!
//! [`PrunedBert::embed_batch`] runs many sentences at once: every projection and feed-forward
//! product takes all their tokens together (one large matrix product instead of one per
//! sentence), and attention runs per sentence.

use std::sync::Arc;

use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::encoder::bert::{pool, Bert};
use crate::model::layers::{linear_in_turns, Linear};
use crate::model::spec::ModelSpec;

/// One layer's attention with only its kept heads.
#[derive(Clone, Debug, PartialEq)]
pub struct PrunedAttention {
    /// The heads kept, as indices within the layer, in order.
    pub kept: Vec<usize>,
    /// Per-head width.
    pub d_k: usize,
    /// Query, key and value projections: `kept.len() * d_k` rows each.
    pub qkv: [Linear; 3],
    /// The output projection: `d_model x kept.len() * d_k`, and the full bias.
    pub out: Linear,
}

impl PrunedAttention {
    pub(super) fn new(
        spec: &ModelSpec,
        layer: &crate::model::encoder::bert::Layer,
        kept: Vec<usize>,
    ) -> Self {
        let d_k = spec.d_k();
        let channels: Vec<usize> = kept.iter().flat_map(|&h| h * d_k..(h + 1) * d_k).collect();
        let qkv = layer.qkv.each_ref().map(|lin| lin.select_outputs(&channels));
        let columns: Vec<std::ops::Range<usize>> = kept.iter().map(|&h| h * d_k..(h + 1) * d_k).collect();
        let out = layer.out.select_inputs(&columns, layer.out.b.clone());
        PrunedAttention { kept, d_k, qkv, out }
    }

    /// Width of the kept heads together.
    fn width(&self) -> usize {
        self.kept.len() * self.d_k
    }

    /// The attention branch for sentences of `lengths` tokens whose rows follow each other in
    /// `x` (`rows x d_model`), into `branch` (the same shape): the kept heads' projections over
    /// all rows at once, attention sentence by sentence, then the output projection and its bias.
    pub fn branch(&self, kernel: Kernel, x: &[f32], lengths: &[usize], branch: &mut [f32]) {
        at_once(self.branch_in_turns(kernel, x, lengths, branch, &AtOnce))
    }

    /// [`PrunedAttention::branch`] with its products and heads in `turns`' steps: the same bits.
    pub async fn branch_in_turns(
        &self,
        kernel: Kernel,
        x: &[f32],
        lengths: &[usize],
        branch: &mut [f32],
        turns: &dyn Turns,
    ) {
        let d = self.out.b.len();
        let (rows, w) = (x.len() / d, self.width());
        if w == 0 {
            // No head left: the branch is the output projection's bias.
            branch.chunks_exact_mut(d).for_each(|row| row.copy_from_slice(&self.out.b));
            return;
        }
        let mut qkv = vec![0.0f32; rows * 3 * w];
        for (i, lin) in self.qkv.iter().enumerate() {
            linear_in_turns(kernel, x, rows, lin, &mut qkv[i * w..], 3 * w, turns).await;
        }
        let mut concat = vec![0.0f32; rows * w];
        // One head's weights at a time, in a buffer of the longest sentence's size.
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let mut probs = vec![0.0f32; longest * longest];
        let mut s = 0;
        for &n in lengths {
            let sentence = &qkv[s * 3 * w..(s + n) * 3 * w];
            let outputs = &mut concat[s * w..(s + n) * w];
            let (kept, probs) = (self.kept.len(), &mut probs[..n * n]);
            attend_in_turns(kernel, sentence, n, kept, self.d_k, Mask::None, probs, outputs, turns).await;
            s += n;
        }
        linear_in_turns(kernel, &concat, rows, &self.out, branch, d, turns).await;
    }
}

/// A model with the pruned heads' weights removed.
#[derive(Clone, Debug)]
pub struct PrunedBert<'m> {
    base: &'m Bert,
    heads: HeadSet,
    attention: Arc<Vec<PrunedAttention>>,
}

impl<'m> PrunedBert<'m> {
    /// `base` with only `heads` kept (a set of the spec's total heads).
    pub fn new(base: &'m Bert, heads: &HeadSet) -> Self {
        let spec = base.spec();
        let attention = base
            .layers
            .iter()
            .enumerate()
            .map(|(l, layer)| {
                let kept = (0..spec.heads).filter(|&h| heads.is_active(l * spec.heads + h)).collect();
                PrunedAttention::new(spec, layer, kept)
            })
            .collect();
        PrunedBert { base, heads: heads.clone(), attention: Arc::new(attention) }
    }

    /// `base` with only `heads` kept, from the weights a [`PrunedBert::new`] of the same `base`
    /// and `heads` gathered already ([`PrunedBert::gathered`]): a worker evaluating one set of
    /// heads piece by piece gathers them once ([`crate::jobs::copies::Copies`] keeps them).
    pub fn with_gathered(base: &'m Bert, heads: &HeadSet, attention: Arc<Vec<PrunedAttention>>) -> Self {
        PrunedBert { base, heads: heads.clone(), attention }
    }

    /// The kept heads' weights, gathered once and shared by the copies of this cut.
    pub fn gathered(&self) -> &Arc<Vec<PrunedAttention>> {
        &self.attention
    }

    /// The full model it was cut from (its embeddings and feed-forward layers are used as they are).
    pub fn base(&self) -> &'m Bert {
        self.base
    }

    /// The heads kept.
    pub fn heads(&self) -> &HeadSet {
        &self.heads
    }

    /// Each layer's pruned attention.
    pub fn attention(&self) -> &[PrunedAttention] {
        &self.attention
    }

    /// The sentence embedding of `ids`.
    pub fn embed(&self, kernel: Kernel, ids: &[u32]) -> Vec<f32> {
        self.embed_batch(kernel, &[ids.to_vec()]).swap_remove(0)
    }

    /// The sentence embeddings of every sentence in `batch` (token ids, 1 to the spec's
    /// positions each), computed together.
    pub fn embed_batch(&self, kernel: Kernel, batch: &[Vec<u32>]) -> Vec<Vec<f32>> {
        at_once(self.embed_batch_in_turns(kernel, batch, &AtOnce))
    }

    /// [`PrunedBert::embed_batch`] with its products and heads in `turns`' steps: the same bits.
    pub async fn embed_batch_in_turns(
        &self,
        kernel: Kernel,
        batch: &[Vec<u32>],
        turns: &dyn Turns,
    ) -> Vec<Vec<f32>> {
        if batch.is_empty() {
            return Vec::new();
        }
        let spec = self.base.spec();
        let d = spec.d_model;
        let lengths: Vec<usize> = batch.iter().map(Vec::len).collect();
        let rows = batch.iter().map(Vec::len).sum::<usize>();
        let mut x = Vec::with_capacity(rows * d);
        batch.iter().for_each(|ids| x.extend(self.base.embed(ids)));
        let (mut branch, mut hidden) = (vec![0.0f32; rows * d], vec![0.0f32; rows * spec.ffn]);
        for (layer, att) in self.base.layers.iter().zip(self.attention.iter()) {
            att.branch_in_turns(kernel, &x, &lengths, &mut branch, turns).await;
            layer.finish_in_turns(kernel, spec, &mut x, &mut branch, &mut hidden, turns).await;
        }
        let mut start = 0;
        lengths
            .iter()
            .map(|&n| {
                let rows = &x[start * d..(start + n) * d];
                start += n;
                pool(spec, rows)
            })
            .collect()
    }
}

/// What a pass of a (pruned) model costs, counted from its shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cost {
    /// Multiply-adds times two in the attention blocks (projections, scores, weighted sums).
    pub attention_flops: u64,
    /// The same over the whole pass: attention and feed-forward layers.
    pub total_flops: u64,
    /// Bytes of the model's weights as the page stores them (f16), embeddings included.
    pub weight_bytes: u64,
}

pub use crate::model::spec::WEIGHT_BYTES;

/// The cost of one pass of a model of shape `spec` over sentences of `lengths` tokens with only
/// `heads` kept.
pub fn cost(spec: &ModelSpec, heads: &HeadSet, lengths: &[usize]) -> Cost {
    let (d, dk, ffn) = (spec.d_model as u64, spec.d_k() as u64, spec.ffn as u64);
    let (mut attention_flops, mut ffn_flops) = (0u64, 0u64);
    // Word, position and (one) token type embeddings; their LayerNorm.
    let mut weights = (spec.vocab as u64 + spec.positions as u64 + 1 + 2) * d;
    for l in 0..spec.layers {
        let kept = (0..spec.heads).filter(|&h| heads.is_active(l * spec.heads + h)).count() as u64;
        for &n in lengths {
            let n = n as u64;
            attention_flops += 2 * n * d * 3 * kept * dk + 2 * 2 * kept * n * n * dk + 2 * n * kept * dk * d;
            ffn_flops += 2 * 2 * n * d * ffn;
        }
        weights += 3 * (kept * dk * d + kept * dk) + d * kept * dk + d; // Q, K, V; W_o and its bias
        weights += 2 * d * ffn + ffn + d + 4 * d; // feed-forward, two LayerNorms
    }
    Cost { attention_flops, total_flops: attention_flops + ffn_flops, weight_bytes: weights * WEIGHT_BYTES }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::load::names::encoder_names;

    const SPECS: [ModelSpec; 2] = [ModelSpec::MINILM_L6_V2, ModelSpec::SMALL];

    #[test]
    fn the_full_models_weights_are_its_checkpoints_tensors_in_f16() {
        for spec in SPECS {
            let params: usize =
                encoder_names(&spec).iter().map(|(_, shape)| shape.iter().product::<usize>()).sum();
            // The checkpoint stores both token types; the page keeps the one BERT uses.
            let stored = params - spec.d_model;
            let all = HeadSet::all(spec.total_heads());
            assert_eq!(cost(&spec, &all, &[]).weight_bytes, stored as u64 * WEIGHT_BYTES, "{spec:?}");
        }
    }

    #[test]
    fn pruning_a_head_removes_its_share_of_attention_and_nothing_else() {
        for spec in SPECS {
            pruning_one_head_of(&spec);
        }
    }

    fn pruning_one_head_of(spec: &ModelSpec) {
        let total = spec.total_heads();
        let lengths = [10, 3];
        let full = cost(spec, &HeadSet::all(total), &lengths);
        let one = cost(spec, &HeadSet::with_pruned(total, [7]), &lengths);
        let (d, dk) = (spec.d_model as u64, spec.d_k() as u64);
        // Per token: Q, K, V and W_o columns of the head; per sentence the n x n products.
        let per_head: u64 = lengths
            .iter()
            .map(|&n| n as u64)
            .map(|n| 2 * n * d * 3 * dk + 4 * n * n * dk + 2 * n * dk * d)
            .sum();
        assert_eq!(full.attention_flops - one.attention_flops, per_head);
        assert_eq!(full.total_flops - one.total_flops, per_head);
        assert_eq!(full.weight_bytes - one.weight_bytes, (4 * d * dk + 3 * dk) * WEIGHT_BYTES);
        let none = cost(spec, &HeadSet::with_pruned(total, 0..total), &lengths);
        assert_eq!(none.attention_flops, 0);
        assert!(none.total_flops > 0 && none.total_flops == full.total_flops - full.attention_flops);
    }

    #[test]
    fn an_8_bit_model_prunes_exactly_like_its_masked_pass_and_returns_to_f16_bit_for_bit() {
        use crate::attention::precision::Precision;
        let spec = SPECS[1];
        let f16 = Bert::random(spec, 7);
        let mut q8 = f16.clone();
        let calibration: Vec<Vec<u32>> = vec![(0..12).map(|i| (i * 7 % spec.vocab) as u32).collect()];
        q8.set_precision(Kernel::Simd, Precision::Int8, &calibration);
        assert_eq!((q8.precision(), f16.precision()), (Precision::Int8, Precision::F16));
        let ids: Vec<u32> = (0..9).map(|i| (i * 5 % spec.vocab) as u32).collect();
        let total = spec.total_heads();
        for heads in
            [HeadSet::all(total), HeadSet::with_pruned(total, [1, 6]), HeadSet::with_pruned(total, 0..4)]
        {
            let masked = q8.forward(Kernel::Simd, &ids, &heads).embedding;
            // A pruned head's zero columns cancel in the zero point's correction, and the kept
            // channels keep their bytes and scales: the same integers, the same bits.
            let pruned = PrunedBert::new(&q8, &heads).embed(Kernel::Simd, &ids);
            assert_eq!(masked, pruned, "{heads:?}");
            let exact = f16.forward(Kernel::Simd, &ids, &heads).embedding;
            let c = crate::attention::cosine(&masked, &exact);
            assert!(c > 0.99 && c < 1.0, "{heads:?}: 8-bit against f16, cosine {c}");
        }
        // Stored bytes: the f16 model's are its cost's; at 8 bits each dense weight is a byte
        // (strips of 8 channels by 4 inputs, padded), W_2's a byte and a half (12 bits), each
        // output channel 8 bytes of factors, each input 4 (W_2's factors are ones).
        let all = cost(&spec, &HeadSet::all(total), &[]).weight_bytes;
        assert_eq!(f16.stored_bytes(), all);
        let (d, ffn, layers) = (spec.d_model as u64, spec.ffn as u64, spec.layers as u64);
        let bytes = |out: u64, inp: u64, halves: u64| {
            halves * out.div_ceil(8) * 8 * inp.div_ceil(4) * 4 / 2 + 8 * out
        };
        let int8_layer = 4 * (bytes(d, d, 2) + 4 * d) + bytes(ffn, d, 2) + 4 * d + bytes(d, ffn, 3) + 4 * ffn;
        let int8 = all - WEIGHT_BYTES * layers * (4 * d * d + 2 * d * ffn) + layers * int8_layer;
        assert_eq!(q8.stored_bytes(), int8);
        q8.set_precision(Kernel::Simd, Precision::F16, &[]);
        assert_eq!(q8, f16, "back to f16: the 8-bit copies dropped, nothing else changed");
    }
}
