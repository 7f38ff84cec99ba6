//! Activation quantization: each row of a product's input asymmetric per row, 7-bit codes in
//! bytes or 12-bit ones in words, on the vector kernel four values at a time (`vector_rows`) with
//! the same codes as the portable loops.

use super::layout::{IntBits, MR};
use super::weights::QuantizedWeights;
use crate::cpu::Kernel;

/// Whether a product's activation codes go in 16-bit words: at 12 bits always; at 8 bits on the
/// vector kernel of the simd128 build, whose fastest integer multiply is `i32x4.dot_i16x8_s` on
/// words (the relaxed dot product on bytes is not there): its 8-bit products run the 12-bit
/// micro-kernel on the same integers, each strip's bytes widened once per product
/// ([`widen_strip`]).
pub(super) fn in_words(kernel: Kernel, bits: IntBits) -> bool {
    bits == IntBits::Twelve || (WIDENED_BYTES && kernel == Kernel::Simd)
}

/// The simd128 build without relaxed SIMD: 8-bit products on the vector kernel go through words.
pub(super) const WIDENED_BYTES: bool =
    cfg!(all(target_arch = "wasm32", target_feature = "simd128", not(feature = "relaxed-simd")));

/// Rows of activations quantized for one product: `u` (`rows x 4 * lanes`, padded with zero
/// rows to a multiple of [`MR`] and zero positions to a multiple of four), as 7-bit codes in
/// bytes or, for a 12-bit product, 12-bit codes in words; `t_i` and `z_i`.
#[derive(Debug, Default)]
pub(super) struct QuantizedRows {
    pub(super) values: Vec<u8>,
    pub(super) wide: Vec<i16>,
    pub(super) scales: Vec<f32>,
    pub(super) zeros: Vec<i32>,
    /// One row divided by the smoothing factors.
    smoothed: Vec<f32>,
}

impl QuantizedRows {
    /// Quantizes `x` (`n x inp`) into these buffers (reused between products): on the vector
    /// kernel four values at a time ([`vector_rows`]), the same codes as the portable loops.
    pub(super) fn fill(
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
pub(super) trait Code: Copy {
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
pub(super) fn quantize_row<C: Code>(row: &[f32], levels: f32, out: &mut [C]) -> (f32, i32) {
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

    use super::super::layout::lanes4;
    use super::{Code, Step};

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
