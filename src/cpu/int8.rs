//! The 8-bit matrix product of the trained model's projections: `y = x W^T + b` for activations
//! `x` (`n x K`, f32) and weights `W` (`N x K`, PyTorch's `[out, in]`), with the products in
//! integers accumulated exactly.
//!
//! ```text
//! weights, once at load, per output channel o (symmetric; L = 127, or 2047 at 12 bits):
//!   s_o = max_k |W[o,k]| / L            q[o,k] = round(W[o,k] / s_o)            in [-L, L]
//! activations, per row i at run time (asymmetric, zero exactly representable; A = 127 for
//! 7 bits, 4095 for 12):
//!   lo = min(0, min_k x[i,k])  hi = max(0, max_k x[i,k])  t_i = (hi - lo) / A
//!   z_i = round(-lo / t_i)      u[i,k] = clamp(round(x[i,k] / t_i) + z_i, 0, A)
//! y[i,o] = t_i s_o (sum_k u[i,k] q[o,k] - z_i sum_k q[o,k]) + b[o]
//! ```
//!
//! Two refinements, both per weight matrix ([`QuantizedWeights::smoothed`]): smoothing factors
//! `m_k` (SmoothQuant), so that the product quantizes `x / m` against `W m` (the same product,
//! the rounding moved off the activations' outlier features); and [`IntBits::Twelve`], 12-bit
//! weights against 12-bit activations for the one product whose 8-bit weights and 7-bit
//! activations cost too much (the model's `W_2`). Rounding is to nearest: the activations' ties
//! to even (one `f32x4.nearest`), the weights' (once, at load) away from zero, as `f32::round`.
//!
//! Why 7-bit activations: relaxed SIMD's `i32x4.relaxed_dot_i8x16_i7x16_add_s` multiplies 16
//! signed bytes by 16 bytes whose top bit must be clear (an engine may read them as signed or
//! unsigned), summing each four into an i32 lane: 16 multiply-adds per instruction where
//! `f32x4.relaxed_madd` does 4. The activations are that operand, as unsigned 7-bit values with
//! a zero point; the weights keep all 8 bits. (8-bit activations, each code split into two 7-bit
//! halves for two dot products a step, were measured and dropped: 0.66-0.72x of f32 where 7 bits
//! take 0.33-0.39x, and no product of the model needed them once `W_2` had finer weights.)
//! How an engine runs that instruction depends on the CPU: V8 emits one `vpdpbusd` where the
//! CPU has VEX VNNI (a Zen 5, recent Intel), and five instructions elsewhere (a Zen 4, Xeons
//! without AVX-VNNI: the constant ones made again, `vpmaddubsw`, `vpmaddwd` by them, an add).
//! So the relaxed micro-kernel has two forms of the same sums ([`DotForm`]), timed by each wasm
//! instance ([`DotFormTrial`]): [`DotForm::Fused`], that one instruction, and
//! [`DotForm::Split`], `i16x8.relaxed_dot_i8x16_i7x16_s` (one `vpmaddubsw`; a pair of products
//! is at most `2 * 127 * 127 = 32258`, exact in 16 bits) then `i32x4.dot_i16x8_s` by ones kept
//! in a register and an add: three instructions on any x64. Without VNNI the split form's 8-bit
//! products take about 0.8 of the fused one's time, with VNNI about twice it; both compute the
//! same integers.
//! 12-bit products go through simd128's `i32x4.dot_i16x8_s` (8 multiply-adds an instruction) on
//! 16-bit words: on a CPU whose engine lowers the relaxed dot product to a multiply-add pair (no
//! VNNI) that is the same multiplier work per weight as 8 bits, and anywhere it is half the work
//! of the residual product it replaced (8-bit weights and their rounding error in a second 8-bit
//! product on the same 7-bit codes: bench/int8.mjs, BENCHMARKS.md section 13).
//!
//! # Contract
//! - The integer sum is exact: at 8 bits each i32 lane holds at most `127 * 127 * K` (exact for
//!   any `K <= 133_000`); at 12 bits each run of [`WORD_CHUNK`] positions (`4095 * 2047 * 256 <
//!   2^31`) is added into an i64, so any `K` is exact. `y` therefore equals the float64 product
//!   of the *dequantized* operands `x^_k = m_k t_i (u_k - z_i)` and `W^ = s_o q / m_k` up to the
//!   f32 roundings of the final scales and bias (a test holds it to `1e-6` relative).
//! - Against the exact `x W^T + b`: `|x_k - x^_k| <= m_k t_i / 2` and `|W - W^| <= s_o / (2 m_k)`
//!   elementwise, so `|y - y_exact| <= sum_k (m_k t_i / 2 |W^[o,k]| + s_o / (2 m_k) |x[i,k]|)`
//!   (a test checks this bound on a table of shapes, every variant).
//! - A row of `x` holding NaN or infinity gives a row of NaN; every element of `y`'s `n x N`
//!   block is written and nothing else (NaN-poisoned outputs prove it).
//!
//! Each width's micro-kernel has variants with one contract, chosen by [`Kernel`] and the build:
//! at 8 bits relaxed SIMD (the page's relaxed build) or, in the simd128 build (engines without
//! relaxed SIMD), the 12-bit micro-kernel on the same integers: the codes quantized into words
//! and each strip's bytes widened into words once per product (`widen_strip`), which takes
//! 0.57-0.60x of f32's time where a kernel widening the bytes at every step took 0.85-0.90x (it
//! kept sixteen accumulators and four widened weight vectors, more than x64's sixteen vector
//! registers); at 12 bits `i32x4.dot_i16x8_s` in both builds; and a portable twin of each that
//! always compiles and runs the native tests. They all compute the same integers, so they give
//! the same bits. The work around the micro-kernel has a simd128 variant on the vector kernel
//! too, with the same operations in the same order: the activations' quantization
//! (`vector_rows`: range and codes four values at a time; one value at a time it took about a
//! sixth of an 8-bit layer at 128 tokens) and the final scaling of a full strip
//! (`write_block_simd128`). `both_kernels_give_the_same_bits` holds all of it to the bit in the
//! browser.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicU8, Ordering};

use super::Kernel;
use crate::attention::clock::{ms_per_run, Clock};

/// Rows of `y` a micro-kernel call produces.
const MR: usize = 4;
/// Columns (output channels) of `y` a micro-kernel call produces: two vectors of four.
const NR: usize = 8;
/// Input positions of one step of the packed weights: four bytes or two 16-bit words a channel,
/// one 32-bit lane of a vector either way.
const fn step_positions(bits: IntBits) -> usize {
    match bits {
        IntBits::Eight => 4,
        IntBits::Twelve => 2,
    }
}
/// Weights of one step of the packed weights: `NR` channels times one lane of positions.
const STEP_BYTES: usize = NR * 4;
const STEP_WORDS: usize = NR * 2;
/// Positions a 12-bit micro-kernel sums in i32 before adding into i64: `4095 * 2047 * 256`
/// is below `2^31`.
pub const WORD_CHUNK: usize = 256;

/// The integers of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntBits {
    /// Signed bytes `[-127, 127]` for the weights against 7-bit codes `[0, 127]` for the
    /// activations: the relaxed dot product's operands.
    Eight,
    /// 12-bit weights `[-2047, 2047]` against 12-bit codes `[0, 4095]`, both in 16-bit words:
    /// for a product whose 8-bit weights and 7-bit activations cost the model too much (`W_2`).
    Twelve,
}

impl IntBits {
    /// The largest quantized weight magnitude.
    fn weight_levels(self) -> f32 {
        match self {
            IntBits::Eight => 127.0,
            IntBits::Twelve => 2047.0,
        }
    }

    /// The largest activation code.
    fn activation_levels(self) -> f32 {
        match self {
            IntBits::Eight => 127.0,
            IntBits::Twelve => 4095.0,
        }
    }
}

/// How the relaxed build's 8-bit micro-kernel sums four products of a byte and a 7-bit code
/// into an i32 lane (the module docs: which is faster depends on the CPU; both give the same
/// integers). Natively and in the simd128 build there is one kernel and this changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DotForm {
    /// `i32x4.relaxed_dot_i8x16_i7x16_add_s`: one instruction on a CPU with VEX VNNI.
    Fused,
    /// `i16x8.relaxed_dot_i8x16_i7x16_s`, then `i32x4.dot_i16x8_s` by ones and `i32x4.add`.
    Split,
}

