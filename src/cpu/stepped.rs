//! The synthetic layer's forward pass in steps of bounded work, so that the page's thread can
//! give the browser a turn between them at any shape the page accepts: a block of QKV columns,
//! a block of one head's query rows (its scores, softmax and weighted sum of values), a block of
//! one head's output-projection columns. No step does more than about [`STEP_FLOPS`] of
//! arithmetic (one row or one column is the least a step does), whatever `d_model`, the head
//! count or the sequence length.
//!
//! Weights are stored or generated where used ([`LayerWeights`]: GPT-3's 2.25 GiB are never
//! kept; each weight is made from the seed as the packed GEMM copies it into a panel). Every
//! output element is the same sum in the same order as [`super::forward`]'s, so a stepped pass
//! gives the same bits as the pass in one call (tested on the shape table).

use super::gemm::{sgemm, sgemm_generated, MatMut, MatRef};
use super::softmax::softmax_rows;
use super::{Forward, Kernel};
use crate::attention::prune::Contributions;
use crate::attention::{LayerWeights, ModelConfig};

/// The most arithmetic one step does (multiply and add counted separately): about 3 ms of the
/// vector kernel in wasm, under 10 ms with generated weights, so a slice of the page's thread
/// can stop close to its deadline.
pub const STEP_FLOPS: usize = 64 << 20;

/// One step of the pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// `QKV[:, c0..c0 + width] = x @ W_qkv[:, c0..c0 + width]`.
    Qkv { c0: usize, width: usize },
    /// Head `h`'s attention for query rows `r0..r0 + rows`.
    Attend { h: usize, r0: usize, rows: usize },
    /// Head `h`'s contribution to output columns `c0..c0 + width`, added to the output.
    Project { h: usize, c0: usize, width: usize },
}

/// `total` split into blocks of at most `per` (at least one each), as `(start, len)`.
fn blocks(total: usize, per: usize) -> impl Iterator<Item = (usize, usize)> {
    let per = per.clamp(1, total.max(1));
    (0..total).step_by(per).map(move |s| (s, per.min(total - s)))
}

/// Every step of `config`'s pass, in order: the projection, then each head's attention, then
/// each head's share of the output in head order (the order [`super::forward`] adds them in).
fn plan(config: &ModelConfig, step_flops: usize) -> Vec<Step> {
    let (n, d, h_count, d_k) = (config.seq_len, config.d_model, config.num_heads, config.d_k());
    let qkv = blocks(3 * d, step_flops / (2 * n * d).max(1)).map(|(c0, width)| Step::Qkv { c0, width });
    // A query row: n scores and n weighted values of d_k, and its softmax.
    let rows_per_step = step_flops / (4 * n * d_k + 4 * n).max(1);
    let attend = (0..h_count)
        .flat_map(move |h| blocks(n, rows_per_step).map(move |(r0, rows)| Step::Attend { h, r0, rows }));
    let cols_per_step = step_flops / (2 * n * d_k).max(1);
    let project = (0..h_count)
        .flat_map(move |h| blocks(d, cols_per_step).map(move |(c0, width)| Step::Project { h, c0, width }));
    qkv.chain(attend).chain(project).collect()
}

/// A forward pass in progress: [`SteppedPass::step`] until it returns `false`, then
/// [`SteppedPass::finish`].
pub struct SteppedPass<'a> {
    config: ModelConfig,
    x: &'a [f32],
    weights: &'a LayerWeights,
    plan: Vec<Step>,
    qkv: Vec<f32>,
    out: Forward,
    done: usize,
}

impl<'a> SteppedPass<'a> {
    /// Starts the pass of `config` on `x` (`seq_len x d_model`). The configuration must be
    /// valid; this allocates only activations.
    pub fn new(config: &ModelConfig, x: &'a [f32], weights: &'a LayerWeights) -> Self {
        Self::in_steps_of(config, x, weights, STEP_FLOPS)
    }

    /// [`SteppedPass::new`] with steps of at most `step_flops` (tests cut small shapes finely).
    pub fn in_steps_of(
        config: &ModelConfig,
        x: &'a [f32],
        weights: &'a LayerWeights,
        step_flops: usize,
    ) -> Self {
        assert_eq!(x.len(), config.seq_len * config.d_model, "x must be seq_len x d_model");
        let d_model = match weights {
            LayerWeights::Stored(w) => w.d_model,
            LayerWeights::Generated(g) => g.d_model,
        };
        assert_eq!(d_model, config.d_model, "weights are for another d_model");
        // The attention weights and the contributions (up to a GiB between them) grow step by
        // step, as they are written: filling them at once would hold the page for a second.
        let (n, d, h) = (config.seq_len, config.d_model, config.num_heads);
        let out = Forward {
            config: *config,
            attention: Vec::with_capacity(h * n * n),
            heads: vec![f32::NAN; n * d],
            contributions: Contributions {
                num_heads: h,
                seq_len: n,
                d_model: d,
                data: Vec::with_capacity(h * n * d),
            },
            output: vec![0.0; n * d],
        };
        SteppedPass {
            config: *config,
            x,
            weights,
            plan: plan(config, step_flops),
            qkv: vec![0.0; config.seq_len * 3 * config.d_model],
            out,
            done: 0,
        }
    }

    /// Steps in the whole pass.
    pub fn steps(&self) -> usize {
        self.plan.len()
    }

    /// Fraction of the steps done, 0 to 1.
    pub fn progress(&self) -> f64 {
        self.done as f64 / self.steps() as f64
    }

