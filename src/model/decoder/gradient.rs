//! How much each of a decoder's heads matters to its language modelling, as Michel et al. (2019)
//! measure it: a gate `ξ_h` on every head's output (1 kept, 0 pruned), and the expected absolute
//! gradient of the loss with respect to each, `I_h = E_x |∂L(x)/∂ξ_h|`, over a text set. The
//! loss of a passage is its mean next-token cross-entropy (what GPT-2 was trained on); one
//! forward and one backward pass per passage give every head's gradient at once.
//!
//! The backward pass runs through the output head (tied to the word embedding; the logits made
//! [`READ_OUT_ROWS`] rows at a time, as the forward pass makes them), the final LayerNorm, and
//! per block the feed-forward layer (GELU's tanh form), LayerNorm 2, the output projection, the
//! gates, and the causal attention (softmax included) and LayerNorm 1, down to the first layer's
//! gates (nothing below them has one).

use crate::attention::turns::{at_once, AtOnce, Turns};
use crate::attention::HeadSet;
use crate::cpu::softmax::softmax_rows;
use crate::cpu::{attend_in_turns, Kernel, Mask};
use crate::model::decoder::gpt2::{Gpt2, READ_OUT_ROWS};
use crate::model::layers::backward::{
    activation_grad, attention_backward_in_turns, gates, gates_backward, layer_norm_backward,
    layer_norm_traced, matmul_in_turns,
};
use crate::model::layers::{activate, linear_in_turns};

/// What one block's forward pass keeps for the backward pass.
struct BlockTape {
    qkv: Vec<f32>,
    probs: Vec<f32>,
    /// Head outputs before their gates, `n x d_model`.
    heads: Vec<f32>,
    /// LayerNorm 1's normalised input and inverse deviations.
    norm1: NormTrace,
    /// Feed-forward pre-activations.
    pre: Vec<f32>,
    norm2: NormTrace,
}

/// A LayerNorm's normalised input and each row's inverse deviation.
type NormTrace = (Vec<f32>, Vec<f64>);

/// The forward pass with `gates` on the heads, in `turns`' steps: the final LayerNorm's output
/// and trace, and each block's trace.
async fn forward(
    model: &Gpt2,
    kernel: Kernel,
    ids: &[u32],
    gates: &[f32],
    turns: &dyn Turns,
) -> (Vec<f32>, NormTrace, Vec<BlockTape>) {
    let spec = model.spec();
    let (n, d, h, d_k, eps) = (ids.len(), spec.d_model, spec.heads, spec.d_k(), spec.layer_norm_eps);
    let mut x = model.embed(ids);
    let mut traces = Vec::with_capacity(spec.layers);
    for (l, block) in model.blocks.iter().enumerate() {
        let mut a = x.clone();
        let norm1 = layer_norm_traced(&mut a, &block.ln1, eps);
        let mut qkv = vec![0.0f32; n * 3 * d];
        linear_in_turns(kernel, &a, n, &block.qkv, &mut qkv, 3 * d, turns).await;
        let (mut probs, mut heads) = (vec![0.0f32; h * n * n], vec![0.0f32; n * d]);
        attend_in_turns(kernel, &qkv, n, h, d_k, Mask::Causal, &mut probs, &mut heads, turns).await;
        let mut gated = heads.clone();
        for row in gated.chunks_exact_mut(d) {
            for (p, g) in gates[l * h..(l + 1) * h].iter().enumerate() {
                row[p * d_k..(p + 1) * d_k].iter_mut().for_each(|v| *v *= g);
            }
        }
        let mut tmp = vec![0.0f32; n * d];
        linear_in_turns(kernel, &gated, n, &block.out, &mut tmp, d, turns).await;
        x.iter_mut().zip(&tmp).for_each(|(x, t)| *x += t);
        let mut b = x.clone();
        let norm2 = layer_norm_traced(&mut b, &block.ln2, eps);
        let mut pre = vec![0.0f32; n * spec.ffn];
        linear_in_turns(kernel, &b, n, &block.ffn_in, &mut pre, spec.ffn, turns).await;
        let mut hidden = pre.clone();
        activate(kernel, spec.activation, &mut hidden);
        linear_in_turns(kernel, &hidden, n, &block.ffn_out, &mut tmp, d, turns).await;
        x.iter_mut().zip(&tmp).for_each(|(x, t)| *x += t);
        traces.push(BlockTape { qkv, probs, heads, norm1, pre, norm2 });
    }
    let norm_f = layer_norm_traced(&mut x, &model.ln_f, eps);
    (x, norm_f, traces)
}

