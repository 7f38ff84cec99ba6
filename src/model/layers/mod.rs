//! The layers both model families are built from, as candle-nn keeps its own apart from the
//! models in candle-transformers: a dense layer ([`Linear`], [`linear`], with its 8-bit copy),
//! LayerNorm ([`Norm`], [`layer_norm`]), a table of rows in f32 or f16 ([`Rows`]), the feed-forward activations ([`activate`]), seeded random
//! weights for tests and benchmarks ([`seeded`]), and their backward pieces ([`backward`]); for
//! the Llama-style family, RMSNorm ([`rms_norm`]), SwiGLU's gate ([`swiglu`]) and rotary
//! positions ([`rotary`]). The
//! attention itself is the CPU kernel's (`crate::cpu::attend` and its masked forms); a family
//! (`super::encoder`, `super::decoder`) arranges these into its blocks and names its tensors.

pub mod backward;
pub mod rotary;
pub mod rows;
pub mod split;

pub use rows::Rows;

use std::sync::Arc;

use crate::attention::synthetic::hash32;
use crate::attention::turns::Turns;
use crate::cpu::gelu::{gelu_in_place, gelu_tanh_in_place};
use crate::cpu::gemm::{sgemm, MatMut, MatRef};
use crate::cpu::int8::{qgemm, IntBits, QuantizedWeights};
use crate::cpu::Kernel;
use crate::model::spec::Activation;

/// A dense layer `y = x W^T + b`, `W` stored `[out, in]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `out x in`, row-major; shared between a model and its copy at another precision, which
    /// differ only in `int8`. Empty in a layer held at 8 bits only ([`Linear::drop_f32`]).
    pub w: Arc<[f32]>,
    /// `out`.
    pub b: Vec<f32>,
    /// `W` quantized to 8 bits, when the model runs at [`Precision::Int8`]: products use it.
    pub int8: Option<Arc<QuantizedWeights>>,
}

impl Linear {
    /// A layer in f32 (no 8-bit copy).
    pub fn new(w: Vec<f32>, b: Vec<f32>) -> Linear {
        Linear { w: w.into(), b, int8: None }
    }

    /// Whether it holds its f32 weights (not only its 8-bit copy).
    pub fn holds_f32(&self) -> bool {
        !self.w.is_empty() || self.int8.is_none()
    }

    /// `W` in f32: the weights held, or, in a layer held at 8 bits only, its 8-bit copy's
    /// ([`QuantizedWeights::dequantized`], made now: a backward pass's product reads it once).
    pub fn weights(&self) -> std::borrow::Cow<'_, [f32]> {
        match (&self.int8, self.holds_f32()) {
            (Some(q), false) => q.dequantized().into(),
            _ => (&self.w[..]).into(),
        }
    }

    /// Drops its f32 weights, keeping its 8-bit copy, which the products already use.
    ///
    /// # Panics
    /// Without an 8-bit copy.
    pub fn drop_f32(&mut self) {
        assert!(self.int8.is_some(), "a layer held at 8 bits has its 8-bit copy");
        self.w = Arc::from(Vec::new());
    }

    /// `W` to change in place (a copy of it first, if another model shares it); its 8-bit copy,
    /// which would no longer be `W`'s, is dropped.
    ///
    /// # Panics
    /// In a layer held at 8 bits only: it has no f32 weights to change.
    pub fn weights_mut(&mut self) -> &mut [f32] {
        assert!(self.holds_f32(), "a layer held at 8 bits only has no f32 weights to change");
        self.int8 = None;
        Arc::make_mut(&mut self.w)
    }

    /// Bytes it takes as the page stores it: its 8-bit copy's bytes (12-bit weights at a byte and
    /// a half, factors included) when it has one, else every weight in f16; the biases in f16
    /// either way.
    pub fn stored_bytes(&self) -> u64 {
        use crate::model::spec::WEIGHT_BYTES;
        match &self.int8 {
            Some(q) => q.bytes() as u64 + WEIGHT_BYTES * self.b.len() as u64,
            None => WEIGHT_BYTES * (self.w.len() + self.b.len()) as u64,
        }
    }

    /// Output features.
    pub fn out(&self) -> usize {
        self.b.len()
    }

    /// Input features.
    pub fn inp(&self) -> usize {
        match (&self.int8, self.holds_f32()) {
            (Some(q), false) => q.inp(),
            _ => self.w.len() / self.b.len().max(1),
        }
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
        let w = match self.holds_f32() {
            true => rows.iter().flat_map(|&o| self.w[o * inp..(o + 1) * inp].iter().copied()).collect(),
            false => Vec::new(),
        };
        Linear {
            w: w.into(),
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
            // A layer held at 8 bits has no rows to select from: it stays held at 8 bits.
            w: w.collect(),
            b: bias,
            int8: self.int8.as_ref().map(|q| Arc::new(q.select_inputs(ranges))),
        }
    }
}

