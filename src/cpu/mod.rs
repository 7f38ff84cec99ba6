//! The CPU backend: multi-head attention in f32, on a vector kernel (wasm simd128 in the browser)
//! or its scalar twin.
//!
//! One forward pass, for `x` (`n x d`), heads `h = 0..H` of width `d_k = d / H`:
//!
//! ```text
//! QKV   = x @ W_qkv                                  (n x 3d; columns [Q | K | V], heads of d_k)
//! P_h   = softmax(Q_h @ K_h^T / sqrt(d_k))           (n x n, row-wise, max-subtracted)
//! O_h   = P_h @ V_h                                  (n x d_k, written into concat's columns of h)
//! C_h   = O_h @ W_o[h*d_k .. (h+1)*d_k, :]           (n x d, head h's share of the output)
//! out   = sum_h C_h  =  concat @ W_o
//! ```
//!
//! `Q_h`, `K_h^T` and `V_h` are strided views of `QKV`: nothing is reshaped or copied. Keeping
//! every `C_h` is what makes pruning cheap (see [`crate::attention::prune`]).

pub mod gelu;
pub mod gemm;
pub mod head_loop;
pub mod head_shards;
pub mod int8;
pub mod mat;
pub mod packed;
pub mod softmax;
pub mod stepped;

use crate::attention::turns::{at_once, AtOnce, Turns};
pub use crate::attention::Mask;
use crate::attention::{Contributions, HeadSet, LayerWeights, ModelConfig, Weights};
use gemm::{sgemm, MatMut, MatRef};

/// Which instruction set the CPU path runs on. Both compute the same function; [`Kernel::Scalar`]
/// always compiles and is always tested, and is the fallback if the vector path is ever in doubt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Vector kernels: wasm simd128 in the browser, the host's SIMD natively.
    Simd,
    /// Plain scalar loops.
    Scalar,
}

impl Kernel {
    /// Both kernels, fastest first.
    pub const ALL: [Kernel; 2] = [Kernel::Simd, Kernel::Scalar];

    /// What this kernel runs on, for the page's backend badge.
    pub fn describe(self) -> &'static str {
        match self {
            Kernel::Simd if cfg!(all(target_arch = "wasm32", feature = "relaxed-simd")) => {
                "wasm simd128 + relaxed SIMD"
            }
            Kernel::Simd if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) => "wasm simd128",
            Kernel::Simd if cfg!(target_arch = "wasm32") => "wasm (built without simd128)",
            Kernel::Simd => "native SIMD",
            Kernel::Scalar => "scalar",
        }
    }
}

/// Everything one forward pass produces.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// The shape this was computed for.
    pub config: ModelConfig,
    /// `H x n x n`: every head's attention weights, rows are queries.
    pub attention: Vec<f32>,
    /// `n x d`: the concatenated head outputs `[O_0 | ... | O_{H-1}]`.
    pub heads: Vec<f32>,
    /// Each head's contribution `C_h` to the output.
    pub contributions: Contributions,
    /// `n x d`: the output with every head active.
    pub output: Vec<f32>,
}

impl Forward {
    /// Buffers of the right sizes for `config`, every element set to `fill` (tests poison them
    /// with NaN to prove the kernel writes every element).
    pub fn filled(config: &ModelConfig, fill: f32) -> Self {
        let (n, d, h) = (config.seq_len, config.d_model, config.num_heads);
        Forward {
            config: *config,
            attention: vec![fill; h * n * n],
            heads: vec![fill; n * d],
            contributions: Contributions {
                num_heads: h,
                seq_len: n,
                d_model: d,
                data: vec![fill; h * n * d],
            },
            output: vec![fill; n * d],
        }
    }

    /// Head `h`'s attention matrix, `n x n`.
    pub fn attention_of(&self, h: usize) -> &[f32] {
        let nn = self.config.seq_len * self.config.seq_len;
        &self.attention[h * nn..(h + 1) * nn]
    }
}

/// One forward pass of `config` on `x` with `weights`. The configuration must be valid
/// ([`ModelConfig::validate`]); buffer sizes are asserted.
pub fn forward(kernel: Kernel, config: &ModelConfig, x: &[f32], weights: &Weights) -> Forward {
    let mut out = Forward::filled(config, 0.0);
    forward_into(kernel, config, x, weights, &mut out);
    out
}

/// One forward pass with weights stored or generated where used ([`LayerWeights`]): the stored
/// ones on `kernel`, generated ones in [`stepped::SteppedPass`] (the vector kernel, at once).
pub fn forward_layer(kernel: Kernel, config: &ModelConfig, x: &[f32], weights: &LayerWeights) -> Forward {
    match weights {
        LayerWeights::Stored(stored) => forward(kernel, config, x, stored),
        LayerWeights::Generated(_) => stepped::SteppedPass::new(config, x, weights).finish(),
    }
}

