//! Strided matrix views into flat `f32` buffers: a head's `Q`, `K^T` or `V` is a view of the
//! packed QKV matrix, never a copy. Every index a view can reach is checked when it is made.

/// A read-only strided view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(super) data: &'a [f32],
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
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

    /// Columns `j..j + len` of this view, as a view of the same data.
    pub fn columns(self, j: usize, len: usize) -> Self {
        assert!(j + len <= self.cols, "columns {j}..{} of {}", j + len, self.cols);
        let start = (j * self.cs).min(self.data.len());
        MatRef::new(&self.data[start..], self.rows, len, self.rs, self.cs)
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
    pub(super) data: &'a mut [f32],
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
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
