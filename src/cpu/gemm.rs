//! The matrix product every projection and per-head product goes through, and the one place
//! that picks its kernel.
//!
//! `C <- alpha * A @ B + beta * C`, with `A` (`m x k`), `B` (`k x n`), `C` (`m x n`) given as
//! strided views ([`MatRef`], [`MatMut`]) into flat `f32` buffers, or with `B` generated from a
//! seed as it is used ([`sgemm_generated`]). When `beta == 0`, `C` is write-only: whatever it
//! held (NaN included) is ignored, as in BLAS.

pub use super::mat::{MatMut, MatRef};
use super::Kernel;
use crate::attention::synthetic::GeneratedMatrix;

/// `C <- alpha * A @ B + beta * C` on the chosen kernel.
pub fn sgemm(kernel: Kernel, alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    assert_eq!(
        a.cols, b.rows,
        "inner dimensions differ: A is {}x{}, B is {}x{}",
        a.rows, a.cols, b.rows, b.cols
    );
    assert_eq!((c.rows, c.cols), (a.rows, b.cols), "C must be {}x{}", a.rows, b.cols);
    if c.rows == 0 || c.cols == 0 {
        return;
    }
    match kernel {
        Kernel::Simd => sgemm_vector(alpha, a, b, beta, c),
        Kernel::Scalar => sgemm_scalar(alpha, a, b, beta, c),
    }
}

/// The vector path. On wasm32 with simd128: this crate's packed 4x8 kernel ([`super::packed`]),
/// about 1.15x the speed of matrixmultiply's 8x8 `KernelWasmSimd` in the benchmark. Natively:
/// matrixmultiply's AVX/FMA or SSE kernels, chosen at run time. With `k == 0` it sets
/// `C <- beta * C`, and with `beta == 0` it never reads `C`.
fn sgemm_vector(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
        return super::packed::sgemm(alpha, a, b, beta, c);
    }
    let s = |x: usize| x as isize;
    // safety: MatRef::new/MatMut::new checked that every (i, j) index of each view lies inside
    // its slice, and MatMut::new that C's elements are distinct; the shapes agree (asserted in
    // sgemm). matrixmultiply reads A and B and writes only C's m*n elements.
    unsafe {
        matrixmultiply::sgemm(
            c.rows,
            a.cols,
            c.cols,
            alpha,
            a.data.as_ptr(),
            s(a.rs),
            s(a.cs),
            b.data.as_ptr(),
            s(b.rs),
            s(b.cs),
            beta,
            c.data.as_mut_ptr(),
            s(c.rs),
            s(c.cs),
        );
    }
}

/// [`sgemm`] with `B` (`A.cols() x n`) generated from its seed where it is used, so a matrix too
/// large to store (GPT-3's weights) never exists in memory. The vector kernel generates each
/// weight once per product, as it packs `B`'s panels; the scalar twin generates it per use.
pub fn sgemm_generated(
    kernel: Kernel,
    alpha: f32,
    a: MatRef<'_>,
    b: GeneratedMatrix,
    n: usize,
    beta: f32,
    c: MatMut<'_>,
) {
    assert_eq!((c.rows, c.cols), (a.rows, n), "C must be {}x{n}", a.rows);
    match kernel {
        Kernel::Simd => super::packed::sgemm_from(alpha, a, &b, n, beta, c),
        Kernel::Scalar => scalar(alpha, a, |p, j| b.at(p, j), beta, c),
    }
}

/// The scalar twin: a plain dot product per output, f32 accumulation. Always compiles, always
/// tested, and the reference the vector path is checked against besides the f64 oracle.
fn sgemm_scalar(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    scalar(alpha, a, |p, j| b.at(p, j), beta, c)
}

/// `C <- alpha * A @ B + beta * C` with `B`'s element `(p, j)` from `b`, one dot product each.
fn scalar(alpha: f32, a: MatRef<'_>, b: impl Fn(usize, usize) -> f32, beta: f32, c: MatMut<'_>) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let mut acc = 0.0f32;
            for p in 0..a.cols {
                acc += a.at(i, p) * b(p, j);
            }
            let slot = &mut c.data[i * c.rs + j * c.cs];
            *slot = if beta == 0.0 { alpha * acc } else { alpha * acc + beta * *slot };
        }
    }
}