/// The mean loss of `ids` (its tokens after the first, each from those before it) and the
/// gradient of that loss with respect to the output of the final LayerNorm, `n x d_model`.
async fn loss_and_gradient(
    model: &Gpt2,
    kernel: Kernel,
    out: &[f32],
    ids: &[u32],
    turns: &dyn Turns,
) -> (f64, Vec<f32>) {
    let (d, vocab, n) = (model.spec().d_model, model.spec().vocab, ids.len());
    let count = (n - 1) as f64;
    let (mut loss, mut d_out) = (0.0, vec![0.0f32; n * d]);
    for (c, rows) in out.chunks(READ_OUT_ROWS * d).enumerate() {
        let mut logits = model.logits_in_turns(kernel, rows, turns).await;
        for (r, row) in logits.chunks_exact_mut(vocab).enumerate() {
            let Some(&target) = ids.get(c * READ_OUT_ROWS + r + 1) else {
                row.fill(0.0);
                continue;
            };
            // d(-log p_target)/d logit_j = p_j - [j = target], over the passage's mean; the
            // loss and the probabilities on `kernel`'s exp (a vocabulary's f64 exps, twice, took
            // much of a short passage's backward pass).
            loss += crate::model::decoder::next_token::loss(kernel, row, target as usize);
            softmax_rows(kernel, row, vocab);
            row[target as usize] -= 1.0;
            let inv = (1.0 / count) as f32;
            row.iter_mut().for_each(|l| *l *= inv);
        }
        let rows_here = rows.len() / d;
        let d_rows = model.word.product_in_turns(kernel, &logits, rows_here, d, turns).await;
        d_out[c * READ_OUT_ROWS * d..c * READ_OUT_ROWS * d + rows_here * d].copy_from_slice(&d_rows);
    }
    (loss / count, d_out)
}

/// A passage's mean loss with `gates` on the heads (1 kept, 0 pruned, or anything between), and
/// the gradient of that loss with respect to every gate. `ids`: 2 tokens or more.
pub fn passage_gradients(model: &Gpt2, kernel: Kernel, ids: &[u32], gates: &[f32]) -> (f64, Vec<f64>) {
    at_once(passage_gradients_in_turns(model, kernel, ids, gates, &AtOnce))
}

/// [`passage_gradients`] in `turns`' steps (each product cut as the forward pass cuts it, a
/// head's attention backward per step): the same bits.
pub async fn passage_gradients_in_turns(
    model: &Gpt2,
    kernel: Kernel,
    ids: &[u32],
    gates: &[f32],
    turns: &dyn Turns,
) -> (f64, Vec<f64>) {
    let spec = model.spec();
    let (n, d, h, d_k) = (ids.len(), spec.d_model, spec.heads, spec.d_k());
    assert!(n >= 2, "a passage of 2 tokens or more: the first predicts the second");
    assert_eq!(gates.len(), spec.total_heads(), "one gate per head");
    let (out, norm_f, traces) = forward(model, kernel, ids, gates, turns).await;
    let (loss, mut dx) = loss_and_gradient(model, kernel, &out, ids, turns).await;
    layer_norm_backward(&mut dx, &model.ln_f, &norm_f);
    let mut grads = vec![0.0f64; spec.total_heads()];
    for (l, (block, t)) in model.blocks.iter().zip(&traces).enumerate().rev() {
        // x_out = x_mid + W2 GELU(W1 LN2(x_mid) + b1) + b2
        let mut d_hidden =
            matmul_in_turns(kernel, &dx, &block.ffn_out.weights(), n, d, spec.ffn, turns).await;
        d_hidden.iter_mut().zip(&t.pre).for_each(|(g, &p)| *g *= activation_grad(spec.activation, p));
        let mut d_b =
            matmul_in_turns(kernel, &d_hidden, &block.ffn_in.weights(), n, spec.ffn, d, turns).await;
        layer_norm_backward(&mut d_b, &block.ln2, &t.norm2);
        dx.iter_mut().zip(&d_b).for_each(|(a, b)| *a += b);
        // x_mid = x_in + W_o (gates * heads) + b_o
        let mut d_heads = matmul_in_turns(kernel, &dx, &block.out.weights(), n, d, d, turns).await;
        gates_backward(
            &mut d_heads,
            &t.heads,
            d,
            d_k,
            &gates[l * h..(l + 1) * h],
            &mut grads[l * h..(l + 1) * h],
        );
        if l == 0 {
            break; // no gate below the first layer's
        }
        // The causal heads, from the fused QKV of LN1(x_in).
        let layer_gates = &gates[l * h..(l + 1) * h];
        let d_qkv =
            attention_backward_in_turns(spec, &t.qkv, &t.probs, &d_heads, n, layer_gates, turns).await;
        let mut d_a = matmul_in_turns(kernel, &d_qkv, &block.qkv.weights(), n, 3 * d, d, turns).await;
        layer_norm_backward(&mut d_a, &block.ln1, &t.norm1);
        dx.iter_mut().zip(&d_a).for_each(|(a, b)| *a += b);
    }
    (loss, grads)
}

