//! A packed, register-blocked matrix product for wasm32 simd128, in the Goto/BLIS shape:
//! `C <- alpha * A @ B + beta * C` cut into `KC`-deep slabs; each slab of `B` (`KC x NC`) and
//! block of `A` (`MC x KC`, scaled by `alpha`) is copied once into contiguous, zero-padded
//! micro-panels, and a micro-kernel multiplies an `MR x KC` panel of `A` by a `KC x NR` panel of
//! `B` into `MR x NR` accumulators held in registers.
//!
//! The micro-kernel has two variants with one contract: simd128 (`f32x4` multiply and add, the
//! `A` element broadcast by a splat load, which V8 lowers to one broadcast instead of a shuffle)
//! and a portable twin that always compiles, so that the packing and edge handling are tested
//! natively as well as in the browser. With `beta == 0`, `C` is never read (NaN in it stays out).

use std::cell::RefCell;

use super::mat::{MatMut, MatRef};
use crate::attention::synthetic::GeneratedMatrix;

/// Where `B`'s elements come from: a stored matrix, or one generated from its seed as it is
/// packed (so GPT-3's weights never exist in memory, and each is generated once per product).
pub trait PanelSource {
    /// Writes `B[p, j0..j0 + out.len()]` into `out`.
    fn fill_row(&self, p: usize, j0: usize, out: &mut [f32]);

    /// [`PanelSource::fill_row`] for a whole panel row: a fixed length lets the compiler copy
    /// it with two vector moves instead of calling `memcpy` (which cost 15 % of a forward pass).
    #[inline]
    fn fill_panel_row(&self, p: usize, j0: usize, out: &mut [f32; NR]) {
        self.fill_row(p, j0, out);
    }

    /// Writes `B[pc..pc + kc, j0..j0 + width]` into `strip` (`kc` rows of `NR`), zero past `width`.
    fn fill_strip(&self, pc: usize, kc: usize, j0: usize, width: usize, strip: &mut [f32]) {
        debug_assert_eq!(strip.len(), kc * NR);
        fill_strip_by_rows(self, pc, j0, width, strip);
    }
}

/// [`PanelSource::fill_strip`] row by row.
fn fill_strip_by_rows(
    b: &(impl PanelSource + ?Sized),
    pc: usize,
    j0: usize,
    width: usize,
    strip: &mut [f32],
) {
    for (p, row) in strip.chunks_exact_mut(NR).enumerate() {
        match <&mut [f32; NR]>::try_from(row) {
            Ok(full) if width == NR => b.fill_panel_row(pc + p, j0, full),
            Ok(row) => {
                b.fill_row(pc + p, j0, &mut row[..width]);
                row[width..].fill(0.0);
            }
            Err(_) => unreachable!("chunks_exact_mut(NR) yields NR-long rows"),
        }
    }
}

impl PanelSource for MatRef<'_> {
    fn fill_strip(&self, pc: usize, kc: usize, j0: usize, width: usize, strip: &mut [f32]) {
        if self.is_column_major() {
            // A transposed row-major matrix (K^T in the attention scores, W^T in the trained
            // model's projections): each of the strip's columns is a contiguous run of the source.
            if width == NR {
                // Eight whole columns: interleaved four by four (every weight of a projection
                // passes here on each product, so this is the packing's hot path).
                let column = |j: usize| match self.col_run(pc, j0 + j, kc) {
                    Some(run) => run,
                    None => unreachable!("rs == 1"),
                };
                interleave(&std::array::from_fn(column), strip);
                return;
            }
            // A narrower last strip: its columns scattered NR apart, zero past `width`.
            for j in 0..width {
                let Some(column) = self.col_run(pc, j0 + j, kc) else { unreachable!("rs == 1") };
                for (row, &v) in strip.chunks_exact_mut(NR).zip(column) {
                    row[j] = v;
                }
            }
            strip.chunks_exact_mut(NR).for_each(|row| row[width..].fill(0.0));
            return;
        }
        fill_strip_by_rows(self, pc, j0, width, strip);
    }

    fn fill_row(&self, p: usize, j0: usize, out: &mut [f32]) {
        match self.row_run(p, j0, out.len()) {
            // Row-major B (the projections): one contiguous copy.
            Some(run) => out.copy_from_slice(run),
            None => out.iter_mut().enumerate().for_each(|(j, o)| *o = self.at(p, j0 + j)),
        }
    }

    #[inline]
    fn fill_panel_row(&self, p: usize, j0: usize, out: &mut [f32; NR]) {
        match self.row_run(p, j0, NR).and_then(|run| <&[f32; NR]>::try_from(run).ok()) {
            Some(run) => *out = *run,
            None => self.fill_row(p, j0, out),
        }
    }
}