/// [`forward`] into preallocated buffers; every element of `out` is written.
pub fn forward_into(kernel: Kernel, config: &ModelConfig, x: &[f32], weights: &Weights, out: &mut Forward) {
    let (n, d, h_count, d_k) = (config.seq_len, config.d_model, config.num_heads, config.d_k());
    assert_eq!(x.len(), n * d, "x must be seq_len x d_model");
    assert_eq!(weights.d_model, d, "weights are for another d_model");
    assert_eq!(out.config, *config, "output buffers are for another configuration");

    // QKV is scratch, kept between passes (the product never reads it: beta is 0).
    QKV.with(|qkv| {
        let mut qkv = qkv.borrow_mut();
        if qkv.len() < n * 3 * d {
            qkv.resize(n * 3 * d, 0.0);
        }
        let qkv = &mut qkv[..n * 3 * d];
        project_qkv(kernel, config, x, &weights.w_qkv, qkv);
        attend(kernel, qkv, n, h_count, d_k, &mut out.attention, &mut out.heads);
    });

    // Each head's contribution is added to the output while it is still in cache: the same sums
    // in the same order as `Contributions::recompose_into` with every head on (0 + C_0 + C_1 ...).
    out.output.fill(0.0);
    for h in 0..h_count {
        let block = &mut out.contributions.data[h * n * d..(h + 1) * n * d];
        project_head(kernel, config, &out.heads, &weights.w_o, h, block);
        out.output.iter_mut().zip(block.iter()).for_each(|(o, c)| *o += c);
    }
}

/// `QKV = x @ W_qkv`: `x` is `seq_len x d_model`, `qkv` is `seq_len x 3 d_model` (overwritten).
pub fn project_qkv(kernel: Kernel, config: &ModelConfig, x: &[f32], w_qkv: &[f32], qkv: &mut [f32]) {
    let (n, d) = (config.seq_len, config.d_model);
    sgemm(
        kernel,
        1.0,
        MatRef::row_major(x, n, d),
        MatRef::row_major(w_qkv, d, 3 * d),
        0.0,
        MatMut::row_major(qkv, n, 3 * d),
    );
}

/// Head `h`'s contribution to the output, `C_h = O_h @ W_o[h d_k .. (h+1) d_k, :]`, into
/// `block` (`seq_len x d_model`, overwritten); `O_h` is head `h`'s columns of `heads`.
pub fn project_head(
    kernel: Kernel,
    config: &ModelConfig,
    heads: &[f32],
    w_o: &[f32],
    h: usize,
    block: &mut [f32],
) {
    let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
    sgemm(
        kernel,
        1.0,
        MatRef::new(&heads[h * d_k..], n, d_k, d, 1),
        MatRef::new(&w_o[h * d_k * d..], d_k, d, d, 1),
        0.0,
        MatMut::row_major(block, n, d),
    );
}

