//! The forward pass of a layer whose weights are never stored (GPT-3: 2.25 GiB of them): each
//! weight is generated from the seed as the packed GEMM copies it into a panel, so every weight
//! is made once per pass and none is kept. The pass runs in steps (blocks of QKV columns, the
//! attention, one head's output projection at a time) so that the page can show progress and
//! stay responsive between them.

use super::gemm::{sgemm_generated, MatMut, MatRef};
use super::{attend, Forward, Kernel};
use crate::attention::{GeneratedWeights, HeadSet, ModelConfig};

/// Columns of `QKV` computed per step: about 0.1 s of GPT-3 at 16 tokens in wasm.
const QKV_COLUMNS_PER_STEP: usize = 3072;

/// A forward pass in progress; [`GeneratedPass::step`] until it returns `false`, then
/// [`GeneratedPass::finish`].
pub struct GeneratedPass<'x> {
    config: ModelConfig,
    x: &'x [f32],
    weights: GeneratedWeights,
    qkv: Vec<f32>,
    out: Forward,
    done: usize,
}

impl<'x> GeneratedPass<'x> {
    /// Starts the pass of `config` on `x` (`seq_len x d_model`). The configuration must be
    /// valid; this allocates only activations.
    pub fn new(config: &ModelConfig, x: &'x [f32], weights: GeneratedWeights) -> Self {
        assert_eq!(x.len(), config.seq_len * config.d_model, "x must be seq_len x d_model");
        assert_eq!(weights.d_model, config.d_model, "weights are for another d_model");
        GeneratedPass {
            config: *config,
            x,
            weights,
            qkv: vec![0.0; config.seq_len * 3 * config.d_model],
            out: Forward::filled(config, f32::NAN),
            done: 0,
        }
    }

    fn qkv_steps(&self) -> usize {
        (3 * self.config.d_model).div_ceil(QKV_COLUMNS_PER_STEP)
    }

    /// Steps in the whole pass.
    pub fn steps(&self) -> usize {
        self.qkv_steps() + 1 + self.config.num_heads
    }

    /// Fraction of the steps done, 0 to 1.
    pub fn progress(&self) -> f64 {
        self.done as f64 / self.steps() as f64
    }

    /// Does the next step; `false` once every step is done.
    pub fn step(&mut self) -> bool {
        let (n, d, h_count, d_k) =
            (self.config.seq_len, self.config.d_model, self.config.num_heads, self.config.d_k());
        let step = self.done;
        if step >= self.steps() {
            return false;
        }
        if step < self.qkv_steps() {
            // QKV[:, c0..c1] = x @ W_qkv[:, c0..c1]
            let c0 = step * QKV_COLUMNS_PER_STEP;
            let width = QKV_COLUMNS_PER_STEP.min(3 * d - c0);
            let b = self.weights.w_qkv().shifted(0, c0);
            let c = MatMut::new(&mut self.qkv[c0..], n, width, 3 * d, 1);
            sgemm_generated(Kernel::Simd, 1.0, MatRef::row_major(self.x, n, d), b, width, 0.0, c);
        } else if step == self.qkv_steps() {
            attend(Kernel::Simd, &self.qkv, n, h_count, d_k, &mut self.out.attention, &mut self.out.heads);
        } else {
            // C_h = O_h (n x d_k) @ W_o[h d_k .. (h+1) d_k, :]
            let h = step - self.qkv_steps() - 1;
            let b = self.weights.w_o().shifted(h * d_k, 0);
            let c = MatMut::row_major(&mut self.out.contributions.data[h * n * d..(h + 1) * n * d], n, d);
            let a = MatRef::new(&self.out.heads[h * d_k..], n, d_k, d, 1);
            sgemm_generated(Kernel::Simd, 1.0, a, b, d, 0.0, c);
        }
        self.done += 1;
        self.done < self.steps()
    }

    /// The finished pass (runs any steps left).
    pub fn finish(mut self) -> Forward {
        while self.step() {}
        let heads = HeadSet::all(self.config.num_heads);
        self.out.contributions.recompose_into(&heads, &mut self.out.output);
        self.out
    }
}