/// `strip[p * NR + j] = columns[j][p]`: `NR` columns of equal length `kc` interleaved into `kc`
/// rows of `NR` (`strip.len() == kc * NR`).
fn interleave(columns: &[&[f32]; NR], strip: &mut [f32]) {
    let kc = strip.len() / NR;
    assert!(
        strip.len() == kc * NR && columns.iter().all(|c| c.len() == kc),
        "columns of kc, a strip of kc x NR"
    );
    // Four rows at a time as 4 x 4 transposes of vectors; the rest one row at a time.
    let whole = kc / 4 * 4;
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    // safety: the assert above: every column holds kc >= whole floats and the strip kc * NR.
    unsafe {
        interleave_simd128(columns, whole, strip)
    };
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    interleave_portable(columns, whole, strip);
    for p in whole..kc {
        for (j, column) in columns.iter().enumerate() {
            strip[p * NR + j] = column[p];
        }
    }
}

/// The portable twin of [`interleave_simd128`]: rows `0..whole` of the strip.
#[cfg_attr(all(target_arch = "wasm32", target_feature = "simd128"), allow(dead_code))]
fn interleave_portable(columns: &[&[f32]; NR], whole: usize, strip: &mut [f32]) {
    for p in (0..whole).step_by(4) {
        for (j, column) in columns.iter().enumerate() {
            for (q, &v) in column[p..p + 4].iter().enumerate() {
                strip[(p + q) * NR + j] = v;
            }
        }
    }
}

/// Rows `0..whole` (a multiple of 4) of the strip: for each group of four rows and each half of
/// the columns, four vector loads, a 4 x 4 transpose in registers and four vector stores.
///
/// # Safety
/// Every column must be valid for `whole` reads and `strip` for `whole * NR` writes.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[target_feature(enable = "simd128")]
unsafe fn interleave_simd128(columns: &[&[f32]; NR], whole: usize, strip: &mut [f32]) {
    use core::arch::wasm32::*;
    let out = strip.as_mut_ptr();
    for p in (0..whole).step_by(4) {
        for half in 0..NR / 4 {
            // safety: p + 3 < whole, so each load reads column[p..p + 4] inside the column.
            let [a0, a1, a2, a3] = std::array::from_fn(|i| unsafe {
                v128_load(columns[half * 4 + i].as_ptr().add(p) as *const v128)
            });
            let (t0, t1) = (i32x4_shuffle::<0, 4, 1, 5>(a0, a1), i32x4_shuffle::<2, 6, 3, 7>(a0, a1));
            let (t2, t3) = (i32x4_shuffle::<0, 4, 1, 5>(a2, a3), i32x4_shuffle::<2, 6, 3, 7>(a2, a3));
            let rows = [
                i64x2_shuffle::<0, 2>(t0, t2),
                i64x2_shuffle::<1, 3>(t0, t2),
                i64x2_shuffle::<0, 2>(t1, t3),
                i64x2_shuffle::<1, 3>(t1, t3),
            ];
            for (q, row) in rows.into_iter().enumerate() {
                // safety: (p + q) * NR + half * 4 + 3 < whole * NR: inside the strip.
                unsafe { v128_store(out.add((p + q) * NR + half * 4) as *mut v128, row) };
            }
        }
    }
}

impl PanelSource for GeneratedMatrix {
    fn fill_row(&self, p: usize, j0: usize, out: &mut [f32]) {
        out.iter_mut().enumerate().for_each(|(j, o)| *o = self.at(p, j0 + j));
    }
}

