//! The micro-kernels: `MR x NR` blocks of integer sums over a strip of packed weights, at 8 bits
//! (the relaxed SIMD forms and the portable twin) and at 12 bits (simd128 `i32x4.dot_i16x8_s`
//! and its twin), the widening of an 8-bit strip into words for the simd128 build, and the
//! unpacking of a strip of 12-bit weights into words.

use super::layout::DotForm;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::layout::WORD_CHUNK;
use super::layout::{MR, NR, STEP_BYTES, STEP_WORDS};
use crate::cpu::Kernel;

/// `acc[r * NR + c] = sum_k a[r][k] * strip(c, k)` over `steps` steps of four positions.
pub(super) fn micro_kernel(
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
pub(super) fn widen_strip(strip: &[i8], steps: usize, out: &mut Vec<i16>) {
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

/// A strip of 12-bit weights held in a byte and a half each ([`super::weights::TwelveBits`]:
/// `low` the words' low bytes, `high` their top nibbles, two a byte) as the 12-bit
/// micro-kernel's words, in the same order. The same integers.
pub(super) fn unpack_twelve(low: &[u8], high: &[u8], out: &mut Vec<i16>) {
    assert!(low.len().is_multiple_of(16) && high.len() * 2 == low.len(), "a strip of 12-bit weights");
    out.clear();
    out.resize(low.len(), 0);
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::*;
        let (nibble, eight) = (u8x16_splat(0x0f), i8x16_splat(8));
        for (j, words) in out.chunks_exact_mut(16).enumerate() {
            // safety: j < low.len() / 16: 16 bytes of `low` and 8 of `high` from there lie in
            // them (asserted); wasm loads need no alignment.
            let (lo, hi) = unsafe {
                (
                    v128_load(low.as_ptr().add(16 * j) as *const v128),
                    v128_load64_zero(high.as_ptr().add(8 * j) as *const u64),
                )
            };
            // Each byte's two nibbles in order (the low one first), then sign-extended:
            // `(n ^ 8) - 8` takes 8..15 to -8..-1.
            let nibbles = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(
                v128_and(hi, nibble),
                u8x16_shr(hi, 4),
            );
            let top = i8x16_sub(v128_xor(nibbles, eight), eight);
            // Little-endian words: the low byte, then the signed top byte.
            let first = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(lo, top);
            let second =
                i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(lo, top);
            // safety: `words` holds sixteen i16s, 32 bytes; wasm stores need no alignment.
            unsafe {
                v128_store(words.as_mut_ptr() as *mut v128, first);
                v128_store(words.as_mut_ptr().add(8) as *mut v128, second);
            }
        }
        return;
    }
    #[allow(unreachable_code)]
    for (i, word) in out.iter_mut().enumerate() {
        let nibble = (high[i / 2] >> (4 * (i % 2))) << 4;
        *word = (nibble as i8 >> 4) as i16 * 256 + low[i] as i16;
    }
}

/// `acc[r * NR + c] = sum_k a[r][k] * strip(c, k)` over `steps` steps of two positions, for
/// 12-bit products (16-bit words): exact in i64 (runs of [`WORD_CHUNK`] positions summed in i32 first).
pub(super) fn micro_kernel_words(
    kernel: Kernel,
    steps: usize,
    a: [&[i16]; MR],
    strip: &[i16],
) -> [i64; MR * NR] {
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
