//! Conversions between sparse `[n, k]` coefficients (indices + values) and dense
//! `[n, codes]` weights.

use crate::check::{expect_len, indices_below, positive, product, rows_of};
use crate::error::Result;

/// Checks the shapes shared by [`scatter_dense`] and [`gather_sparse`]; returns n.
fn sparse_rows(idx: &[u32], codes: usize, k: usize) -> Result<usize> {
    positive("codes", codes)?;
    positive("k", k)?;
    let n = rows_of("idx", idx.len(), k)?;
    indices_below("idx", idx, codes)?;
    Ok(n)
}

/// Dense weights `out` (`[n, codes]`) from sparse `idx`/`val` (`[n, k]`): zero except
/// at the selected codes (repeated indices add up).
pub fn scatter_dense(
    idx: &[u32],
    val: &[f32],
    codes: usize,
    k: usize,
    out: &mut [f32],
) -> Result<()> {
    let n = sparse_rows(idx, codes, k)?;
    expect_len("val", idx.len(), val.len())?;
    expect_len("out", product("out", n, codes)?, out.len())?;
    out.fill(0.0);
    let sparse = idx.chunks_exact(k).zip(val.chunks_exact(k));
    for ((ri, rv), row) in sparse.zip(out.chunks_exact_mut(codes)) {
        for (&c, &v) in ri.iter().zip(rv) {
            row[c as usize] += v;
        }
    }
    Ok(())
}

/// Gathers `out[r, j] = dense[r, idx[r, j]]` (`dense` is `[n, codes]`, `idx` and
/// `out` are `[n, k]`).
pub fn gather_sparse(
    dense: &[f32],
    idx: &[u32],
    codes: usize,
    k: usize,
    out: &mut [f32],
) -> Result<()> {
    let n = sparse_rows(idx, codes, k)?;
    expect_len("dense", product("dense", n, codes)?, dense.len())?;
    expect_len("out", idx.len(), out.len())?;
    for ((ri, ro), row) in idx
        .chunks_exact(k)
        .zip(out.chunks_exact_mut(k))
        .zip(dense.chunks_exact(codes))
    {
        for (&c, o) in ri.iter().zip(ro) {
            *o = row[c as usize];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn scatter_then_gather_round_trips() {
        let (idx, val) = ([3u32, 0, 1, 2], [0.7f32, 0.3, 0.6, 0.4]);
        let mut dense = vec![9.0; 8];
        scatter_dense(&idx, &val, 4, 2, &mut dense).unwrap();
        assert_eq!(dense, [0.3, 0.0, 0.0, 0.7, 0.0, 0.6, 0.4, 0.0]);
        let mut back = [0.0; 4];
        gather_sparse(&dense, &idx, 4, 2, &mut back).unwrap();
        assert_eq!(back, val);
    }

    #[test]
    fn shape_errors() {
        let (idx, mut val) = ([0u32, 1, 2, 3], [0.0f32; 4]);
        let mut d = [0.0f32; 8];
        let bad = [0u32, 4, 1, 2];
        assert!(matches!(
            scatter_dense(&bad, &val, 4, 2, &mut d),
            Err(Error::Index { .. })
        ));
        assert!(matches!(
            scatter_dense(&idx, &val, 4, 2, &mut d[..5]),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            scatter_dense(&idx, &val[..3], 4, 2, &mut d),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            gather_sparse(&d[..6], &idx, 4, 2, &mut val),
            Err(Error::Shape { .. })
        ));
        let r = gather_sparse(&d, &idx, 4, 0, &mut val);
        assert!(matches!(r, Err(Error::Param { what: "k", .. })));
    }
}
