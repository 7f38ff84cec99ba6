//! The blocked loops of the 8-bit product: the activations quantized once, then each strip of
//! `NR` channels (its weights in L1) against every block of `MR` rows, and the integer sums
//! scaled back into f32.

use std::cell::RefCell;

use super::activations::{in_words, QuantizedRows};
use super::kernels::{micro_kernel, micro_kernel_words, unpack_twelve, widen_strip};
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::layout::lanes4;
use super::layout::{DotForm, IntBits, MR, NR};
use super::weights::{Packed, QuantizedWeights};
use crate::cpu::Kernel;

thread_local! {
    /// The quantized activations, kept between products (they only grow).
    static ROWS: RefCell<QuantizedRows> = RefCell::new(QuantizedRows::default());
}

/// [`super::qgemm`] with the relaxed 8-bit micro-kernel in `form` (the same bits in every form).
#[allow(clippy::too_many_arguments)]
pub(super) fn qgemm_with(
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
/// L1) against every block of `MR` rows; a strip the micro-kernel reads as words (12-bit
/// weights, and 8-bit ones in the simd128 build) is made into words once, before its first block.
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
                Packed::Twelve(p) => {
                    if i0 == 0 {
                        let (low, high) = (s * strip..(s + 1) * strip, s * strip / 2..(s + 1) * strip / 2);
                        unpack_twelve(&p.low[low], &p.high[high], &mut widened);
                    }
                    let a: [&[i16]; MR] =
                        std::array::from_fn(|r| &rows.wide[rows_at.start + r * width..][..width]);
                    let acc = micro_kernel_words(kernel, 2 * lanes, a, &widened);
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
