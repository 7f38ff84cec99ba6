//! The layers both model families are built from, as candle-nn keeps its own apart from the
//! models in candle-transformers: a dense layer ([`Linear`], [`linear`], with its 8-bit copy),
//! LayerNorm ([`Norm`], [`layer_norm`]), the feed-forward activations ([`activate`]), seeded random
//! weights for tests and benchmarks ([`seeded`]), and their backward pieces ([`backward`]). The
//! attention itself is the CPU kernel's (`crate::cpu::attend` and its masked forms); a family
//! (`super::encoder`, `super::decoder`) arranges these into its blocks and names its tensors.

pub mod backward;

use std::sync::Arc;

use crate::attention::synthetic::hash32;
use crate::cpu::gelu::{gelu_in_place, gelu_tanh_in_place};
use crate::cpu::gemm::{sgemm, MatMut, MatRef};
use crate::cpu::int8::{qgemm, IntBits, QuantizedWeights};
use crate::cpu::Kernel;
use crate::model::spec::Activation;

/// A dense layer `y = x W^T + b`, `W` stored `[out, in]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `out x in`, row-major.
    pub w: Vec<f32>,
    /// `out`.
    pub b: Vec<f32>,
    /// `W` quantized to 8 bits, when the model runs at [`Precision::Int8`]: products use it.
    pub int8: Option<Arc<QuantizedWeights>>,
}

impl Linear {
    /// A layer in f32 (no 8-bit copy).
    pub fn new(w: Vec<f32>, b: Vec<f32>) -> Linear {
        Linear { w, b, int8: None }
    }

    /// Output features.
    pub fn out(&self) -> usize {
        self.b.len()
    }

    /// Input features.
    pub fn inp(&self) -> usize {
        self.w.len() / self.b.len().max(1)
    }

    /// The quantized copy of this layer (integers of `bits`), its activations' outliers moved
    /// into the weights by their largest magnitudes `input_max` per input feature
    /// ([`QuantizedWeights::smoothed`]).
    pub fn quantize(&mut self, input_max: &[f32], bits: IntBits) {
        let q = QuantizedWeights::smoothed(&self.w, self.out(), self.inp(), input_max, bits);
        self.int8 = Some(Arc::new(q));
    }

    /// Output features `rows` (in that order) and their biases; the 8-bit copy keeps its bytes
    /// and scales.
    pub fn select_outputs(&self, rows: &[usize]) -> Linear {
        let inp = self.inp();
        Linear {
            w: rows.iter().flat_map(|&o| self.w[o * inp..(o + 1) * inp].iter().copied()).collect(),
            b: rows.iter().map(|&o| self.b[o]).collect(),
            int8: self.int8.as_ref().map(|q| Arc::new(q.select_channels(rows))),
        }
    }

    /// Input features in `ranges` (in order) with `bias`; the 8-bit copy keeps each channel's
    /// scale.
    pub fn select_inputs(&self, ranges: &[std::ops::Range<usize>], bias: Vec<f32>) -> Linear {
        let w = self
            .w
            .chunks_exact(self.inp())
            .flat_map(|row| ranges.iter().flat_map(move |r| row[r.clone()].iter().copied()));
        Linear {
            w: w.collect(),
            b: bias,
            int8: self.int8.as_ref().map(|q| Arc::new(q.select_inputs(ranges))),
        }
    }
}

/// LayerNorm's scale and shift.
#[derive(Clone, Debug, PartialEq)]
pub struct Norm {
    /// Scale.
    pub w: Vec<f32>,
    /// Shift.
    pub b: Vec<f32>,
}

/// The feed-forward activation `activation`, in place.
pub fn activate(kernel: Kernel, activation: Activation, x: &mut [f32]) {
    match activation {
        Activation::Gelu => gelu_in_place(kernel, x),
        Activation::GeluTanh => gelu_tanh_in_place(kernel, x),
    }
}

/// `y <- x W^T + b` for `x` (`n x in`); row `i` of the result goes to `y[i * rs..][..out]`.
pub fn linear(kernel: Kernel, x: &[f32], n: usize, lin: &Linear, y: &mut [f32], rs: usize) {
    if let Some(q) = &lin.int8 {
        return qgemm(kernel, x, n, q, &lin.b, y, rs);
    }
    let (out, inp) = (lin.b.len(), lin.w.len() / lin.b.len());
    sgemm(
        kernel,
        1.0,
        MatRef::row_major(x, n, inp),
        MatRef::row_major(&lin.w, out, inp).t(),
        0.0,
        MatMut::new(y, n, out, rs, 1),
    );
    for i in 0..n {
        y[i * rs..i * rs + out].iter_mut().zip(&lin.b).for_each(|(v, b)| *v += b);
    }
}

/// Seeded random weights: each call gives `len` values uniform in `(-scale, scale)` from a new
/// stream (`start` and `salt` pick the sequence of streams).
pub fn seeded(start: u32, salt: u32) -> impl Fn(usize, f32) -> Vec<f32> {
    let stream = std::cell::Cell::new(start);
    move |len: usize, scale: f32| {
        stream.set(hash32(stream.get() ^ salt));
        let key = stream.get();
        (0..len as u32).map(|i| scale * ((hash32(hash32(i ^ key)) >> 8) as f32 / 8_388_608.0 - 1.0)).collect()
    }
}

/// LayerNorm over each row (of the norm's width), statistics in f64.
pub fn layer_norm(x: &mut [f32], norm: &Norm, eps: f64) {
    let d = norm.w.len();
    for row in x.chunks_exact_mut(d) {
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.w).zip(&norm.b) {
            *v = ((*v as f64 - mean) * inv) as f32 * w + b;
        }
    }
}
