//! How much each head matters to a task, as Michel et al. (2019) measure it: put a gate
//! `ξ_h` on every head's output (1 kept, 0 pruned), and take the expected absolute gradient of
//! the task's loss with respect to each gate, `I_h = E_x |∂L(x)/∂ξ_h|`. One forward and one
//! backward pass per example give all 72 at once, where measuring each head by removing it
//! would take 72 passes.
//!
//! The task here is sentence similarity: an example is a pair of sentences with a human score
//! `y` in `[0, 1]`, and the loss is `(cos(u, v) - y)^2` on their embeddings (the loss
//! sentence-transformers trains such pairs with). The backward pass runs through mean pooling
//! and normalisation, each layer's LayerNorms, feed-forward layer (exact GELU), output
//! projection, the gates, and attention (softmax included) down to the first layer.

use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::encoder::bert::{Bert, Layer};
use crate::model::layers::backward::{
    activation_grad, attention_backward_in_turns, gates, gates_backward, layer_norm_backward,
    layer_norm_traced, matmul_in_turns,
};
use crate::model::layers::{activate, linear_in_turns};
use crate::model::spec::{ModelSpec, Pooling};

/// What one layer's forward pass keeps for the backward pass.
struct LayerTape {
    /// Tokens.
    n: usize,
    qkv: Vec<f32>,
    probs: Vec<f32>,
    /// Head outputs before their gates, `n x d_model`.
    heads: Vec<f32>,
    /// LayerNorm 1's normalised input and inverse deviations.
    norm1: (Vec<f32>, Vec<f64>),
    /// Feed-forward pre-activations.
    pre: Vec<f32>,
    norm2: (Vec<f32>, Vec<f64>),
}

/// One sentence's forward pass with `gates` on the heads, keeping what the backward pass needs,
/// in `turns`' steps.
async fn forward(
    bert: &Bert,
    kernel: Kernel,
    ids: &[u32],
    gates: &[f32],
    turns: &dyn Turns,
) -> (Vec<f32>, Vec<LayerTape>) {
    let spec = bert.spec();
    let (n, d, heads_per_layer, d_k, eps) =
        (ids.len(), spec.d_model, spec.heads, spec.d_k(), spec.layer_norm_eps);
    let mut x = bert.embed(ids);
    let mut traces = Vec::with_capacity(spec.layers);
    for (l, layer) in bert.layers.iter().enumerate() {
        let mut qkv = vec![0.0f32; n * 3 * d];
        for (i, lin) in layer.qkv.iter().enumerate() {
            linear_in_turns(kernel, &x, n, lin, &mut qkv[i * d..], 3 * d, turns).await;
        }
        let (mut probs, mut heads) = (vec![0.0f32; heads_per_layer * n * n], vec![0.0f32; n * d]);
        let (h, mask) = (heads_per_layer, Mask::None);
        attend_in_turns(kernel, &qkv, n, h, d_k, mask, &mut probs, &mut heads, turns).await;
        let mut gated = heads.clone();
        for row in gated.chunks_exact_mut(d) {
            for (h, block) in row.chunks_exact_mut(d_k).enumerate() {
                block.iter_mut().for_each(|v| *v *= gates[l * heads_per_layer + h]);
            }
        }
        let mut branch = vec![0.0f32; n * d];
        linear_in_turns(kernel, &gated, n, &layer.out, &mut branch, d, turns).await;
        x.iter_mut().zip(&branch).for_each(|(a, b)| *a += b);
        let norm1 = layer_norm_traced(&mut x, &layer.ln1, eps);
        let mut pre = vec![0.0f32; n * spec.ffn];
        linear_in_turns(kernel, &x, n, &layer.ffn_in, &mut pre, spec.ffn, turns).await;
        let mut hidden = pre.clone();
        activate(kernel, spec.activation, &mut hidden);
        linear_in_turns(kernel, &hidden, n, &layer.ffn_out, &mut branch, d, turns).await;
        x.iter_mut().zip(&branch).for_each(|(a, b)| *a += b);
        let norm2 = layer_norm_traced(&mut x, &layer.ln2, eps);
        traces.push(LayerTape { n, qkv, probs, heads, norm1, pre, norm2 });
    }
    (x, traces)
}

/// A sentence's embedding, as the backward pass needs it.
struct Pooled {
    /// The mean-pooled, normalised embedding.
    embedding: Vec<f64>,
    /// The pooled vector's norm.
    norm: f64,
}