/// The text an 8-bit model of either family is calibrated on: the largest input each dense layer sees here sets
/// how its weights are quantized (which features are outliers). Plain English of several kinds;
/// any text of a few hundred tokens would do, the outlier features are the model's, not the text's.
pub const CALIBRATION: &[&str] = &[
    "The bank raised its interest rates again this spring, and savers moved their money.",
    "She sat on the river bank and watched the water run past the old mill.",
    "A man is playing a guitar on the street while children dance around him.",
    "Attention lets every token look at every other token and take what it needs.",
    "In 1905 Einstein published four papers that changed physics; one explained the photoelectric effect.",
    "Please send the report by Friday, or call me if anything is unclear!",
    "The recipe needs two eggs, a cup of flour, some sugar and a pinch of salt.",
    "Why do cats sleep so much? Nobody knows for sure, but they seem to enjoy it.",
];

/// LayerNorm's scale and shift.
#[derive(Clone, Debug, PartialEq)]
pub struct Norm {
    /// Scale.
    pub w: Vec<f32>,
    /// Shift.
    pub b: Vec<f32>,
}

impl Norm {
    /// Bytes its scale and shift take as the page stores them (f16).
    pub fn stored_bytes(&self) -> u64 {
        crate::model::spec::WEIGHT_BYTES * (self.w.len() + self.b.len()) as u64
    }
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
    add_bias(y, n, rs, &lin.b);
}