impl DotForm {
    /// Both forms, the default first.
    pub const ALL: [DotForm; 2] = [DotForm::Fused, DotForm::Split];

    /// The form as a word, for a message and the benchmarks' lines.
    pub fn key(self) -> &'static str {
        match self {
            DotForm::Fused => "fused",
            DotForm::Split => "split",
        }
    }

    /// The form a [`DotForm::key`] names.
    pub fn from_key(key: &str) -> Option<DotForm> {
        DotForm::ALL.into_iter().find(|f| f.key() == key)
    }
}

/// This wasm instance's [`DotForm`] (one CPU, so one choice: [`set_dot_form`]).
static DOT_FORM: AtomicU8 = AtomicU8::new(0);

/// The [`DotForm`] 8-bit products run with: [`DotForm::Fused`] until [`set_dot_form`].
pub fn dot_form() -> DotForm {
    DotForm::ALL[DOT_FORM.load(Ordering::Relaxed) as usize]
}

/// Runs every later 8-bit product with `form` (results unchanged: only the time).
pub fn set_dot_form(form: DotForm) {
    DOT_FORM.store(form as u8, Ordering::Relaxed);
}

/// Whether this build's vector kernel has both forms (the relaxed SIMD build).
pub const DOT_FORMS_DIFFER: bool =
    cfg!(all(target_arch = "wasm32", target_feature = "simd128", feature = "relaxed-simd"));

/// The faster [`DotForm`] on this CPU, timed on `clock` ([`DotFormTrial`] round after round).
/// A build with one kernel ([`DOT_FORMS_DIFFER`] false) times nothing and answers
/// [`DotForm::Fused`].
pub fn faster_dot_form(clock: &impl Clock) -> DotForm {
    if !DOT_FORMS_DIFFER {
        return DotForm::Fused;
    }
    let mut trial = DotFormTrial::new();
    loop {
        if let Some(form) = trial.round(clock) {
            return form;
        }
    }
}

/// Timing the two [`DotForm`]s against each other, a round at a time (a page gives the browser
/// a turn between rounds): each round one sample of each form on an 8-bit product of 32 rows at
/// MiniLM's `384 x 384` (0.05-0.1 ms), repeated to at least 2 ms and 10 clock steps (10 %: the
/// forms differ by 25-70 %); settled when two rounds in a row improve neither form's fastest
/// sample by 10 %, after at least 5 rounds (at most 16). A fresh instance's first calls run the
/// engine's baseline code, several times slower and not in the same ratio, until its optimized
/// code is swapped in, which in a page still starting took 4-20 rounds in headless Chromium and
/// once more than a trial waited for (1 start in 17 picked the slower form): so a page times
/// again later, when a trial is clean. 4-10 ms a round on a 0.1 ms clock, 20-40 ms on a 1 ms
/// one (Firefox's, where a page is not cross-origin isolated).
pub struct DotFormTrial {
    operands: (Vec<f32>, QuantizedWeights, Vec<f32>, Vec<f32>),
    best: [f64; 2],
    steady: usize,
    rounds: usize,
}

impl Default for DotFormTrial {
    fn default() -> Self {
        DotFormTrial::new()
    }
}

impl DotFormTrial {
    /// Rows of the timed product.
    const ROWS: usize = 32;
    /// Its inputs and outputs (MiniLM's `d_model`).
    const WIDTH: usize = 384;

    /// A trial with its operands made (a fixed wave: the time does not depend on the values).
    pub fn new() -> Self {
        let (n, k) = (Self::ROWS, Self::WIDTH);
        let wave =
            |len: usize, seed: f32| -> Vec<f32> { (0..len).map(|i| (i as f32 * seed).sin()).collect() };
        let weights = QuantizedWeights::new(&wave(k * k, 0.11), k, k);
        DotFormTrial {
            operands: (wave(n * k, 0.37), weights, vec![0.0; k], vec![0.0; n * k]),
            best: [f64::INFINITY; 2],
            steady: 0,
            rounds: 0,
        }
    }

    /// One round on `clock`: the faster form once the trial has settled.
    pub fn round(&mut self, clock: &impl Clock) -> Option<DotForm> {
        let (x, weights, bias, y) = &mut self.operands;
        let (n, k) = (Self::ROWS, Self::WIDTH);
        let times = DotForm::ALL.map(|form| {
            ms_per_run(clock, 2.0, 10.0, || qgemm_with(Kernel::Simd, form, x, n, weights, bias, y, k))
        });
        self.record(times)
    }

    /// A round's times (milliseconds per product, fused then split).
    fn record(&mut self, times: [f64; 2]) -> Option<DotForm> {
        let before = self.best;
        for (best, t) in self.best.iter_mut().zip(times) {
            *best = best.min(t);
        }
        let improved = self.best.iter().zip(before).any(|(now, was)| *now < 0.9 * was);
        self.steady = if improved { 0 } else { self.steady + 1 };
        self.rounds += 1;
        let settled = (self.rounds >= 5 && self.steady >= 2) || self.rounds >= 16;
        settled.then(|| by_time(self.best[0], self.best[1]))
    }
}

/// The form that took less time; the fused one on a tie (or an unreadable clock).
fn by_time(fused_ms: f64, split_ms: f64) -> DotForm {
    if split_ms < fused_ms {
        DotForm::Split
    } else {
        DotForm::Fused
    }
}

/// The packed weights: strips of `NR` (8) channels, each a run of steps of one 32-bit lane of
/// input positions per channel (four bytes or two words), channel-major within a step; the
/// strip past `N` and the positions past `K` (padded to a multiple of four) are zero.
#[derive(Clone, Debug, PartialEq)]
enum Packed {
    Bytes(Vec<i8>),
    Words(Vec<i16>),
}

/// A weight matrix `W` (`N x K`) quantized per output channel and packed for the micro-kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedWeights {
    out: usize,
    inp: usize,
    /// `s_o` per output channel.
    scales: Vec<f32>,
    /// `sum_k q[o,k]` per output channel (the zero point's correction).
    sums: Vec<i32>,
    packed: Packed,
    /// Per input position `k`, `1 / m_k`: the activations are quantized as `x[i,k] / m_k`
    /// against weights `W[o,k] m_k` (smoothing, see [`QuantizedWeights::smoothed`]); empty
    /// when every `m_k` is 1.
    smoothing: Vec<f32>,
}

impl QuantizedWeights {
    /// `w` (`out x inp`, row-major) quantized to 8 bits. A channel of zeros gets scale 1 (its
    /// bytes are 0); a non-finite weight gives its channel a NaN scale, so its outputs are NaN.
    pub fn new(w: &[f32], out: usize, inp: usize) -> Self {
        Self::with_bits(w, out, inp, IntBits::Eight)
    }

    /// `w` quantized to `bits`.
    pub fn with_bits(w: &[f32], out: usize, inp: usize, bits: IntBits) -> Self {
        assert_eq!(w.len(), out * inp, "W must be out x inp");
        let levels = bits.weight_levels();
        let scales: Vec<f32> = (0..out).map(|o| channel_scale(&w[o * inp..(o + 1) * inp], levels)).collect();
        let inverse: Vec<f32> = scales.iter().map(|s| 1.0 / s).collect();
        Self::from_fn(out, inp, scales, bits, |o, k| {
            (w[o * inp + k] * inverse[o]).round().clamp(-levels, levels) as i32
        })
    }

    /// `w` quantized to `bits` with its activations' outliers moved into the weights
    /// (SmoothQuant, Xiao et al. 2023): a position `k` whose activations reach `a_k` in
    /// magnitude (`input_max`, measured on calibration text) while its weights reach `w_k` gets
    /// the factor `m_k = sqrt(a_k / w_k)`, so both reach `sqrt(a_k w_k)`.
    /// `x W^T = (x / m) (W m)^T` exactly; only the rounding moves, away from the few positions
    /// whose activations are tens of times the rest's (a transformer's outlier features), which
    /// would otherwise set every row's step. Positions never active (or with zero weights) keep
    /// `m_k = 1`.
    pub fn smoothed(w: &[f32], out: usize, inp: usize, input_max: &[f32], bits: IntBits) -> Self {
        assert_eq!(input_max.len(), inp, "one activation maximum per input position");
        let factors: Vec<f32> = (0..inp)
            .map(|k| {
                let w_k = (0..out).map(|o| w[o * inp + k].abs()).fold(0.0f32, f32::max);
                let m = (input_max[k] / w_k).sqrt();
                if m.is_finite() && m > 0.0 {
                    m
                } else {
                    1.0
                }
            })
            .collect();
        let scaled: Vec<f32> = w.iter().enumerate().map(|(i, v)| v * factors[i % inp.max(1)]).collect();
        let mut q = Self::with_bits(&scaled, out, inp, bits);
        q.smoothing = factors.iter().map(|m| 1.0 / m).collect();
        q
    }