impl Pooled {
    /// The embedding of the last layer's rows, pooled as `spec` says (the mean of the rows or the
    /// first one), normalised: the loss is a cosine, which the model's own normalisation does not
    /// change. The backward pass goes through the same rows ([`Pooled::rows`]).
    fn of(hidden: &[f32], spec: &ModelSpec) -> Pooled {
        let d = spec.d_model;
        let rows = Pooled::rows(spec, hidden.len() / d);
        let mut pooled = vec![0.0f64; d];
        for row in hidden.chunks_exact(d).take(rows) {
            pooled.iter_mut().zip(row).for_each(|(p, &v)| *p += v as f64 / rows as f64);
        }
        let norm = pooled.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
        Pooled { embedding: pooled.iter().map(|v| v / norm).collect(), norm }
    }

    /// How many of `n` rows the pooling averages (they are the first ones).
    fn rows(spec: &ModelSpec, n: usize) -> usize {
        match spec.pooling {
            Pooling::Mean { .. } => n,
            Pooling::Cls { .. } => 1.min(n),
        }
    }
}

/// From the gradient of the embedding `de` back to each layer: accumulates `∂L/∂ξ` into `grads`.
/// `gates` and `grads` are one per head, as `turns` is the thread's.
async fn backward(
    bert: &Bert,
    kernel: Kernel,
    traces: &[LayerTape],
    pooled: &Pooled,
    de: &[f64],
    (gates, grads): (&[f32], &mut [f64]),
    turns: &dyn Turns,
) {
    let (n, embedding, norm) = (traces[0].n, &pooled.embedding, pooled.norm);
    // Through normalisation (e = p / |p|) and the pooling (the mean over the pooled rows).
    let dot: f64 = embedding.iter().zip(de).map(|(e, d)| e * d).sum();
    let dp: Vec<f64> = embedding.iter().zip(de).map(|(e, d)| (d - e * dot) / norm).collect();
    let rows = Pooled::rows(bert.spec(), n);
    let row = |i: usize| dp.iter().map(move |&v| if i < rows { (v / rows as f64) as f32 } else { 0.0 });
    let mut dx: Vec<f32> = (0..n).flat_map(row).collect();
    for (l, (layer, t)) in bert.layers.iter().zip(traces).enumerate().rev() {
        let at = Backward { kernel, spec: bert.spec(), layer, tape: t, l, turns };
        dx = at.layer(dx, gates, grads).await;
    }
}

/// Whether the backward pass goes on below layer `l`'s gates: every layer but the first, whose
/// input's gradient (the embeddings') no gate reads.
fn below_gates(l: usize) -> bool {
    l > 0
}

/// Where one layer's backward pass runs: the layer, its tape and index, and the thread's turns.
struct Backward<'a> {
    kernel: Kernel,
    spec: &'a ModelSpec,
    layer: &'a Layer,
    tape: &'a LayerTape,
    l: usize,
    turns: &'a dyn Turns,
}

impl Backward<'_> {
    /// One layer backwards: the gradient of its output `dx` to that of its input; each head's
    /// `∂L/∂ξ` of this layer added to `grads`.
    async fn layer(&self, mut dx: Vec<f32>, gates: &[f32], grads: &mut [f64]) -> Vec<f32> {
        let Backward { kernel, spec, layer, tape: t, l, turns } = *self;
        let (n, d, ffn, heads_per_layer, d_k) = (t.n, spec.d_model, spec.ffn, spec.heads, spec.d_k());
        // x_out = LN2(x_mid + W2 GELU(W1 x_mid + b1) + b2)
        layer_norm_backward(&mut dx, &layer.ln2, &t.norm2);
        let mut d_hidden = matmul_in_turns(kernel, &dx, &layer.ffn_out.w, n, d, ffn, turns).await;
        d_hidden.iter_mut().zip(&t.pre).for_each(|(g, &p)| *g *= activation_grad(spec.activation, p));
        let d_mid = matmul_in_turns(kernel, &d_hidden, &layer.ffn_in.w, n, ffn, d, turns).await;
        dx.iter_mut().zip(&d_mid).for_each(|(a, b)| *a += b);
        // x_mid = LN1(x_in + W_o (gates * heads) + b_o)
        layer_norm_backward(&mut dx, &layer.ln1, &t.norm1);
        let mut d_heads = matmul_in_turns(kernel, &dx, &layer.out.w, n, d, d, turns).await;
        let layer_heads = l * heads_per_layer..(l + 1) * heads_per_layer;
        let layer_gates = &gates[layer_heads.clone()];
        gates_backward(&mut d_heads, &t.heads, d, d_k, layer_gates, &mut grads[layer_heads]);
        if !below_gates(l) {
            return dx;
        }
        // Attention: O_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h, from the packed QKV; a pruned
        // head's gradient is zero (its gate is), so it adds nothing and is skipped.
        let d_qkv =
            attention_backward_in_turns(spec, &t.qkv, &t.probs, &d_heads, n, layer_gates, turns).await;
        for (i, lin) in layer.qkv.iter().enumerate() {
            let d_part: Vec<f32> =
                d_qkv.chunks_exact(3 * d).flat_map(|row| row[i * d..(i + 1) * d].iter().copied()).collect();
            let d_in = matmul_in_turns(kernel, &d_part, &lin.w, n, d, d, turns).await;
            dx.iter_mut().zip(&d_in).for_each(|(a, b)| *a += b);
        }
        dx
    }
}

