//! Dense single-precision matrix products for host-side numeric code (the
//! autoencoder, relevancy, PCA): a safe, bounds-checked view over `matrixmultiply`'s
//! `sgemm`. Single-threaded and free of atomics, so results are bitwise reproducible;
//! callers that want parallelism split the rows of the output.

/// A read-only matrix view: `rows × cols` with element `(i, j)` at
/// `data[i·row_stride + j·col_stride]`. Transposing a view swaps its strides.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Distance between rows.
    pub row_stride: usize,
    /// Distance between columns.
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A row-major `rows × cols` matrix.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (no copy).
    pub fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    /// True when every element lies inside `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|a| (self.cols - 1).checked_mul(self.col_stride).map(|b| (a, b)))
            .and_then(|(a, b)| a.checked_add(b));
        matches!(last, Some(l) if l < self.data.len())
    }
}

/// `c = alpha·a·b + beta·c`, with `c` row-major `[a.rows, b.cols]`.
///
/// # Panics
/// When the shapes do not agree or a view reaches past its data (a caller bug).
pub fn gemm(alpha: f32, a: MatRef<'_>, b: MatRef<'_>, beta: f32, c: &mut [f32]) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "gemm: inner dimensions differ");
    assert!(a.in_bounds() && b.in_bounds(), "gemm: view out of bounds");
    assert_eq!(c.len(), m * n, "gemm: output size");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for v in c.iter_mut() {
            *v *= beta;
        }
        return;
    }
    let s = |v: usize| v as isize;
    // SAFETY: `a` and `b` were checked above to address only elements inside their
    // slices, `c` holds exactly m·n elements addressed row-major (strides n, 1), and
    // `c` cannot alias `a` or `b` (it is borrowed mutably).
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.data.as_ptr(),
            s(a.row_stride),
            s(a.col_stride),
            b.data.as_ptr(),
            s(b.row_stride),
            s(b.col_stride),
            beta,
            c.as_mut_ptr(),
            s(n),
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: MatRef<'_>, b: MatRef<'_>) -> Vec<f64> {
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                for p in 0..a.cols {
                    c[i * b.cols + j] += a.data[i * a.row_stride + p * a.col_stride] as f64
                        * b.data[p * b.row_stride + j * b.col_stride] as f64;
                }
            }
        }
        c
    }

    #[test]
    fn products_with_transposes_match_a_naive_loop() {
        let a: Vec<f32> = (0..35).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let b: Vec<f32> = (0..20).map(|i| ((i * 3) % 7) as f32 * 0.5).collect();
        // a: 7x5, b: 5x4 and its transposed storage.
        let (am, bm) = (MatRef::new(&a, 7, 5), MatRef::new(&b, 5, 4));
        let mut c = vec![1.0; 28];
        gemm(1.0, am, bm, 0.0, &mut c);
        let want = naive(am, bm);
        assert!(
            c.iter()
                .zip(&want)
                .all(|(x, y)| (*x as f64 - y).abs() < 1e-4)
        );
        // aᵀ·a (5x5) through a transposed view.
        let mut d = vec![0.0; 25];
        gemm(2.0, am.t(), am, 0.0, &mut d);
        let want = naive(am.t(), am);
        assert!(
            d.iter()
                .zip(&want)
                .all(|(x, y)| (*x as f64 - 2.0 * y).abs() < 1e-3)
        );
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn a_view_past_its_data_is_refused() {
        let a = vec![0.0; 5];
        let mut c = vec![0.0; 4];
        gemm(
            1.0,
            MatRef::new(&a, 2, 3),
            MatRef::new(&a, 3, 2),
            0.0,
            &mut c,
        );
    }
}