    /// Packs the values `q(o, k)` (within the width's levels) with the channels' `scales`.
    fn from_fn(
        out: usize,
        inp: usize,
        scales: Vec<f32>,
        bits: IntBits,
        q: impl Fn(usize, usize) -> i32,
    ) -> Self {
        let lanes = inp.div_ceil(4);
        let len = out.div_ceil(NR) * lanes * NR * 4;
        let mut sums = vec![0i32; out];
        let mut put = |set: &mut dyn FnMut(usize, i32)| {
            for (o, sum) in sums.iter_mut().enumerate() {
                for k in 0..inp {
                    let v = q(o, k);
                    set(packed_index(bits, lanes, o, k), v);
                    *sum += v;
                }
            }
        };
        let packed = match bits {
            IntBits::Eight => {
                let mut p = vec![0i8; len];
                put(&mut |i, v| p[i] = v as i8);
                Packed::Bytes(p)
            }
            IntBits::Twelve => {
                let mut p = vec![0i16; len];
                put(&mut |i, v| p[i] = v as i16);
                Packed::Words(p)
            }
        };
        QuantizedWeights { out, inp, scales, sums, packed, smoothing: Vec::new() }
    }

    /// Output channels `N`.
    pub fn out(&self) -> usize {
        self.out
    }

    /// Input positions `K`.
    pub fn inp(&self) -> usize {
        self.inp
    }

    /// The weights' width.
    pub fn bits(&self) -> IntBits {
        match self.packed {
            Packed::Bytes(_) => IntBits::Eight,
            Packed::Words(_) => IntBits::Twelve,
        }
    }

    /// Bytes the quantized weights take: the packed weights, the per-channel scales and sums,
    /// and the smoothing factors.
    pub fn bytes(&self) -> usize {
        let packed = match &self.packed {
            Packed::Bytes(p) => p.len(),
            Packed::Words(p) => 2 * p.len(),
        };
        packed + 8 * self.out + 4 * self.smoothing.len()
    }

    /// The quantized weight `q[o, k]`.
    pub fn at(&self, o: usize, k: usize) -> i32 {
        assert!(o < self.out && k < self.inp, "({o}, {k}) outside {} x {}", self.out, self.inp);
        let i = packed_index(self.bits(), self.inp.div_ceil(4), o, k);
        match &self.packed {
            Packed::Bytes(p) => p[i] as i32,
            Packed::Words(p) => p[i] as i32,
        }
    }

    /// `s_o` of channel `o`: the step of its weights.
    pub fn scale(&self, o: usize) -> f32 {
        self.scales[o]
    }

    /// `W^ = s_o q / m_k` (`out x inp`, row-major): the weights the product really multiplies
    /// the activations by (up to the activations' own rounding).
    pub fn dequantized(&self) -> Vec<f32> {
        let inv = |k: usize| self.smoothing.get(k).copied().unwrap_or(1.0);
        (0..self.out)
            .flat_map(|o| (0..self.inp).map(move |k| self.scales[o] * self.at(o, k) as f32 * inv(k)))
            .collect()
    }

    /// `1 / m_k` per input position, empty without smoothing.
    pub fn smoothing(&self) -> &[f32] {
        &self.smoothing
    }

    /// The channels `channels`, in that order, with their scales: the same weights, so a
    /// product with the selection equals the same channels of a product with the whole.
    pub fn select_channels(&self, channels: &[usize]) -> Self {
        let scales = channels.iter().map(|&o| self.scales[o]).collect();
        let mut q =
            Self::from_fn(channels.len(), self.inp, scales, self.bits(), |o, k| self.at(channels[o], k));
        q.smoothing = self.smoothing.clone();
        q
    }

    /// The input positions in `ranges`, in order, each channel keeping its scale (chosen over
    /// the whole row): the kept heads' columns of an output projection.
    pub fn select_inputs(&self, ranges: &[Range<usize>]) -> Self {
        let keep: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
        let mut q =
            Self::from_fn(self.out, keep.len(), self.scales.clone(), self.bits(), |o, k| self.at(o, keep[k]));
        q.smoothing = if self.smoothing.is_empty() {
            Vec::new()
        } else {
            keep.iter().map(|&k| self.smoothing[k]).collect()
        };
        q
    }
}

/// Where `q[o, k]` lies in the packed weights of a matrix with `lanes` steps of four positions
/// (`lanes * 4 / step_positions` steps of the width's own).
fn packed_index(bits: IntBits, lanes: usize, o: usize, k: usize) -> usize {
    let per = step_positions(bits);
    let step = NR * per;
    o / NR * lanes * NR * 4 + k / per * step + o % NR * per + k % per
}

/// `s_o = max |w| / levels` for one channel: 1 for a channel of zeros, NaN if any weight is
/// not finite.
fn channel_scale(row: &[f32], levels: f32) -> f32 {
    let mut max = 0.0f32;
    for &v in row {
        if !v.is_finite() {
            return f32::NAN;
        }
        max = max.max(v.abs());
    }
    if max == 0.0 {
        1.0
    } else {
        max / levels
    }
}

/// Whether a product's activation codes go in 16-bit words: at 12 bits always; at 8 bits on the
/// vector kernel of the simd128 build, whose fastest integer multiply is `i32x4.dot_i16x8_s` on
/// words (the relaxed dot product on bytes is not there): its 8-bit products run the 12-bit
/// micro-kernel on the same integers, each strip's bytes widened once per product
/// ([`widen_strip`]).
fn in_words(kernel: Kernel, bits: IntBits) -> bool {
    bits == IntBits::Twelve || (WIDENED_BYTES && kernel == Kernel::Simd)
}

/// The simd128 build without relaxed SIMD: 8-bit products on the vector kernel go through words.
const WIDENED_BYTES: bool =
    cfg!(all(target_arch = "wasm32", target_feature = "simd128", not(feature = "relaxed-simd")));

/// Rows of activations quantized for one product: `u` (`rows x 4 * lanes`, padded with zero
/// rows to a multiple of [`MR`] and zero positions to a multiple of four), as 7-bit codes in
/// bytes or, for a 12-bit product, 12-bit codes in words; `t_i` and `z_i`.
#[derive(Debug, Default)]
struct QuantizedRows {
    values: Vec<u8>,
    wide: Vec<i16>,
    scales: Vec<f32>,
    zeros: Vec<i32>,
    /// One row divided by the smoothing factors.
    smoothed: Vec<f32>,
}

impl QuantizedRows {
    /// Quantizes `x` (`n x inp`) into these buffers (reused between products): on the vector
    /// kernel four values at a time ([`vector_rows`]), the same codes as the portable loops.
    fn fill(
        &mut self,
        kernel: Kernel,
        x: &[f32],
        (n, inp): (usize, usize),
        smoothing: &[f32],
        bits: IntBits,
    ) {
        let width = inp.div_ceil(4) * 4;
        let padded = n.div_ceil(MR) * MR;
        self.scales.clear();
        self.zeros.clear();
        let words = in_words(kernel, bits);
        if words {
            self.wide.clear();
            self.wide.resize(padded * width, 0);
        } else {
            self.values.clear();
            self.values.resize(padded * width, 0);
        }
        let levels = bits.activation_levels();
        for i in 0..n {
            let mut row = &x[i * inp..(i + 1) * inp];
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            if kernel == Kernel::Simd {
                let (t, z) = if words {
                    vector_rows::quantize(row, smoothing, levels, &mut self.wide[i * width..][..inp])
                } else {
                    vector_rows::quantize(row, smoothing, levels, &mut self.values[i * width..][..inp])
                };
                self.scales.push(t);
                self.zeros.push(z);
                continue;
            }
            let _ = kernel;
            if !smoothing.is_empty() {
                self.smoothed.clear();
                self.smoothed.extend(row.iter().zip(smoothing).map(|(v, s)| v * s));
                row = &self.smoothed;
            }
            let (t, z) = if words {
                quantize_row(row, levels, &mut self.wide[i * width..i * width + inp])
            } else {
                quantize_row(row, levels, &mut self.values[i * width..i * width + inp])
            };
            self.scales.push(t);
            self.zeros.push(z);
        }
        self.scales.resize(padded, 0.0);
        self.zeros.resize(padded, 0);
    }
}

