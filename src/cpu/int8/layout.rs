//! The 8-bit product's shared layout: the micro-kernel's block (`MR x NR`), a step of packed
//! weights at either width, the integers' widths ([`IntBits`]) and the relaxed micro-kernel's
//! two forms ([`DotForm`]), and a vector load the vector paths share.

/// Rows of `y` a micro-kernel call produces.
pub(super) const MR: usize = 4;
/// Columns (output channels) of `y` a micro-kernel call produces: two vectors of four.
pub(super) const NR: usize = 8;
/// Input positions of one step of the packed weights: four bytes or two 16-bit words a channel,
/// one 32-bit lane of a vector either way.
pub(super) const fn step_positions(bits: IntBits) -> usize {
    match bits {
        IntBits::Eight => 4,
        IntBits::Twelve => 2,
    }
}
/// Weights of one step of the packed weights: `NR` channels times one lane of positions.
pub(super) const STEP_BYTES: usize = NR * 4;
pub(super) const STEP_WORDS: usize = NR * 2;
/// Positions a 12-bit micro-kernel sums in i32 before adding into i64: `4095 * 2047 * 256`
/// is below `2^31`.
pub const WORD_CHUNK: usize = 256;

/// The integers of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntBits {
    /// Signed bytes `[-127, 127]` for the weights against 7-bit codes `[0, 127]` for the
    /// activations: the relaxed dot product's operands.
    Eight,
    /// 12-bit weights `[-2047, 2047]` (held in a byte and a half, read as 16-bit words) against
    /// 12-bit codes `[0, 4095]` in 16-bit words:
    /// for a product whose 8-bit weights and 7-bit activations cost the model too much (`W_2`).
    Twelve,
}

impl IntBits {
    /// The largest quantized weight magnitude.
    pub(super) fn weight_levels(self) -> f32 {
        match self {
            IntBits::Eight => 127.0,
            IntBits::Twelve => 2047.0,
        }
    }

    /// The largest activation code.
    pub(super) fn activation_levels(self) -> f32 {
        match self {
            IntBits::Eight => 127.0,
            IntBits::Twelve => 4095.0,
        }
    }
}

/// Four 32-bit values of `s` from `at`, as one vector.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(super) fn lanes4<T: Copy>(s: &[T], at: usize) -> core::arch::wasm32::v128 {
    assert!(std::mem::size_of::<T>() == 4 && at + 4 <= s.len(), "four 32-bit values from {at}");
    // safety: the four values from `at` lie in `s` (asserted), 16 bytes; wasm loads need no
    // alignment.
    unsafe { core::arch::wasm32::v128_load(s.as_ptr().add(at) as *const core::arch::wasm32::v128) }
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