/// Every head's importance on `passages` (token ids, 2 or more each) with only `heads` kept: the
/// mean over passages of `|∂L/∂ξ_h|` (0 for pruned heads).
pub fn head_importance(model: &Gpt2, kernel: Kernel, passages: &[Vec<u32>], heads: &HeadSet) -> Vec<f64> {
    let g = gates(heads);
    let mut importance = vec![0.0; model.spec().total_heads()];
    for ids in passages {
        let (_, grads) = passage_gradients(model, kernel, ids, &g);
        importance.iter_mut().zip(&grads).for_each(|(i, d)| *i += d.abs() / passages.len() as f64);
    }
    importance.iter_mut().enumerate().filter(|(h, _)| heads.is_pruned(*h)).for_each(|(_, i)| *i = 0.0);
    importance
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::precision::Precision;
    use crate::attention::turns::InSteps;
    use crate::model::spec::{Activation, ModelSpec};

    #[test]
    fn gradients_of_a_model_held_at_8_bits_stay_near_those_through_f32_weights() {
        use crate::model::decoder::gpt2::tests::{held_at_8_bits, with_f16_embedding};
        let spec = ModelSpec {
            layers: 3,
            heads: 4,
            d_model: 64,
            ffn: 256,
            vocab: 50,
            positions: 40,
            activation: Activation::GeluTanh,
            layer_norm_eps: 1e-5,
            ..ModelSpec::MINILM_L6_V2
        };
        let m = with_f16_embedding(Gpt2::random(spec, 11));
        let calibration: Vec<Vec<u32>> =
            (0..4).map(|t| (0..30).map(|i| (i * 7 + t * 13) % 50).collect()).collect();
        let copy = m.at_precision(Kernel::Simd, Precision::Int8, &calibration);
        let held = held_at_8_bits(&m, &calibration).0;
        // Through its 8-bit weights, widened, against the f32 weights the copy keeps beside its
        // 8-bit ones: the same forward pass, so the same loss; the backward products differ by
        // the weights' rounding.
        let ids: Vec<u32> = (0..33).map(|i| (i * 11 + 3) % 50).collect();
        let mut gates = vec![1.0f32; spec.total_heads()];
        gates[5] = 0.0;
        let (a, b) = (
            passage_gradients(&held, Kernel::Simd, &ids, &gates),
            passage_gradients(&copy, Kernel::Simd, &ids, &gates),
        );
        assert_eq!(a.0, b.0, "the same loss");
        let (diff, size): (f64, f64) =
            a.1.iter().zip(&b.1).fold((0.0, 0.0), |(d, s), (x, y)| (d + (x - y).abs(), s + y.abs()));
        assert!(diff < 0.05 * size && diff > 0.0, "gradients {diff:.2e} apart of {size:.2e}");
        println!("8-bit-held gradients: {:.2e} of their size from the f32 weights'", diff / size);
    }

    #[test]
    fn gradients_in_steps_give_the_bits_of_gradients_at_once() {
        // Odd widths, a vocabulary wider than a strip and more rows than one read-out block.
        for (d_model, heads, ffn, vocab, n) in [(20, 4, 36, 77, 11), (27, 3, 41, 93, 40)] {
            let spec = ModelSpec {
                layers: 2,
                heads,
                d_model,
                ffn,
                vocab,
                positions: 48,
                activation: Activation::GeluTanh,
                layer_norm_eps: 1e-5,
                ..ModelSpec::MINILM_L6_V2
            };
            let m = Gpt2::random(spec, 11);
            let ids: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 5) % vocab as u32).collect();
            let mut g = vec![1.0f32; 2 * heads];
            g[heads + 1] = 0.0;
            for kernel in [Kernel::Simd, Kernel::Scalar] {
                let whole = passage_gradients(&m, kernel, &ids, &g);
                assert!(whole.0.is_finite() && whole.1.iter().any(|&v| v != 0.0));
                for step in [1, 900, 7000] {
                    let turns = InSteps::of(step);
                    let cut = at_once(passage_gradients_in_turns(&m, kernel, &ids, &g, &turns));
                    assert_eq!(cut, whole, "d_model {d_model}, {kernel:?}, steps of {step}");
                    // Forward: 4 products and the heads per block; backward: 4 products and
                    // the kept heads above the first block; the read-out.
                    let least = 2 * (4 + heads) + 4 + (heads - 1) + 2;
                    assert!(turns.taken() > least, "{} turns in steps of {step}", turns.taken());
                }
            }
        }
    }
}