/// An activation code's integer type: bytes for 7-bit codes, words for 12-bit ones.
trait Code: Copy {
    /// A level already rounded and within the codes' range.
    fn from_level(level: f32) -> Self;
    fn level(self) -> i32;
}

impl Code for u8 {
    fn from_level(level: f32) -> Self {
        level as u8
    }
    fn level(self) -> i32 {
        self as i32
    }
}

impl Code for i16 {
    fn from_level(level: f32) -> Self {
        level as i16
    }
    fn level(self) -> i32 {
        self as i32
    }
}
/// Quantizes one row into `out`, returning `(t, z)`. NaN or infinity anywhere: `t` is NaN.
fn quantize_row<C: Code>(row: &[f32], levels: f32, out: &mut [C]) -> (f32, i32) {
    // Eight running minima and maxima, and `v * 0` summed (NaN once any value is NaN or
    // infinite), written so that the compiler vectorizes them (compare-and-select: f32x4.pmin).
    let (mut lo, mut hi, mut bad) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    let mut chunks = row.chunks_exact(8);
    for chunk in &mut chunks {
        for j in 0..8 {
            let v = chunk[j];
            lo[j] = if v < lo[j] { v } else { lo[j] };
            hi[j] = if v > hi[j] { v } else { hi[j] };
            bad[j] += v * 0.0;
        }
    }
    for (j, &v) in chunks.remainder().iter().enumerate() {
        lo[j] = if v < lo[j] { v } else { lo[j] };
        hi[j] = if v > hi[j] { v } else { hi[j] };
        bad[j] += v * 0.0;
    }
    if bad.iter().sum::<f32>().is_nan() {
        return (f32::NAN, 0);
    }
    let (lo, hi) = (lo.iter().fold(0.0f32, |a, &b| a.min(b)), hi.iter().fold(0.0f32, |a, &b| a.max(b)));
    let Some(step) = Step::new(lo, hi, levels) else {
        // A row of zeros: every code is the zero point 0.
        out.fill(C::from_level(0.0));
        return (1.0, 0);
    };
    for (o, &v) in out.iter_mut().zip(row) {
        *o = C::from_level(step.code(v));
    }
    (step.t, step.z as i32)
}

/// A row's step `t` and zero point `z` from its range `[lo, hi]` (`lo <= 0 <= hi`), and its
/// codes.
#[derive(Clone, Copy)]
struct Step {
    t: f32,
    z: f32,
    inverse: f32,
    levels: f32,
}

impl Step {
    /// `None` for a row of zeros (`lo == hi`).
    fn new(lo: f32, hi: f32, levels: f32) -> Option<Step> {
        if hi == lo {
            return None;
        }
        let t = (hi - lo) / levels;
        Some(Step { t, z: (-lo / t).round_ties_even(), inverse: 1.0 / t, levels })
    }

    /// `clamp(round(v / t) + z, 0, levels)` as `round(v (1 / t) + z)` clamped: rounding to
    /// nearest, ties to even (one `f32x4.nearest` on the vector path).
    fn code(self, v: f32) -> f32 {
        let q = (v * self.inverse + self.z).round_ties_even();
        if q < 0.0 {
            0.0
        } else if q > self.levels {
            self.levels
        } else {
            q
        }
    }
}

/// [`quantize_row`] on simd128 vectors, for the vector kernel: the row's values times the
/// smoothing factors on the fly (no smoothed copy), its range and its codes four values at a
/// time, narrowed to bytes or words sixteen or eight at a time. Every operation is the portable
/// loop's own (the same products, `pmin` / `pmax` as its compare-and-select, `f32x4.nearest`
/// as `round_ties_even`, a saturating conversion of integral values already in range), so the
/// codes, `t` and `z` are the same bits.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod vector_rows {
    use core::arch::wasm32::*;

    use super::{lanes4, Code, Step};

    /// The row's value at `k` times its smoothing factor (none: the value).
    fn one(row: &[f32], smoothing: &[f32], k: usize) -> f32 {
        if smoothing.is_empty() {
            row[k]
        } else {
            row[k] * smoothing[k]
        }
    }

    /// Four of [`one`] from `at`.
    #[inline(always)]
    fn four(row: &[f32], smoothing: &[f32], at: usize) -> v128 {
        if smoothing.is_empty() {
            lanes4(row, at)
        } else {
            f32x4_mul(lanes4(row, at), lanes4(smoothing, at))
        }
    }

    /// A code type's vector store: how many codes one store takes and how.
    pub(super) trait VectorCode: Code {
        const PER_STORE: usize;
        /// `PER_STORE / 4` vectors of integral codes in range (i32 lanes) into `out`.
        fn store(codes: &[v128], out: &mut [Self]);
    }

    impl VectorCode for u8 {
        const PER_STORE: usize = 16;
        fn store(c: &[v128], out: &mut [u8]) {
            let bytes = u8x16_narrow_i16x8(i16x8_narrow_i32x4(c[0], c[1]), i16x8_narrow_i32x4(c[2], c[3]));
            assert!(out.len() >= 16);
            // safety: 16 bytes in `out` (asserted); wasm stores need no alignment.
            unsafe { v128_store(out.as_mut_ptr() as *mut v128, bytes) };
        }
    }

    impl VectorCode for i16 {
        const PER_STORE: usize = 8;
        fn store(c: &[v128], out: &mut [i16]) {
            let words = i16x8_narrow_i32x4(c[0], c[1]);
            assert!(out.len() >= 8);
            // safety: 16 bytes in `out` (asserted); wasm stores need no alignment.
            unsafe { v128_store(out.as_mut_ptr() as *mut v128, words) };
        }
    }

    /// Quantizes `row * smoothing` into `out` (as long as the row), returning `(t, z)`; NaN or
    /// infinity anywhere: `t` is NaN.
    pub(super) fn quantize<C: VectorCode>(
        row: &[f32],
        smoothing: &[f32],
        levels: f32,
        out: &mut [C],
    ) -> (f32, i32) {
        assert!(out.len() == row.len() && (smoothing.is_empty() || smoothing.len() == row.len()));
        let body = row.len() / 4 * 4;
        let (mut lo, mut hi, mut bad) = (f32x4_splat(0.0), f32x4_splat(0.0), f32x4_splat(0.0));
        for at in (0..body).step_by(4) {
            let v = four(row, smoothing, at);
            // pmin(lo, v) = v < lo ? v : lo, as the portable loop's select.
            lo = f32x4_pmin(lo, v);
            hi = f32x4_pmax(hi, v);
            bad = f32x4_add(bad, f32x4_mul(v, f32x4_splat(0.0)));
        }
        let lanes = |v: v128| {
            [
                f32x4_extract_lane::<0>(v),
                f32x4_extract_lane::<1>(v),
                f32x4_extract_lane::<2>(v),
                f32x4_extract_lane::<3>(v),
            ]
        };
        let (mut lo_s, mut hi_s) = (0.0f32, 0.0f32);
        let mut bad_s = lanes(bad).iter().sum::<f32>();
        for (l, h) in lanes(lo).into_iter().zip(lanes(hi)) {
            lo_s = lo_s.min(l);
            hi_s = hi_s.max(h);
        }
        for k in body..row.len() {
            let v = one(row, smoothing, k);
            lo_s = if v < lo_s { v } else { lo_s };
            hi_s = if v > hi_s { v } else { hi_s };
            bad_s += v * 0.0;
        }
        if bad_s.is_nan() {
            return (f32::NAN, 0);
        }
        let Some(step) = Step::new(lo_s, hi_s, levels) else {
            out.fill(C::from_level(0.0));
            return (1.0, 0);
        };
        let (inverse, z, top) = (f32x4_splat(step.inverse), f32x4_splat(step.z), f32x4_splat(levels));
        let code = |at: usize| {
            let q = f32x4_nearest(f32x4_add(f32x4_mul(four(row, smoothing, at), inverse), z));
            i32x4_trunc_sat_f32x4(f32x4_pmin(top, f32x4_pmax(f32x4_splat(0.0), q)))
        };
        let stored = row.len() / C::PER_STORE * C::PER_STORE;
        let mut codes = [f32x4_splat(0.0); 4];
        for at in (0..stored).step_by(C::PER_STORE) {
            for (j, c) in codes.iter_mut().take(C::PER_STORE / 4).enumerate() {
                *c = code(at + 4 * j);
            }
            C::store(&codes[..C::PER_STORE / 4], &mut out[at..]);
        }
        for (k, o) in out.iter_mut().enumerate().skip(stored) {
            *o = C::from_level(step.code(one(row, smoothing, k)));
        }
        (step.t, step.z as i32)
    }
}

