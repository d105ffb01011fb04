//! The error type of this crate.

/// Errors returned by the functions of this crate (bad shapes or parameters).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A slice has the wrong length.
    #[error("{what}: expected {expected} elements, got {got}")]
    Shape {
        /// Which argument.
        what: &'static str,
        /// The length it must have.
        expected: usize,
        /// The length it has.
        got: usize,
    },
    /// A slice's length is not a multiple of its row width.
    #[error("{what}: length {len} is not a multiple of the row width {width}")]
    NotMultiple {
        /// Which argument.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The row width it must be a multiple of.
        width: usize,
    },
    /// An index stored in a slice is out of range.
    #[error("{what}: index {index} at position {position} is out of range (must be below {bound})")]
    Index {
        /// Which argument.
        what: &'static str,
        /// Position of the bad entry in the slice.
        position: usize,
        /// The bad index.
        index: usize,
        /// The exclusive upper bound.
        bound: usize,
    },
    /// A pixel range does not fit the pixels given.
    #[error("pixel range {start}..{end} does not fit {pixels} pixels")]
    Range {
        /// Range start.
        start: usize,
        /// Range end.
        end: usize,
        /// Number of pixels available.
        pixels: usize,
    },
    /// A scalar parameter is invalid.
    #[error("{what}: {reason}")]
    Param {
        /// Which parameter.
        what: &'static str,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A size computation overflows `usize`.
    #[error("{what}: size overflows usize")]
    Overflow {
        /// Which argument.
        what: &'static str,
    },
    /// k-means was given fewer rows than clusters.
    #[error("k-means: {k} clusters need at least {k} rows, got {rows}")]
    TooFewRows {
        /// Rows given.
        rows: usize,
        /// Clusters requested.
        k: usize,
    },
    /// Input data holds a NaN or infinity.
    #[error("{what}: row {row} holds a non-finite value")]
    NonFinite {
        /// Which argument.
        what: &'static str,
        /// The first row with a non-finite value.
        row: usize,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
