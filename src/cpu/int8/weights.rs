//! Weight quantization and packing: a matrix quantized per output channel (8 or 12 bits,
//! optionally smoothed), packed in strips of `NR` channels for the micro-kernels.

use std::ops::Range;

use super::layout::{step_positions, IntBits, NR};

/// The packed weights: strips of `NR` (8) channels, each a run of steps of one 32-bit lane of
/// input positions per channel (four bytes or two words), channel-major within a step; the
/// strip past `N` and the positions past `K` (padded to a multiple of four) are zero.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Packed {
    Bytes(Vec<i8>),
    Twelve(TwelveBits),
}

/// 12-bit weights in the words' layout, a byte and a half each: word `i` is
/// `high_i * 256 + low[i]`, its low byte in `low` and its top four bits (signed: `|q| <= 2047`
/// needs no more) in nibble `i % 2` of `high[i / 2]`, the low nibble first. The micro-kernel reads
/// words: each strip is unpacked once per product ([`super::kernels::unpack_twelve`]), as the
/// simd128 build widens its bytes. In 16-bit words GPT-2 Large's `W_2` alone took 118 MB more,
/// what kept its tab over 1.5x its 8-bit weights (BENCHMARKS.md section 28).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TwelveBits {
    pub(super) low: Vec<u8>,
    pub(super) high: Vec<u8>,
}

impl TwelveBits {
    /// `len` zero words (`len` even).
    fn zeros(len: usize) -> Self {
        assert!(len.is_multiple_of(2), "12-bit weights come in pairs");
        TwelveBits { low: vec![0; len], high: vec![0; len / 2] }
    }

    /// Sets the zero word `i` to `v` (`|v| <= 2047`).
    fn set(&mut self, i: usize, v: i32) {
        debug_assert!(v.abs() <= 2047, "{v} is not a 12-bit weight");
        self.low[i] = v as u8;
        self.high[i / 2] |= (((v >> 8) & 0xf) as u8) << (4 * (i % 2));
    }

    /// Word `i`.
    pub(super) fn word(&self, i: usize) -> i16 {
        let nibble = (self.high[i / 2] >> (4 * (i % 2))) << 4;
        (nibble as i8 >> 4) as i16 * 256 + self.low[i] as i16
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        self.low.len() + self.high.len()
    }
}

/// A weight matrix `W` (`N x K`) quantized per output channel and packed for the micro-kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedWeights {
    pub(super) out: usize,
    pub(super) inp: usize,
    /// `s_o` per output channel.
    pub(super) scales: Vec<f32>,
    /// `sum_k q[o,k]` per output channel (the zero point's correction).
    pub(super) sums: Vec<i32>,
    pub(super) packed: Packed,
    /// Per input position `k`, `1 / m_k`: the activations are quantized as `x[i,k] / m_k`
    /// against weights `W[o,k] m_k` (smoothing, see [`QuantizedWeights::smoothed`]); empty
    /// when every `m_k` is 1.
    pub(super) smoothing: Vec<f32>,
}

impl QuantizedWeights {
    /// `w` (`out x inp`, row-major) quantized to 8 bits. A channel of zeros gets scale 1 (its
    /// bytes are 0); a non-finite weight gives its channel a NaN scale, so its outputs are NaN.
    pub fn new(w: &[f32], out: usize, inp: usize) -> Self {
        Self::with_bits(w, out, inp, IntBits::Eight)
    }

    /// `w` quantized to `bits`.
    pub fn with_bits(w: &[f32], out: usize, inp: usize, bits: IntBits) -> Self {
        Self::scaled_by(w, out, inp, None, bits)
    }

    /// `w` with each input position `k`'s weights multiplied by `factors[k]` (none: by 1),
    /// quantized to `bits`: each value scaled as it is read, so no scaled copy of `w` is ever
    /// held (GPT-2 Large's output head is 257 MB in f32, and a wasm memory never shrinks after
    /// such a peak: BENCHMARKS.md section 27).
    fn scaled_by<W: Copy + Into<f32>>(
        w: &[W],
        out: usize,
        inp: usize,
        factors: Option<&[f32]>,
        bits: IntBits,
    ) -> Self {
        assert_eq!(w.len(), out * inp, "W must be out x inp");
        let levels = bits.weight_levels();
        let value = |o: usize, k: usize| match factors {
            Some(m) => w[o * inp + k].into() * m[k],
            None => w[o * inp + k].into(),
        };
        let mut row = vec![0.0f32; inp];
        let scales: Vec<f32> = (0..out)
            .map(|o| {
                row.iter_mut().enumerate().for_each(|(k, v)| *v = value(o, k));
                channel_scale(&row, levels)
            })
            .collect();
        let inverse: Vec<f32> = scales.iter().map(|s| 1.0 / s).collect();
        Self::from_fn(out, inp, scales, bits, |o, k| {
            (value(o, k) * inverse[o]).round().clamp(-levels, levels) as i32
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
    /// `w` may be f32 or the f16 values of a model file ([`half::f16`]), each widened as it is
    /// read: the same bits as the f32 matrix of the same values.
    pub fn smoothed<W: Copy + Into<f32>>(
        w: &[W],
        out: usize,
        inp: usize,
        input_max: &[f32],
        bits: IntBits,
    ) -> Self {
        assert_eq!(input_max.len(), inp, "one activation maximum per input position");
        let factors: Vec<f32> = (0..inp)
            .map(|k| {
                let w_k = (0..out).map(|o| w[o * inp + k].into().abs()).fold(0.0f32, f32::max);
                let m = (input_max[k] / w_k).sqrt();
                if m.is_finite() && m > 0.0 {
                    m
                } else {
                    1.0
                }
            })
            .collect();
        let mut q = Self::scaled_by(w, out, inp, Some(&factors), bits);
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
                let mut p = TwelveBits::zeros(len);
                put(&mut |i, v| p.set(i, v));
                Packed::Twelve(p)
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
            Packed::Twelve(_) => IntBits::Twelve,
        }
    }

    /// Bytes the quantized weights take: the packed weights, the per-channel scales and sums,
    /// and the smoothing factors.
    pub fn bytes(&self) -> usize {
        let packed = match &self.packed {
            Packed::Bytes(p) => p.len(),
            Packed::Twelve(p) => p.bytes(),
        };
        packed + 8 * self.out + 4 * self.smoothing.len()
    }

    /// The quantized weight `q[o, k]`.
    pub fn at(&self, o: usize, k: usize) -> i32 {
        assert!(o < self.out && k < self.inp, "({o}, {k}) outside {} x {}", self.out, self.inp);
        let i = packed_index(self.bits(), self.inp.div_ceil(4), o, k);
        match &self.packed {
            Packed::Bytes(p) => p[i] as i32,
            Packed::Twelve(p) => p.word(i) as i32,
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
pub(super) fn packed_index(bits: IntBits, lanes: usize, o: usize, k: usize) -> usize {
    let per = step_positions(bits);
    let step = NR * per;
    o / NR * lanes * NR * 4 + k / per * step + o % NR * per + k % per
}

/// `s_o = max |w| / levels` for one channel: 1 for a channel of zeros, NaN if any weight is
/// not finite.
pub(super) fn channel_scale(row: &[f32], levels: f32) -> f32 {
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