impl QuantizedWeights {
    /// `(x^, t)` of one row of activations as a product with these weights quantizes it: the
    /// row it really multiplies, `x^_k = m_k t (u_k - z)`, and its step `t` (for tests and the
    /// error bound).
    pub fn dequantized_row(&self, row: &[f32]) -> (Vec<f32>, f32) {
        let m = |k: usize| self.smoothing.get(k).map_or(1.0, |s| 1.0 / s);
        let smoothed: Vec<f32> = row.iter().enumerate().map(|(k, v)| v / m(k)).collect();
        let mut u = vec![0i16; row.len()];
        let (t, z) = quantize_row(&smoothed, self.bits().activation_levels(), &mut u);
        (u.iter().enumerate().map(|(k, &v)| m(k) * t * (v.level() - z) as f32).collect(), t)
    }

    /// `m_k`, the smoothing factor of input position `k` (1 without smoothing).
    pub fn smoothing_factor(&self, k: usize) -> f32 {
        self.smoothing.get(k).map_or(1.0, |s| 1.0 / s)
    }
}

thread_local! {
    /// The quantized activations, kept between products (they only grow).
    static ROWS: RefCell<QuantizedRows> = RefCell::new(QuantizedRows::default());
}

/// `y <- x W^T + bias` for `x` (`n x K`); row `i` of the result goes to `y[i * rs..][..N]`,
/// nothing else of `y` is read or written.
pub fn qgemm(
    kernel: Kernel,
    x: &[f32],
    n: usize,
    w: &QuantizedWeights,
    bias: &[f32],
    y: &mut [f32],
    rs: usize,
) {
    qgemm_with(kernel, dot_form(), x, n, w, bias, y, rs)
}

/// [`qgemm`] with the relaxed 8-bit micro-kernel in `form` (the same bits in every form).
#[allow(clippy::too_many_arguments)]
fn qgemm_with(
    kernel: Kernel,
    form: DotForm,
    x: &[f32],
    n: usize,
    w: &QuantizedWeights,
    bias: &[f32],
    y: &mut [f32],
    rs: usize,
) {
    let (out, inp) = (w.out, w.inp);
    assert_eq!(x.len(), n * inp, "x must be n x {inp}");
    assert_eq!(bias.len(), out, "one bias per output channel");
    assert!(
        n == 0 || (rs >= out && y.len() >= (n - 1) * rs + out),
        "y must hold n rows of {out} at stride {rs}"
    );
    if n == 0 || out == 0 {
        return;
    }
    ROWS.with(|rows| {
        let mut rows = rows.borrow_mut();
        rows.fill(kernel, x, (n, inp), &w.smoothing, w.bits());
        product((kernel, form), &rows, n, w, bias, y, rs);
    });
}

/// The blocked loops around the micro-kernel: each strip of `NR` channels (`K x 8` weights, in
/// L1) against every block of `MR` rows.
fn product(
    (kernel, form): (Kernel, DotForm),
    rows: &QuantizedRows,
    n: usize,
    w: &QuantizedWeights,
    bias: &[f32],
    y: &mut [f32],
    rs: usize,
) {
    let lanes = w.inp.div_ceil(4);
    if lanes == 0 {
        // K = 0: every product is the empty sum.
        (0..n).for_each(|i| y[i * rs..i * rs + w.out].copy_from_slice(bias));
        return;
    }
    let width = lanes * 4;
    let strip = lanes * NR * 4;
    let mut widened = Vec::new();
    for s in 0..w.out.div_ceil(NR) {
        let o0 = s * NR;
        let cols = NR.min(w.out - o0);
        let channels = Channels {
            o0,
            scales: &w.scales[o0..o0 + cols],
            sums: &w.sums[o0..o0 + cols],
            bias: &bias[o0..o0 + cols],
        };
        for i0 in (0..n).step_by(MR) {
            let rows_at = i0 * width..(i0 + MR) * width;
            let block = RowBlock { i0, count: MR.min(n - i0), scales: &rows.scales, zeros: &rows.zeros };
            match &w.packed {
                Packed::Bytes(p) if in_words(kernel, IntBits::Eight) => {
                    if i0 == 0 {
                        widen_strip(&p[s * strip..(s + 1) * strip], lanes, &mut widened);
                    }
                    let a: [&[i16]; MR] =
                        std::array::from_fn(|r| &rows.wide[rows_at.start + r * width..][..width]);
                    // Exact in i32: at most 127 * 127 * K in magnitude (the contract).
                    let acc = micro_kernel_words(kernel, 2 * lanes, a, &widened).map(|v| v as i32);
                    write_block_i32(kernel, &acc, &block, &channels, y, rs);
                }
                Packed::Bytes(p) => {
                    let a: [&[u8]; MR] =
                        std::array::from_fn(|r| &rows.values[rows_at.start + r * width..][..width]);
                    let acc = micro_kernel((kernel, form), lanes, a, &p[s * strip..(s + 1) * strip]);
                    write_block_i32(kernel, &acc, &block, &channels, y, rs);
                }
                Packed::Words(p) => {
                    let a: [&[i16]; MR] =
                        std::array::from_fn(|r| &rows.wide[rows_at.start + r * width..][..width]);
                    let acc = micro_kernel_words(kernel, 2 * lanes, a, &p[s * strip..(s + 1) * strip]);
                    write_block_i64(&acc, &block, &channels, y, rs);
                }
            }
        }
    }
}

/// The output channels `o0..o0 + scales.len()` of one strip: their `s_o`, `sum_k q[o,k]` and bias.
struct Channels<'a> {
    o0: usize,
    scales: &'a [f32],
    sums: &'a [i32],
    bias: &'a [f32],
}

/// The rows `i0..i0 + count` of one micro-kernel call, with every row's `t_i` and `z_i`.
struct RowBlock<'a> {
    i0: usize,
    count: usize,
    scales: &'a [f32],
    zeros: &'a [i32],
}

/// `y[i, o] = t_i s_o (acc - z_i sum_k q[o,k]) + b_o` for a block of 8-bit sums: a full strip
/// on the vector kernel four channels at a time in i32 (simd128; the true value
/// `sum_k (u_k - z_i) q[o,k]` is at most `127 * 127 * K` in magnitude, the contract's bound, so
/// wrapping arithmetic gives it exactly), anything else by [`write_block_i64`]: the same integer
/// and the same operations in the same order, so the same bits.
fn write_block_i32(
    kernel: Kernel,
    acc: &[i32; MR * NR],
    block: &RowBlock,
    ch: &Channels,
    y: &mut [f32],
    rs: usize,
) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if kernel == Kernel::Simd && ch.scales.len() == NR {
        return write_block_simd128(acc, block, ch, y, rs);
    }
    let _ = kernel;
    write_block_i64(&acc.map(i64::from), block, ch, y, rs);
}

/// [`write_block_i32`] for a full strip (`NR` channels), two vectors of four a row: the
/// channels' sums, scales and biases loaded once for the block.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn write_block_simd128(acc: &[i32; MR * NR], block: &RowBlock, ch: &Channels, y: &mut [f32], rs: usize) {
    use core::arch::wasm32::*;
    let (q, s, b) = (
        [lanes4(ch.sums, 0), lanes4(ch.sums, 4)],
        [lanes4(ch.scales, 0), lanes4(ch.scales, 4)],
        [lanes4(ch.bias, 0), lanes4(ch.bias, 4)],
    );
    for r in 0..block.count {
        let i = block.i0 + r;
        let (tv, zv) = (f32x4_splat(block.scales[i]), i32x4_splat(block.zeros[i]));
        let row = &mut y[i * rs + ch.o0..i * rs + ch.o0 + NR];
        for h in 0..2 {
            let value = f32x4_convert_i32x4(i32x4_sub(lanes4(acc, r * NR + 4 * h), i32x4_mul(zv, q[h])));
            let out = f32x4_add(f32x4_mul(f32x4_mul(tv, s[h]), value), b[h]);
            let at = &mut row[4 * h..4 * h + 4];
            // safety: `at` holds four f32s, 16 bytes; wasm stores need no alignment.
            unsafe { v128_store(at.as_mut_ptr() as *mut v128, out) };
        }
    }
}

