//! The backward pieces of the shared layers, for head-gate gradients (Michel et al.'s importance,
//! `crate::model::encoder::gradient` and `crate::model::decoder::gradient`): a plain matrix
//! product, LayerNorm traced forward and taken backward, the activations' derivatives, the gates
//! on heads' outputs, and the attention backward from the heads' outputs to the packed QKV. In f64
//! where the matrices are small; each family's backward pass strings them together.

use crate::attention::turns::Turns;
use crate::attention::HeadSet;
use crate::cpu::gemm::MatRef;
use crate::cpu::Kernel;
use crate::model::layers::{columns_in_turns, Norm};
use crate::model::spec::{Activation, ModelSpec};

/// `y (n x cols) = a (n x inner) @ b (inner x cols)`, both row-major, in `turns`' steps
/// ([`columns_in_turns`]).
pub async fn matmul_in_turns(
    kernel: Kernel,
    a: &[f32],
    b: &[f32],
    n: usize,
    inner: usize,
    cols: usize,
    turns: &dyn Turns,
) -> Vec<f32> {
    let mut y = vec![0.0; n * cols];
    let (a, b) = (MatRef::row_major(a, n, inner), MatRef::row_major(b, inner, cols));
    columns_in_turns(kernel, a, b, &mut y, cols, turns).await;
    y
}

/// LayerNorm that also returns `x̂` and each row's `1 / sqrt(var + eps)`.
pub fn layer_norm_traced(x: &mut [f32], norm: &Norm, eps: f64) -> (Vec<f32>, Vec<f64>) {
    let d = norm.w.len();
    let mut hat = vec![0.0f32; x.len()];
    let mut inv = Vec::with_capacity(x.len() / d);
    for (row, hrow) in x.chunks_exact_mut(d).zip(hat.chunks_exact_mut(d)) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let i = 1.0 / (var + eps).sqrt();
        for (((v, h), w), b) in row.iter_mut().zip(hrow.iter_mut()).zip(&norm.w).zip(&norm.b) {
            *h = ((*v as f64 - mean) * i) as f32;
            *v = *h * w + b;
        }
        inv.push(i);
    }
    (hat, inv)
}

/// The gradient through LayerNorm: from `dy` (overwritten) to the gradient of its input.
pub fn layer_norm_backward(dy: &mut [f32], norm: &Norm, (hat, inv): &(Vec<f32>, Vec<f64>)) {
    let d = norm.w.len();
    for ((row, hrow), &i) in dy.chunks_exact_mut(d).zip(hat.chunks_exact(d)).zip(inv) {
        let g: Vec<f64> = row.iter().zip(&norm.w).map(|(&d, &w)| d as f64 * w as f64).collect();
        let mean_g = g.iter().sum::<f64>() / d as f64;
        let mean_gh = g.iter().zip(hrow).map(|(g, &h)| g * h as f64).sum::<f64>() / d as f64;
        for ((d, g), &h) in row.iter_mut().zip(&g).zip(hrow) {
            *d = (i * (g - mean_g - h as f64 * mean_gh)) as f32;
        }
    }
}

/// `d/dx` of the activation.
pub fn activation_grad(activation: Activation, x: f32) -> f32 {
    match activation {
        Activation::Gelu => {
            let x = x as f64;
            let cdf = 0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
            (cdf + x * pdf) as f32
        }
        Activation::GeluTanh => {
            // d/dx x (1 + tanh u) / 2 = (1 + tanh u) / 2 + x (1 - tanh^2 u) u' / 2.
            let (x, c) = (x as f64, (2.0 / std::f64::consts::PI).sqrt());
            let t = (c * (x + 0.044715 * x * x * x)).tanh();
            (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)) as f32
        }
    }
}