    /// Does the next step; `false` once every step is done.
    pub fn step(&mut self) -> bool {
        let Some(&step) = self.plan.get(self.done) else { return false };
        match step {
            Step::Qkv { c0, width } => self.project_qkv(c0, width),
            Step::Attend { h, r0, rows } => self.attend(h, r0, rows),
            Step::Project { h, c0, width } => self.project_head(h, c0, width),
        }
        self.done += 1;
        self.done < self.steps()
    }

    /// The finished pass (runs any steps left).
    pub fn finish(mut self) -> Forward {
        while self.step() {}
        self.out
    }

    fn project_qkv(&mut self, c0: usize, width: usize) {
        let (n, d) = (self.config.seq_len, self.config.d_model);
        let a = MatRef::row_major(self.x, n, d);
        let c = MatMut::new(&mut self.qkv[c0..], n, width, 3 * d, 1);
        match self.weights {
            LayerWeights::Stored(w) => {
                sgemm(Kernel::Simd, 1.0, a, MatRef::new(&w.w_qkv[c0..], d, width, 3 * d, 1), 0.0, c)
            }
            LayerWeights::Generated(g) => {
                sgemm_generated(Kernel::Simd, 1.0, a, g.w_qkv().shifted(0, c0), width, 0.0, c)
            }
        }
    }

    fn attend(&mut self, h: usize, r0: usize, rows: usize) {
        let (n, d, d_k) = (self.config.seq_len, self.config.d_model, self.config.d_k());
        let scale = 1.0 / (d_k as f32).sqrt();
        let stride = 3 * d;
        let (q, k, v) = (r0 * stride + h * d_k, d + h * d_k, 2 * d + h * d_k);
        // The steps write the weights in their order in memory: each grows the buffer.
        self.out.attention.resize((h * n + r0 + rows) * n, f32::NAN);
        let probs = &mut self.out.attention[(h * n + r0) * n..(h * n + r0 + rows) * n];
        // scores = Q_h[r0..] @ K_h^T / sqrt(d_k); K_h^T is K_h's view with the strides swapped.
        sgemm(
            Kernel::Simd,
            scale,
            MatRef::new(&self.qkv[q..], rows, d_k, stride, 1),
            MatRef::new(&self.qkv[k..], n, d_k, stride, 1).t(),
            0.0,
            MatMut::row_major(probs, rows, n),
        );
        softmax_rows(Kernel::Simd, probs, n);
        // O_h[r0..] = P_h[r0..] @ V_h, straight into head h's columns of the concatenation.
        sgemm(
            Kernel::Simd,
            1.0,
            MatRef::row_major(probs, rows, n),
            MatRef::new(&self.qkv[v..], n, d_k, stride, 1),
            0.0,
            MatMut::new(&mut self.out.heads[r0 * d + h * d_k..], rows, d_k, d, 1),
        );
    }

    fn project_head(&mut self, h: usize, c0: usize, width: usize) {
        let (n, d, d_k) = (self.config.seq_len, self.config.d_model, self.config.d_k());
        // A head's first block of columns makes room for its whole contribution.
        self.out.contributions.data.resize((h + 1) * n * d, f32::NAN);
        let block = &mut self.out.contributions.data[h * n * d..(h + 1) * n * d];
        let a = MatRef::new(&self.out.heads[h * d_k..], n, d_k, d, 1);
        let c = MatMut::new(&mut block[c0..], n, width, d, 1);
        match self.weights {
            LayerWeights::Stored(w) => {
                sgemm(Kernel::Simd, 1.0, a, MatRef::new(&w.w_o[h * d_k * d + c0..], d_k, width, d, 1), 0.0, c)
            }
            LayerWeights::Generated(g) => {
                sgemm_generated(Kernel::Simd, 1.0, a, g.w_o().shifted(h * d_k, c0), width, 0.0, c)
            }
        }
        // The output is the heads' sum in head order (0 + C_0 + C_1 ...), as `forward` adds it.
        for (out, contribution) in self.out.output.chunks_exact_mut(d).zip(block.chunks_exact(d)) {
            out[c0..c0 + width].iter_mut().zip(&contribution[c0..c0 + width]).for_each(|(o, c)| *o += c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_step_exceeds_the_budget_unless_it_is_one_row_or_column() {
        for (d, h, n) in [(768, 12, 1024), (16384, 1, 1024), (4096, 256, 128), (1, 1, 1), (12288, 96, 16)] {
            let config = ModelConfig { d_model: d, num_heads: h, seq_len: n };
            let d_k = config.d_k();
            let plan = plan(&config, STEP_FLOPS);
            for step in &plan {
                let (flops, least) = match *step {
                    Step::Qkv { width, .. } => (2 * n * d * width, width == 1),
                    Step::Attend { rows, .. } => (rows * (4 * n * d_k + 4 * n), rows == 1),
                    Step::Project { width, .. } => (2 * n * d_k * width, width == 1),
                };
                assert!(flops <= STEP_FLOPS || least, "{config:?}: {step:?} is {flops} flops");
            }
            let qkv_cols: usize =
                plan.iter().map(|s| if let Step::Qkv { width, .. } = s { *width } else { 0 }).sum();
            let rows: usize =
                plan.iter().map(|s| if let Step::Attend { rows, .. } = s { *rows } else { 0 }).sum();
            let cols: usize =
                plan.iter().map(|s| if let Step::Project { width, .. } = s { *width } else { 0 }).sum();
            assert_eq!(
                (qkv_cols, rows, cols),
                (3 * d, h * n, h * d),
                "{config:?}: every column and row once"
            );
        }
    }
}
