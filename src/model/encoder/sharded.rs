//! One sentence's pass through the trained model cut across threads that share no memory (web
//! workers, each with its own wasm instance and its own copy of the weights).
//!
//! Shard `s` of `S` holds, in every layer, a range of the layer's heads (their rows of `W_q`,
//! `W_k`, `W_v` and columns of `W_o`, as [`crate::model::encoder::pruned::PrunedAttention`] cuts them) and a
//! range of the feed-forward units (their rows of `W_in` and columns of `W_out`). A layer is
//! two steps; in each, every shard computes a partial branch from the same input `x`
//! (`tokens x d_model`), and the thread that drives the pass ([`SplitPass`]) adds them up:
//!
//! ```text
//! attention:     x <- LayerNorm1(x + b_o   + sum_s  concat_s(x) W_o[:, s]^T)
//! feed-forward:  x <- LayerNorm2(x + b_out + sum_s  GELU(x W_in[s]^T + b_in[s]) W_out[:, s]^T)
//! ```
//!
//! The products into the residual stream (`W_o`, `W_out`) sum over heads and units: each shard
//! sums its own, and the driver adds the shards' sums. The terms are the single-thread pass's,
//! grouped differently, so the result differs from it by rounding only (`tests/minilm_passes.rs` bounds
//! it; one shard gives the same bits).

use crate::cpu::head_shards::even_ranges;
use crate::cpu::Kernel;
use crate::model::encoder::bert::{pool, Bert, Layer};
use crate::model::encoder::pruned::PrunedAttention;
use crate::model::layers::split::Step;
use crate::model::layers::{activate, layer_norm, linear, Linear};
use crate::model::spec::ModelSpec;

/// One layer's share of a shard, without biases (the driver adds them once).
#[derive(Clone, Debug)]
struct ShardLayer {
    attention: PrunedAttention,
    ffn_in: Linear,
    ffn_out: Linear,
}

/// Shard `index` of `count` of the model: its heads and feed-forward units in every layer.
#[derive(Clone, Debug)]
pub struct BertShard {
    spec: ModelSpec,
    layers: Vec<ShardLayer>,
}

impl BertShard {
    /// Shard `index` of `count` (`index < count <=` heads per layer) of `base`.
    pub fn new(base: &Bert, index: usize, count: usize) -> Self {
        let spec = *base.spec();
        assert!(
            index < count && count <= spec.heads,
            "shard {index} of {count}: at most {} shards",
            spec.heads
        );
        let (heads, units) =
            (even_ranges(spec.heads, count)[index].clone(), even_ranges(spec.ffn, count)[index].clone());
        let layers = base
            .layers
            .iter()
            .map(|layer| {
                let mut attention = PrunedAttention::new(&spec, layer, heads.clone().collect());
                attention.out.b.fill(0.0);
                ShardLayer {
                    attention,
                    ffn_in: rows_of(&layer.ffn_in, &units),
                    ffn_out: columns_of(layer, &units),
                }
            })
            .collect();
        BertShard { spec, layers }
    }

    /// This shard's partial branch of `step` for a sentence whose layer input is `x`
    /// (`tokens x d_model`), the same shape.
    pub fn run(&self, kernel: Kernel, step: Step, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0f32; x.len()];
        self.run_into(kernel, step, x, &mut out);
        out
    }

    /// [`BertShard::run`] into `out` (the shape of `x`; every element written).
    pub fn run_into(&self, kernel: Kernel, step: Step, x: &[f32], out: &mut [f32]) {
        let d = self.spec.d_model;
        assert!(x.len().is_multiple_of(d), "x must be tokens x {d}");
        assert_eq!(out.len(), x.len(), "the partial branch has the shape of x");
        let rows = x.len() / d;
        match step {
            Step::Attention(l) => self.layers[l].attention.branch(kernel, x, &[rows], out),
            Step::FeedForward(l) => {
                let layer = &self.layers[l];
                let units = layer.ffn_in.b.len();
                let mut hidden = vec![0.0f32; rows * units];
                linear(kernel, x, rows, &layer.ffn_in, &mut hidden, units);
                activate(kernel, self.spec.activation, &mut hidden);
                linear(kernel, &hidden, rows, &layer.ffn_out, out, d);
            }
        }
    }
}

