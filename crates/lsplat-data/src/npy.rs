//! Reader of NumPy `.npy` arrays (any rank, C order), converted to `f32`.
//!
//! Accepted element types: float16/32/64, signed and unsigned integers of 1–8 bytes
//! and booleans, little- or big-endian. Every size in the header is checked against
//! the bytes actually present before anything is allocated.

use std::path::Path;

use crate::DataError;

/// An array read from a `.npy` file: its shape and its values as `f32`, C order.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Dimensions, outermost first; empty for a scalar.
    pub shape: Vec<usize>,
    /// Values in C (row-major) order; `shape.iter().product()` of them.
    pub data: Vec<f32>,
}

impl NpyArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Element type of an array.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Float,
    Int,
    Uint,
    Bool,
}

/// Parsed header: element type, size, byte order, shape.
#[derive(Debug)]
struct Header {
    kind: Kind,
    size: usize,
    big_endian: bool,
    shape: Vec<usize>,
}

/// Reads a `.npy` file.
pub fn read_npy(path: &Path) -> Result<NpyArray, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_npy(&bytes, path)
}

/// Parses the bytes of a `.npy` file; `path` only names the file in errors.
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<NpyArray, DataError> {
    let bad = |p: String| DataError::format(path, p);
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (missing the \\x93NUMPY magic)".into()));
    }
    let (hlen, start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(format!("unsupported .npy version {v}"))),
    };
    let text = bytes
        .get(start..start.saturating_add(hlen))
        .ok_or_else(|| {
            bad(format!(
                "truncated: header of {hlen} bytes does not fit in the file"
            ))
        })?;
    let text = std::str::from_utf8(text).map_err(|_| bad("header is not text".into()))?;
    let h = parse_header(text).map_err(|p| bad(format!("bad header: {p}")))?;
    let count = h
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {:?} overflows", h.shape)))?;
    let body = &bytes[start + hlen..];
    let need = count
        .checked_mul(h.size)
        .ok_or_else(|| bad("array size overflows".into()))?;
    if body.len() != need {
        let what = if body.len() < need {
            "truncated"
        } else {
            "trailing bytes"
        };
        return Err(bad(format!(
            "{what}: shape {:?} needs {need} data bytes, the file has {}",
            h.shape,
            body.len()
        )));
    }
    let data = body.chunks_exact(h.size).map(|c| convert(c, &h)).collect();
    Ok(NpyArray {
        shape: h.shape,
        data,
    })
}

/// Converts one element to `f32`.
fn convert(c: &[u8], h: &Header) -> f32 {
    let mut b = [0u8; 8];
    b[..c.len()].copy_from_slice(c);
    if h.big_endian {
        b[..c.len()].reverse();
    }
    let u = u64::from_le_bytes(b);
    match (h.kind, h.size) {
        (Kind::Float, 2) => half::f16::from_bits(u as u16).to_f32(),
        (Kind::Float, 4) => f32::from_bits(u as u32),
        (Kind::Float, _) => f64::from_bits(u) as f32,
        (Kind::Int, s) => {
            let shift = 64 - 8 * s as u32;
            (((u << shift) as i64) >> shift) as f32
        }
        (Kind::Uint | Kind::Bool, _) => u as f32,
    }
}

/// Parses the header dictionary, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(text: &str) -> Result<Header, String> {
    let descr = value_of(text, "descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| format!("descr `{descr}` is not a quoted string"))?;
    let (order, ty) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let kind = match ty.get(..1) {
        Some("f") => Kind::Float,
        Some("i") => Kind::Int,
        Some("u") => Kind::Uint,
        Some("b") => Kind::Bool,
        _ => return Err(format!("unsupported element type `{descr}`")),
    };
    let size: usize = ty[1..]
        .parse()
        .map_err(|_| format!("unsupported element type `{descr}`"))?;
    let ok = match kind {
        Kind::Float => matches!(size, 2 | 4 | 8),
        Kind::Bool => size == 1,
        Kind::Int | Kind::Uint => matches!(size, 1 | 2 | 4 | 8),
    };
    if !ok {
        return Err(format!("unsupported element type `{descr}`"));
    }
    let fortran = value_of(text, "fortran_order")?;
    let fortran = if fortran.starts_with("True") {
        true
    } else if fortran.starts_with("False") {
        false
    } else {
        return Err(format!("fortran_order `{fortran}` is not True or False"));
    };
    let shape_text = value_of(text, "shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| "shape is not a tuple".to_string())?;
    let mut shape = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p = part.trim_end_matches('L');
        shape.push(
            p.parse::<usize>()
                .map_err(|_| format!("shape entry `{part}` is not a size"))?,
        );
    }
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("Fortran-ordered arrays are not supported (save in C order)".into());
    }
    Ok(Header {
        kind,
        size,
        big_endian: order == '>',
        shape,
    })
}

