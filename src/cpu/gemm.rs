//! Strided matrix views and the matrix product every projection and per-head product goes through.
//!
//! `C <- alpha * A @ B + beta * C`, with `A` (`m x k`), `B` (`k x n`), `C` (`m x n`) given as
//! strided views into flat `f32` buffers, so a head's `Q`, `K^T` or `V` is a view of the packed
//! QKV matrix and never a copy. When `beta == 0`, `C` is write-only: whatever it held (NaN
//! included) is ignored, as in BLAS.

use super::Kernel;

/// A read-only strided view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// Index one past the last element a `rows x cols` view with strides `(rs, cs)` reads.
fn extent(rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * rs + (cols - 1) * cs + 1
    }
}

impl<'a> MatRef<'a> {
    /// A strided view; panics if it would read past `data`.
    pub fn new(data: &'a [f32], rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        let end = extent(rows, cols, rs, cs);
        assert!(end <= data.len(), "view {rows}x{cols} (strides {rs},{cs}) reads {end} > {}", data.len());
        MatRef { data, rows, cols, rs, cs }
    }

    /// A dense row-major `rows x cols` view.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols, 1)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The transpose, as a view of the same data.
    pub fn t(self) -> Self {
        MatRef { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    /// Element `(i, j)`.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    /// Elements `(i, j..j + len)` as a slice, when the row is contiguous (`cs == 1`).
    #[inline]
    pub fn row_run(&self, i: usize, j: usize, len: usize) -> Option<&[f32]> {
        (self.cs == 1).then(|| &self.data[i * self.rs + j..i * self.rs + j + len])
    }

    /// Elements `(i..i + len, j)` as a slice, when the column is contiguous (`rs == 1`, as in
    /// the transpose of a row-major view).
    #[inline]
    pub fn col_run(&self, i: usize, j: usize, len: usize) -> Option<&[f32]> {
        (self.rs == 1).then(|| &self.data[i + j * self.cs..i + j * self.cs + len])
    }

    /// Whether columns are contiguous and rows are not: the transpose of a row-major view.
    pub fn is_column_major(&self) -> bool {
        self.rs == 1 && self.cs != 1
    }
}

/// A mutable strided view whose elements are distinct memory locations.
#[derive(Debug)]
pub struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> MatMut<'a> {
    /// A strided mutable view; panics if it would write past `data` or if two elements would
    /// share a location (rows must not overlap).
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        let end = extent(rows, cols, rs, cs);
        assert!(end <= data.len(), "view {rows}x{cols} (strides {rs},{cs}) writes {end} > {}", data.len());
        let distinct = match (rows, cols) {
            (0, _) | (_, 0) | (1, 1) => true,
            (1, _) => cs >= 1,
            (_, 1) => rs >= 1,
            _ => (cs >= 1 && rs >= cols * cs) || (rs >= 1 && cs >= rows * rs),
        };
        assert!(distinct, "view {rows}x{cols} (strides {rs},{cs}) aliases its own elements");
        MatMut { data, rows, cols, rs, cs }
    }

    /// A dense row-major `rows x cols` view.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols, 1)
    }

    /// Element `(i, j)`.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }

    /// Sets element `(i, j)`.
    #[inline]
    pub fn set(&mut self, i: usize, j: usize, v: f32) {
        self.data[i * self.rs + j * self.cs] = v;
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Elements `(i, j..j + len)` as a mutable slice, when the row is contiguous (`cs == 1`).
    #[inline]
    pub fn row_run_mut(&mut self, i: usize, j: usize, len: usize) -> Option<&mut [f32]> {
        (self.cs == 1).then(|| &mut self.data[i * self.rs + j..i * self.rs + j + len])
    }
}

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

/// The scalar twin: a plain dot product per output, f32 accumulation. Always compiles, always
/// tested, and the reference the vector path is checked against besides the f64 oracle.
fn sgemm_scalar(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: MatMut<'_>) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let mut acc = 0.0f32;
            for p in 0..a.cols {
                acc += a.at(i, p) * b.at(p, j);
            }
            let slot = &mut c.data[i * c.rs + j * c.cs];
            *slot = if beta == 0.0 { alpha * acc } else { alpha * acc + beta * *slot };
        }
    }
}