/// Four 32-bit values of `s` from `at`, as one vector.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn lanes4<T: Copy>(s: &[T], at: usize) -> core::arch::wasm32::v128 {
    assert!(std::mem::size_of::<T>() == 4 && at + 4 <= s.len(), "four 32-bit values from {at}");
    // safety: the four values from `at` lie in `s` (asserted), 16 bytes; wasm loads need no
    // alignment.
    unsafe { core::arch::wasm32::v128_load(s.as_ptr().add(at) as *const core::arch::wasm32::v128) }
}

/// `y[i, o] = t_i s_o (acc - z_i sum_k q[o,k]) + b_o` for a block of sums in i64 (12-bit
/// products, and 8-bit ones off the vector path).
fn write_block_i64(acc: &[i64; MR * NR], block: &RowBlock, ch: &Channels, y: &mut [f32], rs: usize) {
    let cols = ch.scales.len();
    for r in 0..block.count {
        let i = block.i0 + r;
        let (t, z) = (block.scales[i], block.zeros[i] as i64);
        let row = &mut y[i * rs + ch.o0..i * rs + ch.o0 + cols];
        let acc = &acc[r * NR..r * NR + cols];
        let terms = row.iter_mut().zip(acc).zip(ch.sums).zip(ch.scales).zip(ch.bias);
        for ((((v, &a), &q), &s), &b) in terms {
            *v = t * s * (a - z * q as i64) as f32 + b;
        }
    }
}

/// `acc[r * NR + c] = sum_k a[r][k] * strip(c, k)` over `steps` steps of four positions.
fn micro_kernel(
    (kernel, form): (Kernel, DotForm),
    steps: usize,
    a: [&[u8]; MR],
    strip: &[i8],
) -> [i32; MR * NR] {
    assert!(
        strip.len() >= steps * STEP_BYTES && a.iter().all(|r| r.len() >= steps * 4),
        "a step past the operands"
    );
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128", feature = "relaxed-simd"))]
    if kernel == Kernel::Simd {
        let (a, b) = (a.map(|r| r.as_ptr()), strip.as_ptr());
        // safety: the assert above: every row of `a` holds `4 * steps` bytes and the strip
        // `STEP_BYTES * steps`, which is all either kernel reads.
        return unsafe {
            match form {
                DotForm::Fused => micro_kernel_simd128::<false>(steps, a, b),
                DotForm::Split => micro_kernel_simd128::<true>(steps, a, b),
            }
        };
    }
    let _ = (kernel, form);
    micro_kernel_portable(steps, a, strip)
}

/// The portable twin: plain integer loops.
fn micro_kernel_portable(steps: usize, a: [&[u8]; MR], strip: &[i8]) -> [i32; MR * NR] {
    let mut acc = [0i32; MR * NR];
    for (p, step) in strip.chunks_exact(STEP_BYTES).take(steps).enumerate() {
        for (r, row) in a.iter().enumerate() {
            let u = &row[p * 4..p * 4 + 4];
            for (c, q) in step.chunks_exact(4).enumerate() {
                acc[r * NR + c] += (0..4).map(|j| u[j] as i32 * q[j] as i32).sum::<i32>();
            }
        }
    }
    acc
}

/// The relaxed-SIMD micro-kernel: per step, two vectors of weights (channels 0-3 and 4-7, four
/// positions each) and each row's four activations broadcast; per row and vector one
/// `i32x4.relaxed_dot_i8x16_i7x16_add_s` ([`DotForm::Fused`]), or with `SPLIT`
/// ([`DotForm::Split`]) `i16x8.relaxed_dot_i8x16_i7x16_s` (pairs of products, at most
/// `2 * 127 * 127` in magnitude: exact in i16, so no engine's saturation applies), then
/// `i32x4.dot_i16x8_s` by ones (the two pairs into the lane) added into the accumulator. The same
/// integers either way.
///
/// # Safety
/// Each `a[r]` must be valid for `4 * steps` reads and `b` for `STEP_BYTES * steps`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128", feature = "relaxed-simd"))]
#[target_feature(enable = "simd128,relaxed-simd")]
unsafe fn micro_kernel_simd128<const SPLIT: bool>(
    steps: usize,
    a: [*const u8; MR],
    b: *const i8,
) -> [i32; MR * NR] {
    use core::arch::wasm32::*;
    let mut acc = [i32x4_splat(0); MR * 2];
    // Made once, held in a register: the fused instruction's lowering without VNNI makes it
    // again at every use.
    let ones = i16x8_splat(1);
    for p in 0..steps {
        // safety: p < steps: both loads lie in the strip's step p.
        let (b0, b1) = unsafe {
            (
                v128_load(b.add(p * STEP_BYTES) as *const v128),
                v128_load(b.add(p * STEP_BYTES + 16) as *const v128),
            )
        };
        for (r, row) in a.iter().enumerate() {
            // safety: p < steps: the row's bytes 4p..4p + 4.
            let u = unsafe { v128_load32_splat(row.add(p * 4) as *const u32) };
            // The activations (top bit clear) are the operand an engine may read as unsigned.
            for (j, w) in [(2 * r, b0), (2 * r + 1, b1)] {
                acc[j] = match SPLIT {
                    true => i32x4_add(acc[j], i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(w, u), ones)),
                    false => i32x4_relaxed_dot_i8x16_i7x16_add(w, u, acc[j]),
                };
            }
        }
    }
    let mut out = [0i32; MR * NR];
    for (chunk, v) in out.chunks_exact_mut(4).zip(acc) {
        // safety: four i32 lanes into four i32s.
        unsafe { v128_store(chunk.as_mut_ptr() as *mut v128, v) };
    }
    out
}

/// A strip of 8-bit weights (`steps` steps of four positions, channel-major) as the 12-bit
/// micro-kernel's words (`2 * steps` steps of two positions): each step's bytes of positions
/// `0, 1` for the eight channels, then of positions `2, 3`, sign-extended. The same integers.
fn widen_strip(strip: &[i8], steps: usize, out: &mut Vec<i16>) {
    assert!(strip.len() >= steps * STEP_BYTES, "a step past the strip");
    out.clear();
    out.resize(steps * 2 * STEP_WORDS, 0);
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::*;
        for (p, words) in out.chunks_exact_mut(2 * STEP_WORDS).enumerate() {
            // safety: p < steps: the step's 32 bytes lie in the strip (asserted); wasm loads
            // need no alignment.
            let (b0, b1) = unsafe {
                let at = strip.as_ptr().add(p * STEP_BYTES);
                (v128_load(at as *const v128), v128_load(at.add(16) as *const v128))
            };
            let first = i8x16_shuffle::<0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29>(b0, b1);
            let second = i8x16_shuffle::<2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31>(b0, b1);
            let wide = [
                i16x8_extend_low_i8x16(first),
                i16x8_extend_high_i8x16(first),
                i16x8_extend_low_i8x16(second),
                i16x8_extend_high_i8x16(second),
            ];
            for (chunk, v) in words.chunks_exact_mut(8).zip(wide) {
                // safety: eight i16s, 16 bytes; wasm stores need no alignment.
                unsafe { v128_store(chunk.as_mut_ptr() as *mut v128, v) };
            }
        }
        return;
    }
    #[allow(unreachable_code)]
    for (p, words) in out.chunks_exact_mut(2 * STEP_WORDS).enumerate() {
        let step = &strip[p * STEP_BYTES..(p + 1) * STEP_BYTES];
        for (half, words) in words.chunks_exact_mut(STEP_WORDS).enumerate() {
            for (c, pair) in words.chunks_exact_mut(2).enumerate() {
                pair[0] = step[c * 4 + 2 * half] as i16;
                pair[1] = step[c * 4 + 2 * half + 1] as i16;
            }
        }
    }
}