/// The text after `'key':` in the header, trimmed.
fn value_of<'a>(text: &'a str, key: &str) -> Result<&'a str, String> {
    let pat = format!("'{key}'");
    let at = text.find(&pat).ok_or_else(|| format!("no `{key}` entry"))?;
    let rest = text[at + pat.len()..].trim_start();
    let rest = rest
        .strip_prefix(':')
        .ok_or_else(|| format!("no `:` after `{key}`"))?;
    Ok(rest.trim_start())
}

/// The `.npy` (version 1.0) header for a little-endian C-order array of `descr`
/// (`<f4`, `<f8`, `<i8`, …) and `shape`: magic, length, dict, padded to 64 bytes.
pub fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    // Magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// Builds `.npy` bytes for a little-endian array of `descr` from raw element bytes;
/// for tests and tools.
pub fn npy_bytes(descr: &str, shape: &[usize], raw: &[u8]) -> Vec<u8> {
    let mut out = npy_header(descr, shape);
    out.extend_from_slice(raw);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("x.npy")
    }

    #[test]
    fn round_trip_with_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        crate::io::write_npy_f32(&path, &[2, 3], &[0.0, 1.0, 2.5, -3.0, 4.0, 5.0]).unwrap();
        let a = read_npy(&path).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![0.0, 1.0, 2.5, -3.0, 4.0, 5.0]);
    }

    #[test]
    fn converts_other_types() {
        let f16: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        assert_eq!(
            parse_npy(&npy_bytes("<f2", &[2], &f16), p()).unwrap().data,
            vec![1.5, -2.0]
        );
        let f64b: Vec<u8> = [0.25f64, 7.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            parse_npy(&npy_bytes("<f8", &[1, 2], &f64b), p())
                .unwrap()
                .data,
            vec![0.25, 7.0]
        );
        let i8b = (-5i64).to_le_bytes();
        let a = parse_npy(&npy_bytes("<i8", &[], &i8b), p()).unwrap();
        assert_eq!((a.shape.len(), a.data.clone()), (0, vec![-5.0]));
        let be = 3.0f32.to_be_bytes();
        assert_eq!(
            parse_npy(&npy_bytes(">f4", &[1], &be), p()).unwrap().data,
            vec![3.0]
        );
        let i2 = (-300i16).to_le_bytes();
        assert_eq!(
            parse_npy(&npy_bytes("<i2", &[1], &i2), p()).unwrap().data,
            vec![-300.0]
        );
        assert_eq!(
            parse_npy(&npy_bytes("|u1", &[2], &[7, 255]), p())
                .unwrap()
                .data,
            vec![7.0, 255.0]
        );
    }

    #[test]
    fn bad_inputs_are_errors() {
        let good = npy_bytes("<f4", &[2, 2], &[0u8; 16]);
        let err = |b: &[u8]| parse_npy(b, p()).unwrap_err().to_string();
        let e = err(&good[..good.len() - 3]);
        assert!(e.contains("x.npy") && e.contains("truncated"), "{e}");
        assert!(err(b"hello world").contains("magic"));
        assert!(err(&good[..20]).contains("header"));
        assert!(err(&npy_bytes("<c8", &[1], &[0; 8])).contains("element type"));
        assert!(err(&npy_bytes("<f4", &[usize::MAX, 2], &[])).contains("overflows"));
        assert!(err(&npy_bytes("<f4", &[1 << 40], &[])).contains("truncated"));
        let mut fo = npy_bytes("<f4", &[2, 2], &[0u8; 16]);
        let at = fo.windows(5).position(|w| w == b"False").unwrap();
        fo[at..at + 5].copy_from_slice(b"True ");
        assert!(err(&fo).contains("Fortran"));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(err(&trailing).contains("trailing"));
    }
}