/// `y[i * rs..][..bias.len()] += bias` for each of the `n` rows.
fn add_bias(y: &mut [f32], n: usize, rs: usize, bias: &[f32]) {
    for i in 0..n {
        y[i * rs..i * rs + bias.len()].iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
}

/// [`linear`] in `turns`' steps, a turn after each: the f32 product a block of output columns
/// at a time ([`product_in_turns`]), the 8-bit one a block of rows at a time (its weights are
/// packed once, its activations quantized per row). Either way each output is the same sum in
/// the same order as [`linear`]'s: the same bits.
#[allow(clippy::too_many_arguments)] // linear's signature and the turns
pub async fn linear_in_turns(
    kernel: Kernel,
    x: &[f32],
    n: usize,
    lin: &Linear,
    y: &mut [f32],
    rs: usize,
    turns: &dyn Turns,
) {
    let (out, inp) = (lin.b.len(), x.len() / n.max(1));
    let step = match turns.step_flops() {
        Some(step) if 2 * n * inp * out > step => step,
        _ => {
            linear(kernel, x, n, lin, y, rs);
            return turns.turn().await;
        }
    };
    if let Some(q) = &lin.int8 {
        let rows = (step / (2 * inp * out).max(1)).max(1);
        for r0 in (0..n).step_by(rows) {
            let r = rows.min(n - r0);
            qgemm(kernel, &x[r0 * inp..(r0 + r) * inp], r, q, &lin.b, &mut y[r0 * rs..], rs);
            turns.turn().await;
        }
        return;
    }
    product_in_turns(kernel, x, n, &lin.w, y, rs, turns).await;
    add_bias(y, n, rs, &lin.b);
}

/// `y <- x W^T` for `x` (`n x in`) and `W` (`out x in`, row-major), row `i` of the result at
/// `y[i * rs..][..out]`, in `turns`' steps ([`columns_in_turns`]).
pub async fn product_in_turns(
    kernel: Kernel,
    x: &[f32],
    n: usize,
    w: &[f32],
    y: &mut [f32],
    rs: usize,
    turns: &dyn Turns,
) {
    let inp = x.len() / n.max(1);
    let out = w.len() / inp.max(1);
    let (a, b) = (MatRef::row_major(x, n, inp), MatRef::row_major(w, out, inp).t());
    columns_in_turns(kernel, a, b, y, rs, turns).await;
}

/// `y <- a b`, row `i` of the result at `y[i * rs..][..b.cols()]`: where `turns` cuts products,
/// a block of `b`'s columns at a time (whole strips of the packed kernel's eight columns, each
/// block at most about `turns`' step) and a turn after each. Each output is the same sum in the
/// same order as one product's.
pub async fn columns_in_turns(
    kernel: Kernel,
    a: MatRef<'_>,
    b: MatRef<'_>,
    y: &mut [f32],
    rs: usize,
    turns: &dyn Turns,
) {
    let (n, inner, cols) = (a.rows(), a.cols(), b.cols());
    let width = match turns.step_flops() {
        Some(step) => (step / (2 * n * inner).max(1)).max(8) / 8 * 8,
        None => cols,
    };
    for c0 in (0..cols).step_by(width.max(1)) {
        let w = width.min(cols - c0);
        sgemm(kernel, 1.0, a, b.columns(c0, w), 0.0, MatMut::new(&mut y[c0..], n, w, rs, 1));
        turns.turn().await;
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

/// RMSNorm over each row (of `w`'s width), as Llama's: `x / sqrt(mean(x^2) + eps) * w`, the mean
/// in f64. No shift, and no mean taken out.
pub fn rms_norm(x: &mut [f32], w: &[f32], eps: f64) {
    let d = w.len();
    assert!(d > 0 && x.len().is_multiple_of(d), "rows of {d}");
    for row in x.chunks_exact_mut(d) {
        let mean = row.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64;
        let inv = 1.0 / (mean + eps).sqrt();
        for (v, w) in row.iter_mut().zip(w) {
            *v = (*v as f64 * inv) as f32 * w;
        }
    }
}

/// SwiGLU's gate, in place: `gate <- silu(gate) * up`, with `silu(g) = g / (1 + e^-g)` (Llama's
/// feed-forward: `W_down (silu(W_gate x) * W_up x)`).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "one up value per gate value");
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::turns::{at_once, InSteps};

    /// RMSNorm against its f64 formula on a table of widths (one, odd, SmolLM2's, Llama's), rows
    /// of zeros (the epsilon keeps them zero) and a row holding NaN (NaN throughout, the other
    /// rows untouched).
    #[test]
    fn rms_norm_matches_the_f64_formula() {
        for (c, &(n, d)) in [(1, 1), (3, 7), (5, 576), (2, 4096)].iter().enumerate() {
            let make = seeded(c as u32, 9);
            let (mut x, w) = (make(n * d, 3.0), make(d, 1.0));
            x[..d].iter_mut().for_each(|v| *v = 0.0);
            let want: Vec<f64> = x
                .chunks_exact(d)
                .flat_map(|row| {
                    let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
                    row.iter().zip(&w).map(move |(&v, &w)| v as f64 / (ms + 1e-5).sqrt() * w as f64)
                })
                .collect();
            let mut got = x.clone();
            rms_norm(&mut got, &w, 1e-5);
            for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert!((g as f64 - e).abs() <= 1e-6 * (1.0 + e.abs()), "{n}x{d} value {i}: {g} against {e}");
            }
            assert!(got[..d].iter().all(|&v| v == 0.0), "a row of zeros stays zero");
            if n > 1 {
                let mut poisoned = x.clone();
                poisoned[d] = f32::NAN;
                rms_norm(&mut poisoned, &w, 1e-5);
                assert!(poisoned[d..2 * d].iter().all(|v| v.is_nan()), "{n}x{d}: NaN row");
                assert_eq!(poisoned[..d], got[..d], "{n}x{d}: the other rows untouched");
            }
        }
    }

    /// SwiGLU's gate against `g sigmoid(g) u` in f64, on values from -100 to 100 (no NaN where
    /// `e^-g` overflows f32) and NaN (kept).
    #[test]
    fn swiglu_matches_the_f64_formula() {
        let mut gate: Vec<f32> = (-200..=200).map(|i| i as f32 * 0.5).collect();
        let up: Vec<f32> = seeded(4, 4)(gate.len(), 2.0);
        let want: Vec<f64> =
            gate.iter().zip(&up).map(|(&g, &u)| g as f64 / (1.0 + (-(g as f64)).exp()) * u as f64).collect();
        swiglu(&mut gate, &up);
        for (i, (&g, &w)) in gate.iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() <= 1e-6 * (1.0 + w.abs()), "value {i}: {g} against {w}");
        }
        let mut nan = [f32::NAN, 1.0];
        swiglu(&mut nan, &[1.0, f32::NAN]);
        assert!(nan.iter().all(|v| v.is_nan()));
    }

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A layer of `out x inp` seeded weights, in f32 or with its 8-bit copy.
    fn layer(inp: usize, out: usize, seed: u32, bits: Option<IntBits>) -> Linear {
        let make = seeded(seed, 7);
        let mut lin = Linear::new(make(out * inp, 0.5), make(out, 0.1));
        if let Some(bits) = bits {
            lin.quantize(&vec![1.0; inp], bits);
        }
        lin
    }

    #[test]
    fn a_product_cut_into_steps_gives_the_bits_of_one_product() {
        // (rows, in, out): one of each, odd sizes, fewer columns than a strip, and wide ones.
        let shapes = [(1, 1, 1), (3, 5, 7), (17, 33, 65), (4, 96, 200), (9, 64, 1030), (33, 7, 3)];
        for (i, &(n, inp, out)) in shapes.iter().enumerate() {
            for bits in [None, Some(IntBits::Eight), Some(IntBits::Twelve)] {
                let lin = layer(inp, out, i as u32, bits);
                let x = seeded(100 + i as u32, 3)(n * inp, 2.0);
                // Rows a little wider than the output, so a block writing past its columns shows.
                let rs = out + 3;
                let mut whole = vec![f32::NAN; n * rs];
                linear(Kernel::Simd, &x, n, &lin, &mut whole, rs);
                for step in [1, 2 * inp * 8, 2 * n * inp * 9, usize::MAX / 4] {
                    let turns = InSteps::of(step);
                    let mut cut = vec![f32::NAN; n * rs];
                    at_once(linear_in_turns(Kernel::Simd, &x, n, &lin, &mut cut, rs, &turns));
                    let same = whole.iter().zip(&cut).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{n}x{inp} -> {out}, {bits:?}, steps of {step}");
                    // Cut where the product is over a step and its rows (8 bits) or its
                    // columns past one strip (f32) can be split.
                    let splits = if bits.is_some() { n > 1 } else { out > 8 };
                    let cut = 2 * n * inp * out > step && splits;
                    assert_eq!(turns.taken() > 1, cut, "{n}x{inp} -> {out}, {bits:?}, steps of {step}");
                }
            }
        }
    }
}