/// Rows of `C` a micro-kernel call produces.
pub const MR: usize = 4;
/// Columns of `C` a micro-kernel call produces: two `f32x4`.
pub const NR: usize = 8;
/// Depth of one slab: a `KC x NR` panel of `B` (8 KiB) stays in L1 while panels of `A` stream.
const KC: usize = 384;
/// Rows of `A` packed at once: 64 KiB.
const MC: usize = 64;
/// Columns of `B` packed at once: 512 KiB, about half an L2.
const NC: usize = 512;

thread_local! {
    /// Packing buffers, kept between calls (they only grow), so a product allocates nothing.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `C <- alpha * A @ B + beta * C` for views whose shapes agree (checked by the caller).
pub fn sgemm(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    let n = b.cols();
    sgemm_from(alpha, a, &b, n, beta, c)
}

/// [`sgemm`] with `B` (`A.cols() x n`) read from any [`PanelSource`].
pub fn sgemm_from(alpha: f32, a: MatRef<'_>, b: &impl PanelSource, n: usize, beta: f32, mut c: MatMut<'_>) {
    let (m, k) = (a.rows(), a.cols());
    assert_eq!((c.rows(), c.cols()), (m, n), "C must be {m}x{n}");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // Nothing to add: C <- beta * C, without reading C when beta is 0.
        for i in 0..m {
            for j in 0..n {
                let v = if beta == 0.0 { 0.0 } else { beta * c.at(i, j) };
                c.set(i, j, v);
            }
        }
        return;
    }
    SCRATCH.with(|s| {
        let (ref mut pa, ref mut pb) = *s.borrow_mut();
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            let strips_b = nc.div_ceil(NR);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                grow(pb, strips_b * kc * NR);
                pack_b(b, pc, kc, jc, nc, pb);
                // The first slab applies beta; later ones accumulate onto it.
                let beta = if pc == 0 { beta } else { 1.0 };
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    let strips_a = mc.div_ceil(MR);
                    grow(pa, strips_a * kc * MR);
                    pack_a(&a, alpha, ic, mc, pc, kc, pa);
                    for sj in 0..strips_b {
                        let panel_b = &pb[sj * kc * NR..(sj + 1) * kc * NR];
                        for si in 0..strips_a {
                            let panel_a = &pa[si * kc * MR..(si + 1) * kc * MR];
                            let tile = micro_kernel(kc, panel_a, panel_b);
                            let (i0, j0) = (ic + si * MR, jc + sj * NR);
                            store(&mut c, &tile, i0, j0, MR.min(m - i0), NR.min(n - j0), beta);
                        }
                    }
                }
            }
        }
    });
}

fn grow(buf: &mut Vec<f32>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
}

/// `B[pc..pc+kc, jc..jc+nc]` as `NR`-wide strips, each `kc` rows of `NR` (zero past `nc`).
fn pack_b(b: &impl PanelSource, pc: usize, kc: usize, jc: usize, nc: usize, out: &mut [f32]) {
    for (s, strip) in out.chunks_exact_mut(kc * NR).take(nc.div_ceil(NR)).enumerate() {
        let j0 = jc + s * NR;
        b.fill_strip(pc, kc, j0, NR.min(jc + nc - j0), strip);
    }
}

/// `alpha * A[ic..ic+mc, pc..pc+kc]` as `MR`-tall strips, each `kc` columns of `MR` (zero past `mc`).
fn pack_a(a: &MatRef<'_>, alpha: f32, ic: usize, mc: usize, pc: usize, kc: usize, out: &mut [f32]) {
    for (s, strip) in out.chunks_exact_mut(kc * MR).take(mc.div_ceil(MR)).enumerate() {
        let i0 = ic + s * MR;
        let height = MR.min(ic + mc - i0);
        const _: () = assert!(MR == 4, "the contiguous path below interleaves four rows");
        let rows = (height == MR).then(|| [0, 1, 2, 3].map(|i| a.row_run(i0 + i, pc, kc))).and_then(|r| {
            let [Some(r0), Some(r1), Some(r2), Some(r3)] = r else { return None };
            Some((r0, r1, r2, r3))
        });
        if let Some((r0, r1, r2, r3)) = rows {
            // Four contiguous rows (row-major A): interleave them, without an index check per element.
            let columns = r0.iter().zip(r1).zip(r2).zip(r3);
            for (col, (((&v0, &v1), &v2), &v3)) in strip.chunks_exact_mut(MR).zip(columns) {
                col.copy_from_slice(&[alpha * v0, alpha * v1, alpha * v2, alpha * v3]);
            }
            continue;
        }
        for (p, col) in strip.chunks_exact_mut(MR).enumerate() {
            for (i, slot) in col.iter_mut().enumerate() {
                *slot = if i < height { alpha * a.at(i0 + i, pc + p) } else { 0.0 };
            }
        }
    }
}

