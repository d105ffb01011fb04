//! Shape checks shared by the public functions.

use crate::error::{Error, Result};

/// `Err(Shape)` unless `got == expected`.
pub(crate) fn expect_len(what: &'static str, expected: usize, got: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::Shape {
            what,
            expected,
            got,
        })
    }
}

/// `a · b`, or `Err(Overflow)`.
pub(crate) fn product(what: &'static str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b).ok_or(Error::Overflow { what })
}

/// `Err(Param)` when `value` is zero.
pub(crate) fn positive(what: &'static str, value: usize) -> Result<()> {
    if value == 0 {
        Err(Error::Param {
            what,
            reason: "must be positive",
        })
    } else {
        Ok(())
    }
}

/// Number of rows of width `width` (positive) in a slice of length `len`.
pub(crate) fn rows_of(what: &'static str, len: usize, width: usize) -> Result<usize> {
    positive(what, width)?;
    if len.is_multiple_of(width) {
        Ok(len / width)
    } else {
        Err(Error::NotMultiple { what, len, width })
    }
}

/// `Err(Index)` at the first entry of `idx` that is not below `bound`.
pub(crate) fn indices_below(what: &'static str, idx: &[u32], bound: usize) -> Result<()> {
    match idx.iter().position(|&i| i as usize >= bound) {
        None => Ok(()),
        Some(position) => Err(Error::Index {
            what,
            position,
            index: idx[position] as usize,
            bound,
        }),
    }
}

/// `Err(Range)` unless `range` is a valid sub-range of `0..pixels`.
pub(crate) fn range_within(range: &std::ops::Range<usize>, pixels: usize) -> Result<()> {
    if range.start <= range.end && range.end <= pixels {
        Ok(())
    } else {
        Err(Error::Range {
            start: range.start,
            end: range.end,
            pixels,
        })
    }
}

/// `Err(Param)` unless the normalising area is finite and positive.
pub(crate) fn valid_area(area: f32) -> Result<()> {
    if area.is_finite() && area > 0.0 {
        Ok(())
    } else {
        Err(Error::Param {
            what: "area",
            reason: "must be finite and positive",
        })
    }
}