/// `acc[r * NR + c] = sum_k a[r][k] * strip(c, k)` over `steps` steps of two positions, for
/// 12-bit products (16-bit words): exact in i64 (runs of [`WORD_CHUNK`] positions summed in i32 first).
fn micro_kernel_words(kernel: Kernel, steps: usize, a: [&[i16]; MR], strip: &[i16]) -> [i64; MR * NR] {
    assert!(
        strip.len() >= steps * STEP_WORDS && a.iter().all(|r| r.len() >= steps * 2),
        "a step past the operands"
    );
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if kernel == Kernel::Simd {
        // safety: the assert above: every row of `a` holds `2 * steps` words and the strip
        // `STEP_WORDS * steps`, which is all the kernel reads.
        return unsafe { micro_kernel_words_simd128(steps, a.map(|r| r.as_ptr()), strip.as_ptr()) };
    }
    let _ = kernel;
    let mut acc = [0i64; MR * NR];
    for (p, step) in strip.chunks_exact(STEP_WORDS).take(steps).enumerate() {
        for (r, row) in a.iter().enumerate() {
            let u = &row[p * 2..p * 2 + 2];
            for (c, q) in step.chunks_exact(2).enumerate() {
                acc[r * NR + c] += (u[0] as i32 * q[0] as i32 + u[1] as i32 * q[1] as i32) as i64;
            }
        }
    }
    acc
}