/// Writes the valid `rows x cols` corner of `tile` into `C` at `(i0, j0)`: `C <- tile + beta C`.
fn store(
    c: &mut MatMut<'_>,
    tile: &[f32; MR * NR],
    i0: usize,
    j0: usize,
    rows: usize,
    cols: usize,
    beta: f32,
) {
    if cols == NR && c.row_run_mut(i0, j0, NR).is_some() {
        // Contiguous rows of C: whole-row slices, which the compiler vectorises.
        for (i, t) in tile.chunks_exact(NR).take(rows).enumerate() {
            let Some(row) = c.row_run_mut(i0 + i, j0, NR) else { unreachable!("checked contiguous") };
            if beta == 0.0 {
                row.copy_from_slice(t);
            } else {
                row.iter_mut().zip(t).for_each(|(r, t)| *r = t + beta * *r);
            }
        }
        return;
    }
    for i in 0..rows {
        for j in 0..cols {
            let t = tile[i * NR + j];
            let v = if beta == 0.0 { t } else { t + beta * c.at(i0 + i, j0 + j) };
            c.set(i0 + i, j0 + j, v);
        }
    }
}

/// `tile = panel_a^T @ panel_b` for an `MR x kc` panel of `A` (stored column by column) and a
/// `kc x NR` panel of `B` (row by row): the only loop that does the arithmetic.
#[inline]
fn micro_kernel(kc: usize, panel_a: &[f32], panel_b: &[f32]) -> [f32; MR * NR] {
    assert!(panel_a.len() >= kc * MR && panel_b.len() >= kc * NR, "panels shorter than kc");
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        // safety: the assert above keeps every load of the kernel inside the two panels.
        unsafe { micro_kernel_simd128(kc, panel_a.as_ptr(), panel_b.as_ptr()) }
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        micro_kernel_portable(kc, panel_a, panel_b)
    }
}

/// The micro-kernel alone, `reps` times over one `KC`-deep pair of panels that stay in L1: the
/// arithmetic ceiling a product can approach on this engine and CPU, for the benchmarks' profile
/// (`2 * MR * NR * KC` FLOPs per rep). Returns a sum of the tiles, so the work cannot be dropped.
#[cfg(feature = "bench")]
pub fn micro_kernel_ceiling(reps: usize) -> f32 {
    let (a, b) = (vec![1e-3f32; KC * MR], vec![1e-3f32; KC * NR]);
    (0..reps)
        .map(|_| std::hint::black_box(micro_kernel(KC, std::hint::black_box(&a), std::hint::black_box(&b))))
        .map(|tile| tile.iter().sum::<f32>())
        .sum()
}

/// FLOPs of one [`micro_kernel_ceiling`] rep.
#[cfg(feature = "bench")]
pub const CEILING_FLOPS_PER_REP: usize = 2 * MR * NR * KC;

/// The portable twin of the simd128 micro-kernel: the same products, summed in the same order.
#[cfg_attr(all(target_arch = "wasm32", target_feature = "simd128"), allow(dead_code))]
fn micro_kernel_portable(kc: usize, panel_a: &[f32], panel_b: &[f32]) -> [f32; MR * NR] {
    let mut acc = [0.0f32; MR * NR];
    for p in 0..kc {
        let (a, b) = (&panel_a[p * MR..(p + 1) * MR], &panel_b[p * NR..(p + 1) * NR]);
        for i in 0..MR {
            for j in 0..NR {
                acc[i * NR + j] += a[i] * b[j];
            }
        }
    }
    acc
}