/// The gradient of every head's attention output `d_heads` (`n x d_model`) to that of the packed
/// QKV (`n x 3 d_model`), in f64 (the matrices are small), a head at a time and a turn after each
/// where `turns` cuts steps; heads whose `gates` are 0 have no gradient and are left at zero.
pub async fn attention_backward_in_turns(
    spec: &ModelSpec,
    qkv: &[f32],
    probs: &[f32],
    d_heads: &[f32],
    n: usize,
    gates: &[f32],
    turns: &dyn Turns,
) -> Vec<f32> {
    let d = spec.d_model;
    let mut d_qkv = vec![0.0f32; n * 3 * d];
    for h in (0..spec.heads).filter(|&h| gates[h] != 0.0) {
        head_backward(spec, qkv, &probs[h * n * n..(h + 1) * n * n], d_heads, n, h, &mut d_qkv);
        if turns.step_flops().is_some() {
            turns.turn().await;
        }
    }
    d_qkv
}

/// Head `h`'s share of [`attention_backward_in_turns`], its attention weights `p` (`n x n`), added to
/// `d_qkv`.
fn head_backward(
    spec: &ModelSpec,
    qkv: &[f32],
    p: &[f32],
    d_heads: &[f32],
    n: usize,
    h: usize,
    d_qkv: &mut [f32],
) {
    let (d, d_k) = (spec.d_model, spec.d_k());
    let scale = 1.0 / (d_k as f64).sqrt();
    let at = |m: &[f32], i: usize, col: usize, stride: usize| m[i * stride + col] as f64;
    let (q, k, v) = (h * d_k, d + h * d_k, 2 * d + h * d_k);
    for i in 0..n {
        // dP[i, j] = dO[i] . V[j]; dS = P * (dP - sum_j P dP)
        let dp: Vec<f64> = (0..n)
            .map(|j| (0..d_k).map(|c| at(d_heads, i, h * d_k + c, d) * at(qkv, j, v + c, 3 * d)).sum())
            .collect();
        let row_dot: f64 = (0..n).map(|j| p[i * n + j] as f64 * dp[j]).sum();
        for j in 0..n {
            let pij = p[i * n + j] as f64;
            let ds = pij * (dp[j] - row_dot) * scale;
            for c in 0..d_k {
                // dV[j] += P[i, j] dO[i]; dQ[i] += dS K[j]; dK[j] += dS Q[i]
                d_qkv[j * 3 * d + v + c] += (pij * at(d_heads, i, h * d_k + c, d)) as f32;
                d_qkv[i * 3 * d + q + c] += (ds * at(qkv, j, k + c, 3 * d)) as f32;
                d_qkv[j * 3 * d + k + c] += (ds * at(qkv, i, q + c, 3 * d)) as f32;
            }
        }
    }
}

/// The gates of a set of heads: 1 for kept heads, 0 for pruned ones.
pub fn gates(heads: &HeadSet) -> Vec<f32> {
    (0..heads.len()).map(|h| if heads.is_active(h) { 1.0 } else { 0.0 }).collect()
}

/// The gradient through the gates on one layer's heads (`gated = ξ_h * heads`, head `h` in
/// columns `h d_k..(h + 1) d_k` of each row): `d` (`n x d_model`, the gradient of the gated
/// outputs) becomes that of the heads' outputs `heads`, and each head's `∂L/∂ξ_h`, the sum of
/// `d ⊙ heads` over its columns, is added to `grads` (one per head of the layer, as `gates`).
pub fn gates_backward(
    d: &mut [f32],
    heads: &[f32],
    d_model: usize,
    d_k: usize,
    gates: &[f32],
    grads: &mut [f64],
) {
    for (grow, hrow) in d.chunks_exact_mut(d_model).zip(heads.chunks_exact(d_model)) {
        for (h, (&gate, grad)) in gates.iter().zip(grads.iter_mut()).enumerate() {
            let cols = h * d_k..(h + 1) * d_k;
            let g = &mut grow[cols.clone()];
            *grad += g.iter().zip(&hrow[cols]).map(|(g, v)| *g as f64 * *v as f64).sum::<f64>();
            g.iter_mut().for_each(|v| *v *= gate);
        }
    }
}