thread_local! {
    static QKV: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Every head's attention, from the packed `qkv` (`n x 3d`, columns `[Q | K | V]`, heads of
/// `d_k`): writes the softmax weights into `attention` (`H x n x n`) and each head's output
/// `P_h @ V_h` into its columns of `heads` (`n x d`). Shared by the synthetic layer and the
/// trained model.
pub fn attend(
    kernel: Kernel,
    qkv: &[f32],
    n: usize,
    h_count: usize,
    d_k: usize,
    attention: &mut [f32],
    heads: &mut [f32],
) {
    attend_masked(kernel, qkv, n, h_count, d_k, Mask::None, attention, heads);
}

/// [`attend`] under `mask`: with [`Mask::Causal`], row `i` of each head's weights is the softmax
/// of its first `i + 1` scores and zeros after them, so `P_h @ V_h` reads no later token.
#[allow(clippy::too_many_arguments)] // the kernel's signature: buffers and their sizes
pub fn attend_masked(
    kernel: Kernel,
    qkv: &[f32],
    n: usize,
    h_count: usize,
    d_k: usize,
    mask: Mask,
    attention: &mut [f32],
    heads: &mut [f32],
) {
    assert_eq!(attention.len(), h_count * n * n, "attention must be H x n x n");
    at_once(attend_in_turns(kernel, qkv, n, h_count, d_k, mask, attention, heads, &AtOnce));
}

/// [`attend_masked`]'s head outputs alone, for a pass that keeps no attention weights: every
/// head's weights go through the one `n x n` buffer `probs` (1 MB at 512 tokens, where all
/// heads' take `H` times that), which stays in the core's cache between the product that writes
/// it, the softmax and the product that reads it. The same sums in the same order as
/// [`attend_masked`]'s, so the same bits.
#[allow(clippy::too_many_arguments)] // the kernel's signature: buffers and their sizes
pub fn attend_outputs(
    kernel: Kernel,
    qkv: &[f32],
    n: usize,
    h_count: usize,
    d_k: usize,
    mask: Mask,
    probs: &mut [f32],
    heads: &mut [f32],
) {
    assert_eq!(probs.len(), n * n, "probs must be n x n");
    at_once(attend_in_turns(kernel, qkv, n, h_count, d_k, mask, probs, heads, &AtOnce));
}

/// [`attend_masked`] (where `weights` holds every head's, `H x n x n`) or [`attend_outputs`]
/// (where it is one head's `n x n`, the buffer every head's weights go through), a turn after
/// each head: the same heads in the same order, so the same bits.
#[allow(clippy::too_many_arguments)] // the kernel's signature and the turns
pub async fn attend_in_turns(
    kernel: Kernel,
    qkv: &[f32],
    n: usize,
    h_count: usize,
    d_k: usize,
    mask: Mask,
    weights: &mut [f32],
    heads: &mut [f32],
    turns: &dyn Turns,
) {
    check_shapes(qkv, n, h_count, d_k, heads);
    let every = weights.len() == h_count * n * n;
    assert!(every || weights.len() == n * n, "weights must be H x n x n or n x n");
    for h in 0..h_count {
        let probs = if every { &mut weights[h * n * n..(h + 1) * n * n] } else { &mut weights[..] };
        attend_head(kernel, qkv, n, h_count, d_k, mask, h, probs, heads);
        if turns.step_flops().is_some() {
            turns.turn().await;
        }
    }
}

/// The attention's input `qkv` (`n x 3d`) and output `heads` (`n x d`) for `h_count` heads of `d_k`.
fn check_shapes(qkv: &[f32], n: usize, h_count: usize, d_k: usize, heads: &[f32]) {
    let d = h_count * d_k;
    assert_eq!(qkv.len(), n * 3 * d, "qkv must be n x 3d");
    assert_eq!(heads.len(), n * d, "heads must be n x d");
}

/// Head `h`'s attention: its weights into `probs` (`n x n`), its output `P_h @ V_h` into its
/// columns of `heads` (shapes checked by the callers).
#[allow(clippy::too_many_arguments)] // the kernel's signature: buffers and their sizes
fn attend_head(
    kernel: Kernel,
    qkv: &[f32],
    n: usize,
    h_count: usize,
    d_k: usize,
    mask: Mask,
    h: usize,
    probs: &mut [f32],
    heads: &mut [f32],
) {
    let d = h_count * d_k;
    let scale = 1.0 / (d_k as f32).sqrt();
    let stride = 3 * d;
    let (q, k, v) = (h * d_k, d + h * d_k, 2 * d + h * d_k);
    // scores = Q_h @ K_h^T / sqrt(d_k); K_h^T is K_h's view with the strides swapped.
    sgemm(
        kernel,
        scale,
        MatRef::new(&qkv[q..], n, d_k, stride, 1),
        MatRef::new(&qkv[k..], n, d_k, stride, 1).t(),
        0.0,
        MatMut::row_major(probs, n, n),
    );
    match mask {
        Mask::None => softmax::softmax_rows(kernel, probs, n),
        Mask::Causal => {
            for (i, row) in probs.chunks_exact_mut(n).enumerate() {
                let (seen, later) = row.split_at_mut(i + 1);
                softmax::softmax_rows(kernel, seen, i + 1);
                later.fill(0.0);
            }
        }
    }
    // O_h = P_h @ V_h, straight into head h's columns of the concatenation.
    sgemm(
        kernel,
        1.0,
        MatRef::row_major(probs, n, n),
        MatRef::new(&qkv[v..], n, d_k, stride, 1),
        0.0,
        MatMut::new(&mut heads[h * d_k..], n, d_k, d, 1),
    );
}

/// The output recomputed from scratch as `concat_masked @ W_o`, with pruned heads' columns
/// zeroed: one full output projection. The reference the cheap recomposition is tested against.
pub fn project_masked(
    kernel: Kernel,
    config: &ModelConfig,
    heads: &[f32],
    w_o: &[f32],
    heads_on: &HeadSet,
) -> Vec<f32> {
    let (n, d, d_k) = (config.seq_len, config.d_model, config.d_k());
    let mut concat = heads.to_vec();
    for row in concat.chunks_exact_mut(d) {
        for (h, block) in row.chunks_exact_mut(d_k).enumerate() {
            if heads_on.is_pruned(h) {
                block.fill(0.0);
            }
        }
    }
    let mut out = vec![0.0; n * d];
    sgemm(
        kernel,
        1.0,
        MatRef::row_major(&concat, n, d),
        MatRef::row_major(w_o, d, d),
        0.0,
        MatMut::row_major(&mut out, n, d),
    );
    out
}