/// A pair's loss, `(cos(u, v) - y)^2`, and the gradients of its gates.
pub fn pair_gradients(
    bert: &Bert,
    kernel: Kernel,
    u: &[u32],
    v: &[u32],
    y: f64,
    gates: &[f32],
) -> (f64, Vec<f64>) {
    at_once(pair_gradients_in_turns(bert, kernel, (u, v, y), gates, &AtOnce))
}

/// [`pair_gradients`] of the pair `(u, v, y)` in `turns`' steps (each product cut as the forward
/// pass cuts it, a head's attention backward per step): the same bits.
pub async fn pair_gradients_in_turns(
    bert: &Bert,
    kernel: Kernel,
    (u, v, y): (&[u32], &[u32], f64),
    gates: &[f32],
    turns: &dyn Turns,
) -> (f64, Vec<f64>) {
    let (spec, total) = (bert.spec(), bert.spec().total_heads());
    assert_eq!(gates.len(), total, "one gate per head");
    let (hu, tu) = forward(bert, kernel, u, gates, turns).await;
    let (hv, tv) = forward(bert, kernel, v, gates, turns).await;
    let (pu, pv) = (Pooled::of(&hu, spec), Pooled::of(&hv, spec));
    let cos: f64 = pu.embedding.iter().zip(&pv.embedding).map(|(a, b)| a * b).sum();
    let dl = 2.0 * (cos - y);
    let mut grads = vec![0.0; total];
    let scaled = |e: &[f64]| e.iter().map(|x| dl * x).collect::<Vec<f64>>();
    backward(bert, kernel, &tu, &pu, &scaled(&pv.embedding), (gates, &mut grads), turns).await;
    backward(bert, kernel, &tv, &pv, &scaled(&pu.embedding), (gates, &mut grads), turns).await;
    ((cos - y).powi(2), grads)
}

/// Every head's importance on `pairs` (token ids of both sentences and a score in `[0, 1]`) with
/// only `heads` kept: the mean over pairs of `|∂L/∂ξ_h|` (0 for pruned heads).
pub fn head_importance(
    bert: &Bert,
    kernel: Kernel,
    pairs: &[(Vec<u32>, Vec<u32>, f64)],
    heads: &HeadSet,
) -> Vec<f64> {
    let g = gates(heads);
    let mut importance = vec![0.0; bert.spec().total_heads()];
    for (u, v, y) in pairs {
        let (_, grads) = pair_gradients(bert, kernel, u, v, *y, &g);
        importance.iter_mut().zip(&grads).for_each(|(i, d)| *i += d.abs() / pairs.len() as f64);
    }
    importance.iter_mut().enumerate().filter(|(h, _)| heads.is_pruned(*h)).for_each(|(_, i)| *i = 0.0);
    importance
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::turns::InSteps;

    #[test]
    fn gradients_in_steps_give_the_bits_of_gradients_at_once() {
        // Odd widths, both poolings, sentences of different lengths.
        let mean = ModelSpec {
            layers: 2,
            heads: 4,
            d_model: 20,
            ffn: 36,
            vocab: 60,
            positions: 40,
            ..ModelSpec::MINILM_L6_V2
        };
        let cls =
            ModelSpec { heads: 3, d_model: 27, ffn: 41, pooling: Pooling::Cls { normalize: false }, ..mean };
        for spec in [mean, cls] {
            let bert = Bert::random(spec, 13);
            let (u, v): (Vec<u32>, Vec<u32>) =
                ((0..9).map(|i| i * 7 % 60).collect(), (0..23).map(|i| i * 11 % 60).collect());
            let mut g = vec![1.0f32; 2 * spec.heads];
            g[1] = 0.0;
            for kernel in [Kernel::Simd, Kernel::Scalar] {
                let whole = pair_gradients(&bert, kernel, &u, &v, 0.3, &g);
                assert!(whole.0.is_finite() && whole.1.iter().any(|&x| x != 0.0));
                for step in [1, 900, 7000] {
                    let turns = InSteps::of(step);
                    let cut = at_once(pair_gradients_in_turns(&bert, kernel, (&u, &v, 0.3), &g, &turns));
                    assert_eq!(cut, whole, "d_model {}, {kernel:?}, steps of {step}", spec.d_model);
                    // Two sentences: 6 products and the heads per layer forward, 3 products
                    // backward and 4 more with the kept heads above the first layer.
                    let least = 2 * (2 * (6 + spec.heads) + 2 * 3 + 4 + spec.heads);
                    assert!(turns.taken() > least, "{} turns in steps of {step}", turns.taken());
                }
            }
        }
    }
}