/// `acc + a * b` in each lane, as the micro-kernel's build has it. The simd128 build: a multiply,
/// then an add (two roundings, the same on every engine). The relaxed-SIMD build (the
/// `relaxed-simd` feature, loaded by the page where the browser validates relaxed SIMD:
/// `scripts/relaxed-build.sh`): one `f32x4.relaxed_madd`, which the engine may run as a fused
/// multiply-add (one rounding) or as the two, so the builds may differ in the last bits. In
/// headless Chromium on this project's machine it takes 0.66x the simd128 build's time for the
/// attention forward and 0.74x for a quality evaluation (`node bench/relaxed.mjs`).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128", feature = "relaxed-simd"))]
macro_rules! madd {
    ($acc:expr, $a:expr, $b:expr) => {
        f32x4_relaxed_madd($a, $b, $acc)
    };
}
#[cfg(all(target_arch = "wasm32", target_feature = "simd128", not(feature = "relaxed-simd")))]
macro_rules! madd {
    ($acc:expr, $a:expr, $b:expr) => {
        f32x4_add($acc, f32x4_mul($a, $b))
    };
}

/// The simd128 micro-kernel: 4 rows x 2 `f32x4` of accumulators (8 registers, plus two for the
/// row of `B` and one for the broadcast `A` element: within the 16 that V8 uses on x86-64). Each
/// step is `madd!`: a multiply and an add, or one relaxed multiply-add in the relaxed-SIMD build,
/// which enables relaxed SIMD for this function alone.
///
/// # Safety
/// `a` must be valid for `kc * MR` reads and `b` for `kc * NR`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[cfg_attr(feature = "relaxed-simd", target_feature(enable = "simd128,relaxed-simd"))]
#[cfg_attr(not(feature = "relaxed-simd"), target_feature(enable = "simd128"))]
unsafe fn micro_kernel_simd128(kc: usize, a: *const f32, b: *const f32) -> [f32; MR * NR] {
    use core::arch::wasm32::*;
    let zero = f32x4_splat(0.0);
    let (mut c00, mut c01, mut c10, mut c11) = (zero, zero, zero, zero);
    let (mut c20, mut c21, mut c30, mut c31) = (zero, zero, zero, zero);
    for p in 0..kc {
        // safety (all loads): p < kc, so a + p*MR + 3 < kc*MR and b + p*NR + 7 < kc*NR.
        // wasm loads have no alignment requirement.
        let (b0, b1) = unsafe {
            let row = b.add(p * NR);
            (v128_load(row as *const v128), v128_load(row.add(4) as *const v128))
        };
        let col = unsafe { a.add(p * MR) };
        let a0 = unsafe { v128_load32_splat(col as *const u32) };
        c00 = madd!(c00, a0, b0);
        c01 = madd!(c01, a0, b1);
        let a1 = unsafe { v128_load32_splat(col.add(1) as *const u32) };
        c10 = madd!(c10, a1, b0);
        c11 = madd!(c11, a1, b1);
        let a2 = unsafe { v128_load32_splat(col.add(2) as *const u32) };
        c20 = madd!(c20, a2, b0);
        c21 = madd!(c21, a2, b1);
        let a3 = unsafe { v128_load32_splat(col.add(3) as *const u32) };
        c30 = madd!(c30, a3, b0);
        c31 = madd!(c31, a3, b1);
    }
    let mut tile = [0.0f32; MR * NR];
    for (i, v) in [c00, c01, c10, c11, c20, c21, c30, c31].into_iter().enumerate() {
        // safety: tile has MR*NR = 32 floats; i*4 + 3 < 32.
        unsafe { v128_store(tile.as_mut_ptr().add(i * 4) as *mut v128, v) };
    }
    tile
}