/// The 12-bit micro-kernel (simd128, both builds): per step, two vectors of weights (channels
/// 0-3 and 4-7, two positions each) and each row's two codes broadcast; one `i32x4.dot_i16x8_s`
/// per row and vector, the i32 lanes added into i64 every [`WORD_CHUNK`] positions.
///
/// # Safety
/// Each `a[r]` must be valid for `2 * steps` reads and `b` for `STEP_WORDS * steps`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[target_feature(enable = "simd128")]
unsafe fn micro_kernel_words_simd128(steps: usize, a: [*const i16; MR], b: *const i16) -> [i64; MR * NR] {
    use core::arch::wasm32::*;
    let mut total = [0i64; MR * NR];
    for start in (0..steps).step_by(WORD_CHUNK / 2) {
        let mut acc = [i32x4_splat(0); MR * 2];
        for p in start..steps.min(start + WORD_CHUNK / 2) {
            // safety: p < steps: both loads lie in the strip's step p.
            let (b0, b1) = unsafe {
                (
                    v128_load(b.add(p * STEP_WORDS) as *const v128),
                    v128_load(b.add(p * STEP_WORDS + 8) as *const v128),
                )
            };
            for r in 0..MR {
                // safety: p < steps: the row's words 2p..2p + 2.
                let u = unsafe { v128_load32_splat(a[r].add(p * 2) as *const u32) };
                acc[2 * r] = i32x4_add(acc[2 * r], i32x4_dot_i16x8(b0, u));
                acc[2 * r + 1] = i32x4_add(acc[2 * r + 1], i32x4_dot_i16x8(b1, u));
            }
        }
        let mut lanes = [0i32; 4];
        for (j, v) in acc.into_iter().enumerate() {
            // safety: four i32 lanes into four i32s.
            unsafe { v128_store(lanes.as_mut_ptr() as *mut v128, v) };
            total[j * 4..j * 4 + 4].iter_mut().zip(lanes).for_each(|(t, l)| *t += l as i64);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A deterministic value in about [-1, 1] with some large ones (outlier channels).
    fn value(seed: usize, i: usize) -> f32 {
        let h = crate::attention::synthetic::hash32((seed as u32).wrapping_mul(0x9e37_79b9) ^ i as u32);
        let v = (h as f32 / u32::MAX as f32) * 2.0 - 1.0;
        if h.is_multiple_of(97) {
            v * 8.0
        } else {
            v
        }
    }

    fn filled(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| value(seed, i)).collect()
    }

    /// `(n, K, N)`: empty, one, odd, every remainder of MR, NR and four, and the trained
    /// models' projection shapes.
    const SHAPES: &[(usize, usize, usize)] = &[
        (0, 5, 3),
        (3, 0, 5),
        (1, 1, 1),
        (2, 3, 7),
        (5, 9, 9),
        (7, 13, 17),
        (4, 4, 8),
        (9, 33, 15),
        (13, 384, 384),
        (6, 384, 1536),
        (11, 1536, 384),
        (17, 768, 31),
    ];

    /// The weights of the table's cases: plain and smoothed by activation maxima of a wide
    /// range, at both widths.
    fn variants(w: &[f32], m: usize, k: usize) -> Vec<QuantizedWeights> {
        let maxima: Vec<f32> = (0..k).map(|j| 0.1 + 10.0 * value(99, j).abs()).collect();
        [IntBits::Eight, IntBits::Twelve]
            .into_iter()
            .flat_map(|bits| {
                [
                    QuantizedWeights::with_bits(w, m, k, bits),
                    QuantizedWeights::smoothed(w, m, k, &maxima, bits),
                ]
            })
            .collect()
    }

    #[test]
    fn the_integer_product_equals_f64_on_the_dequantized_operands_and_meets_the_stated_bound() {
        for kernel in Kernel::ALL {
            for &(n, k, m) in SHAPES {
                let (x, w, bias) = (filled(n * k, 1), filled(m * k, 2), filled(m, 3));
                for q in variants(&w, m, k) {
                    check_product(kernel, &x, n, &w, &q, &bias);
                }
            }
        }
    }

    /// [`qgemm`] against the f64 product of the dequantized operands (to f32 rounding) and of
    /// the exact ones (within the contract's bound), into NaN-poisoned rows wider than the block.
    fn check_product(kernel: Kernel, x: &[f32], n: usize, w: &[f32], q: &QuantizedWeights, bias: &[f32]) {
        let (k, m) = (q.inp(), q.out());
        let case = format!("{kernel:?} {n}x{k}x{m} smoothed {} {:?}", !q.smoothing().is_empty(), q.bits());
        let wq = q.dequantized();
        let rs = m + 3;
        let mut y = vec![f32::NAN; n * rs];
        qgemm(kernel, x, n, q, bias, &mut y, rs);
        for i in 0..n {
            let row = &x[i * k..(i + 1) * k];
            let (xq, t) = q.dequantized_row(row);
            for o in 0..m {
                let got = y[i * rs + o] as f64;
                let terms = |a: &[f32], b: &[f32]| -> (f64, f64) {
                    let p = (0..k).map(|j| a[j] as f64 * b[o * k + j] as f64);
                    (p.clone().sum::<f64>() + bias[o] as f64, p.map(f64::abs).sum::<f64>() + 1.0)
                };
                let ((deq, scale), (exact, _)) = (terms(&xq, &wq), terms(row, w));
                assert!(
                    (got - deq).abs() <= 1e-6 * scale,
                    "{case} at ({i}, {o}): {got} against {deq} dequantized"
                );
                let bound: f64 = (0..k)
                    .map(|j| {
                        let mk = q.smoothing_factor(j) as f64;
                        mk * t as f64 / 2.0 * (wq[o * k + j] as f64).abs()
                            + q.scale(o) as f64 / (2.0 * mk) * (row[j] as f64).abs()
                    })
                    .sum();
                let error = (got - exact).abs();
                assert!(
                    error <= bound * (1.0 + 1e-5) + 1e-6 * scale,
                    "{case} at ({i}, {o}): error {error} over {bound}"
                );
            }
            for o in m..rs {
                assert!(y[i * rs + o].is_nan(), "{case}: wrote ({i}, {o}) outside the block");
            }
        }
    }

    /// The simd128 build's 8-bit products read each strip widened into the 12-bit kernel's
    /// layout: every weight where the words layout puts it, zeros past the channels and the
    /// positions (natively the portable loop, in the browser the shuffles).
    #[test]
    fn a_widened_strip_holds_the_same_weights_in_the_words_layout() {
        for (m, k) in [(13, 9), (8, 4), (3, 1), (17, 33)] {
            let q = QuantizedWeights::new(&filled(m * k, 7), m, k);
            let Packed::Bytes(bytes) = &q.packed else { panic!("8-bit weights are bytes") };
            let lanes = k.div_ceil(4);
            let strip = lanes * STEP_BYTES;
            for s in 0..m.div_ceil(NR) {
                let mut words = vec![i16::MIN; 3];
                widen_strip(&bytes[s * strip..(s + 1) * strip], lanes, &mut words);
                assert_eq!(words.len(), lanes * 2 * STEP_WORDS, "{m}x{k}");
                for c in 0..NR {
                    for j in 0..lanes * 4 {
                        let o = s * NR + c;
                        let want = if o < m && j < k { q.at(o, j) } else { 0 };
                        let got = words[packed_index(IntBits::Twelve, lanes, c, j)] as i32;
                        assert_eq!(got, want, "{m}x{k}: channel {o}, position {j}");
                    }
                }
            }
        }
    }

    #[test]
    fn both_kernels_give_the_same_bits() {
        for &(n, k, m) in SHAPES {
            let (x, w, bias) = (filled(n * k, 4), filled(m * k, 5), filled(m, 6));
            for q in variants(&w, m, k) {
                let run = |kernel, form| {
                    let mut y = vec![f32::NAN; n * m];
                    qgemm_with(kernel, form, &x, n, &q, &bias, &mut y, m);
                    y
                };
                let b = run(Kernel::Scalar, DotForm::Fused);
                for form in DotForm::ALL {
                    let a = run(Kernel::Simd, form);
                    let same = a.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{n}x{k}x{m} {:?} {form:?}: the kernels differ", q.bits());
                }
            }
        }
    }

    #[test]
    fn the_faster_dot_form_is_chosen_and_named() {
        assert_eq!((by_time(2.0, 1.0), by_time(1.0, 2.0)), (DotForm::Split, DotForm::Fused));
        assert_eq!((by_time(1.0, 1.0), by_time(f64::NAN, 1.0)), (DotForm::Fused, DotForm::Fused));
        for form in DotForm::ALL {
            assert_eq!(DotForm::from_key(form.key()), Some(form));
        }
        assert_eq!(DotForm::from_key("vnni"), None);
        // A build with one kernel times nothing; the relaxed build answers either form (on a
        // clock that moves 10 ms a reading: one run a sample).
        let now = std::cell::Cell::new(0.0);
        let chosen = faster_dot_form(&|| {
            now.set(now.get() + 10.0);
            now.get()
        });
        assert!(DOT_FORMS_DIFFER || chosen == DotForm::Fused);
    }

    #[test]
    fn a_trial_waits_for_the_optimized_code_before_it_answers() {
        let answer = |rounds: &[[f64; 2]]| {
            let mut trial = DotFormTrial::new();
            rounds
                .iter()
                .enumerate()
                .map(|(i, &t)| (i + 1, trial.record(t)))
                .find_map(|(i, f)| f.map(|f| (i, f)))
        };
        // Baseline code for the fused form until round 5, then optimized: the answer waits for
        // two steady rounds after the last improvement.
        let late = [
            [0.5, 0.09],
            [0.4, 0.085],
            [0.45, 0.086],
            [0.42, 0.085],
            [0.05, 0.085],
            [0.06, 0.09],
            [0.055, 0.088],
        ];
        assert_eq!(answer(&late), Some((7, DotForm::Fused)));
        // Steady from the start: five rounds.
        assert_eq!(answer(&[[0.1, 0.08]; 9]), Some((5, DotForm::Split)));
        // Never steady (each round 20 % faster): sixteen rounds, then the faster so far.
        let falling: Vec<[f64; 2]> = (0..20).map(|i| [0.8f64.powi(i), 0.9 * 0.8f64.powi(i)]).collect();
        assert_eq!(answer(&falling), Some((16, DotForm::Split)));
    }

    #[test]
    fn the_largest_sums_are_exact_at_either_width() {
        // Every code at its top level against every weight at its largest: 4095 * 2047 * K
        // overflows an i32 from K = 257; the 12-bit kernel's runs of WORD_CHUNK positions must not.
        for &(n, k) in &[(5, 256), (3, 257), (4, 1536), (7, 4099)] {
            let (x, w) = (vec![1.0f32; n * k], vec![0.5f32; 9 * k]);
            for bits in [IntBits::Eight, IntBits::Twelve] {
                let q = QuantizedWeights::with_bits(&w, 9, k, bits);
                assert!(
                    (0..9).all(|o| q.at(o, k - 1) as f32 == bits.weight_levels()),
                    "{bits:?}: the top level"
                );
                for (kernel, form) in Kernel::ALL.into_iter().flat_map(|k| DotForm::ALL.map(|f| (k, f))) {
                    let mut y = vec![f32::NAN; n * 9];
                    qgemm_with(kernel, form, &x, n, &q, &[1.0; 9], &mut y, 9);
                    let want = 0.5 * k as f32 + 1.0;
                    for v in &y {
                        assert!(
                            (v - want).abs() <= 1e-6 * want,
                            "{kernel:?} {form:?} {bits:?} K = {k}: {v} for {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_error_is_rounding_noise_not_a_bias() {
        // Rounding to the nearest level leaves an error uniform in +-step/2 (variance step^2/12)
        // on each operand; the products' squared error stays near the sum of those variances.
        // Truncation, or a zero point off by one, would be 4 times as much or more.
        let (n, k, m) = (16, 384, 384);
        let (x, w) = (filled(n * k, 7), filled(m * k, 8));
        let q = QuantizedWeights::new(&w, m, k);
        let mut y = vec![0.0; n * m];
        qgemm(Kernel::Simd, &x, n, &q, &vec![0.0; m], &mut y, m);
        let (mut err, mut predicted) = (0.0f64, 0.0f64);
        for i in 0..n {
            let (_, t) = q.dequantized_row(&x[i * k..(i + 1) * k]);
            for o in 0..m {
                let exact: f64 = (0..k).map(|j| x[i * k + j] as f64 * w[o * k + j] as f64).sum();
                err += (y[i * m + o] as f64 - exact).powi(2);
                let s = q.scale(o) as f64;
                predicted += (0..k)
                    .map(|j| {
                        ((w[o * k + j] as f64).powi(2) * (t as f64).powi(2)
                            + (x[i * k + j] as f64).powi(2) * s * s)
                            / 12.0
                    })
                    .sum::<f64>();
            }
        }
        let ratio = err / predicted;
        assert!((0.5..1.5).contains(&ratio), "squared error {ratio} times the rounding noise's");
    }

    #[test]
    fn non_finite_rows_and_channels_give_nan_and_zero_rows_give_the_bias() {
        let (n, k, m) = (3, 6, 5);
        let mut x = filled(n * k, 9);
        x[k + 2] = f32::NAN;
        x[2 * k..].fill(0.0);
        let mut w = filled(m * k, 10);
        w[3 * k + 1] = f32::INFINITY;
        let bias = filled(m, 11);
        let q = QuantizedWeights::new(&w, m, k);
        for kernel in Kernel::ALL {
            let mut y = vec![0.0; n * m];
            qgemm(kernel, &x, n, &q, &bias, &mut y, m);
            assert!(y[m..2 * m].iter().all(|v| v.is_nan()), "{kernel:?}: a NaN input row gives NaN");
            assert!(
                y[3].is_nan() && y[2 * m + 3].is_nan(),
                "{kernel:?}: an infinite weight's channel is NaN"
            );
            for o in [0, 1, 2, 4] {
                assert_eq!(y[2 * m + o], bias[o], "{kernel:?}: a zero row gives the bias");
                assert!(y[o].is_finite(), "{kernel:?}: finite rows stay finite");
            }
        }
    }

    #[test]
    fn selected_channels_and_inputs_compute_those_parts_of_the_whole_product() {
        let (n, k, m) = (5, 24, 19);
        let (x, w, bias) = (filled(n * k, 12), filled(m * k, 13), filled(m, 14));
        for bits in [IntBits::Eight, IntBits::Twelve] {
            check_selections(&x, n, &QuantizedWeights::with_bits(&w, m, k, bits), &bias);
        }
    }

    fn check_selections(x: &[f32], n: usize, q: &QuantizedWeights, bias: &[f32]) {
        let m = q.out();
        let channels = [17, 2, 3, 11];
        let sel = q.select_channels(&channels);
        let mut whole = vec![0.0; n * m];
        qgemm(Kernel::Scalar, x, n, q, bias, &mut whole, m);
        let mut part = vec![0.0; n * channels.len()];
        let sel_bias: Vec<f32> = channels.iter().map(|&o| bias[o]).collect();
        qgemm(Kernel::Scalar, x, n, &sel, &sel_bias, &mut part, channels.len());
        for i in 0..n {
            for (c, &o) in channels.iter().enumerate() {
                assert_eq!(part[i * channels.len() + c].to_bits(), whole[i * m + o].to_bits(), "({i}, {o})");
            }
        }
        // Inputs: the kept columns keep their bytes and their channel's scale.
        let ranges = [3..7, 12..20];
        let kept = q.select_inputs(&ranges);
        assert_eq!((kept.out(), kept.inp()), (m, 12));
        for o in 0..m {
            assert_eq!(kept.scale(o), q.scale(o));
            for (j, k) in ranges.iter().flat_map(|r| r.clone()).enumerate() {
                assert_eq!(kept.at(o, j), q.at(o, k), "({o}, {k})");
            }
        }
    }
}