/// Rows `units` of `lin` (output features) and their biases.
fn rows_of(lin: &Linear, units: &std::ops::Range<usize>) -> Linear {
    lin.select_outputs(&units.clone().collect::<Vec<_>>())
}

/// Columns `units` of the layer's `W_out` (`d_model x ffn`), with a zero bias.
fn columns_of(layer: &Layer, units: &std::ops::Range<usize>) -> Linear {
    layer.ffn_out.select_inputs(std::slice::from_ref(units), vec![0.0; layer.ffn_out.out()])
}

/// A sentence's pass driven step by step: the driver hands out [`SplitPass::step`] and its
/// input, each shard runs it, and [`SplitPass::absorb`] adds their partial branches.
#[derive(Clone, Debug)]
pub struct SplitPass<'m> {
    base: &'m Bert,
    x: Vec<f32>,
    next: Option<Step>,
}

impl<'m> SplitPass<'m> {
    /// The pass of `ids` (1 to the spec's positions token ids), at its first step.
    pub fn new(base: &'m Bert, ids: &[u32]) -> Self {
        SplitPass { base, x: base.embed(ids), next: Some(Step::Attention(0)) }
    }

    /// What the shards compute next, `None` once the pass is done.
    pub fn step(&self) -> Option<Step> {
        self.next
    }

    /// The input of the next step (`tokens x d_model`).
    pub fn input(&self) -> &[f32] {
        &self.x
    }

    /// Adds every shard's partial branch of the current step (each `tokens x d_model`; together
    /// the shards of one cut) and moves on.
    pub fn absorb(&mut self, partials: &[&[f32]]) {
        let step = self.next.expect("the pass is done: nothing to absorb");
        assert!(partials.iter().all(|p| p.len() == self.x.len()), "a partial branch of another length");
        let (bias, norm) = match step {
            Step::Attention(l) => (&self.base.layers[l].out.b, &self.base.layers[l].ln1),
            Step::FeedForward(l) => (&self.base.layers[l].ffn_out.b, &self.base.layers[l].ln2),
        };
        let mut branch = vec![0.0f32; self.x.len()];
        for p in partials {
            branch.iter_mut().zip(*p).for_each(|(s, v)| *s += v);
        }
        let spec = self.base.spec();
        let d = spec.d_model;
        for (row, branch) in self.x.chunks_exact_mut(d).zip(branch.chunks_exact(d)) {
            row.iter_mut().zip(branch).zip(bias).for_each(|((v, s), b)| *v += s + b);
        }
        layer_norm(&mut self.x, norm, spec.layer_norm_eps);
        self.next = step.next(spec.layers);
    }

    /// The sentence embedding, once every step is absorbed.
    pub fn embedding(&self) -> Option<Vec<f32>> {
        self.next.is_none().then(|| pool(self.base.spec(), &self.x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_8_bit_pass_cut_across_shards_is_as_close_to_f16_as_the_whole_pass() {
        use crate::attention::precision::Precision;
        use crate::attention::HeadSet;
        use crate::model::spec::ModelSpec;
        let spec = ModelSpec::SMALL;
        let f16 = Bert::random(spec, 7);
        let mut q8 = f16.clone();
        q8.set_precision(
            Kernel::Simd,
            Precision::Int8,
            &[(0..12).map(|i| (i * 7 % spec.vocab) as u32).collect()],
        );
        let ids: Vec<u32> = (0..9).map(|i| (i * 5 % spec.vocab) as u32).collect();
        // Each shard quantizes its own heads' outputs (a finer step than the whole row's), so the
        // cut pass is as close to the f16 model as the whole pass, not equal to it.
        let shards = [BertShard::new(&q8, 0, 2), BertShard::new(&q8, 1, 2)];
        let mut pass = SplitPass::new(&q8, &ids);
        while let Some(step) = pass.step() {
            let parts: Vec<Vec<f32>> =
                shards.iter().map(|s| s.run(Kernel::Simd, step, pass.input())).collect();
            pass.absorb(&parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
        let all = HeadSet::all(spec.total_heads());
        let exact = f16.forward(Kernel::Simd, &ids, &all).embedding;
        let whole = crate::attention::cosine(&q8.forward(Kernel::Simd, &ids, &all).embedding, &exact);
        let split = crate::attention::cosine(&pass.embedding().expect("done"), &exact);
        assert!(split > 0.99 && (split - whole).abs() < 0.01, "cut {split}, whole {whole}");
    }
}