#[cfg(test)]
mod tests {
    use super::*;
    // In `wasm-pack test` these run in the browser, on the simd128 micro-kernel (the crate's
    // tests are configured to run in the browser in `softmax`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A deterministic value in [-0.5, 0.5) (u64: wasm32's usize would overflow).
    fn value(seed: usize, i: usize) -> f32 {
        (((seed as u64 * 7919 + i as u64 * 104729) % 1009) as f32 / 1009.0) - 0.5
    }

    /// The packed product against plain triple loops in f64, over shapes that cut every block
    /// and micro-tile boundary, with NaN in C when beta is 0.
    #[test]
    fn packed_product_matches_plain_loops_across_block_edges() {
        let dims = [0, 1, 3, MR, MR + 1, NR - 1, NR + 1, 63, 65, KC + 3, NC + 5];
        let mut checked = 0;
        for (t, &m) in dims.iter().enumerate() {
            for &k in &dims[..dims.len() - 1] {
                let n = dims[(t * 3 + k) % dims.len()];
                if m * k * n > 6_000_000 {
                    continue;
                }
                let a: Vec<f32> = (0..m * k).map(|i| value(1, i)).collect();
                let b: Vec<f32> = (0..k * n).map(|i| value(2, i)).collect();
                for (alpha, beta) in [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25)] {
                    let start: Vec<f32> = (0..m * n).map(|i| value(3, i)).collect();
                    let mut c = if beta == 0.0 { vec![f32::NAN; m * n] } else { start.clone() };
                    sgemm(
                        alpha,
                        MatRef::row_major(&a, m, k),
                        MatRef::row_major(&b, k, n),
                        beta,
                        MatMut::row_major(&mut c, m, n),
                    );
                    for i in 0..m {
                        for j in 0..n {
                            let dot: f64 = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
                            let want = alpha as f64 * dot
                                + if beta == 0.0 { 0.0 } else { beta as f64 * start[i * n + j] as f64 };
                            let got = c[i * n + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * (1.0 + k as f64).sqrt() * (1.0 + want.abs()),
                                "m={m} k={k} n={n} alpha={alpha} beta={beta}: C[{i},{j}] = {got}, want {want}"
                            );
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "only {checked} cases ran");
    }

    /// Column-major views (the transposes the attention scores multiply by, `K^T`) take their own
    /// packing paths for `A` and `B`: the same products as row-major copies of them, to the bit.
    #[test]
    fn transposed_views_pack_like_row_major_copies() {
        let mut checked = 0;
        for (m, k, n) in [
            (1, 1, 1),
            (5, 3, 7),
            (MR, NR, NR),
            (3, 6, 2 * NR),
            (9, 64, 130),
            (64, KC + 5, 17),
            (33, 70, NC + 3),
        ] {
            // a_t is A^T stored row-major (k x m), b_t is B^T (n x k).
            let a_t: Vec<f32> = (0..k * m).map(|i| value(4, i)).collect();
            let b_t: Vec<f32> = (0..n * k).map(|i| value(5, i)).collect();
            let a: Vec<f32> = (0..m * k).map(|x| a_t[(x % k) * m + x / k]).collect();
            let b: Vec<f32> = (0..k * n).map(|x| b_t[(x % n) * k + x / n]).collect();
            let mut want = vec![f32::NAN; m * n];
            sgemm(
                0.75,
                MatRef::row_major(&a, m, k),
                MatRef::row_major(&b, k, n),
                0.0,
                MatMut::row_major(&mut want, m, n),
            );
            let views = [
                (MatRef::row_major(&a_t, k, m).t(), MatRef::row_major(&b, k, n)),
                (MatRef::row_major(&a, m, k), MatRef::row_major(&b_t, n, k).t()),
                (MatRef::row_major(&a_t, k, m).t(), MatRef::row_major(&b_t, n, k).t()),
            ];
            for (va, vb) in views {
                let mut got = vec![f32::NAN; m * n];
                sgemm(0.75, va, vb, 0.0, MatMut::row_major(&mut got, m, n));
                let same = want.iter().zip(&got).all(|(w, g)| w.to_bits() == g.to_bits());
                assert!(same, "m={m} k={k} n={n}: transposed views give another product");
                checked += 1;
            }
        }
        assert_eq!(checked, 21);
    }
}
