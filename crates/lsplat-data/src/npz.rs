//! Reader of NumPy `.npz` archives written by `np.savez` (uncompressed zip).
//!
//! Only "stored" entries are supported; `np.savez_compressed` archives are rejected
//! with a clear error. The zip central directory (including zip64 sizes) is read and
//! every offset is checked against the file before use.

use std::path::Path;

use crate::DataError;
use crate::npy::{NpyArray, parse_npy};

/// Reads every array of an `.npz` file, in archive order, keyed by the entry name
/// without its `.npy` suffix.
pub fn read_npz(path: &Path) -> Result<Vec<(String, NpyArray)>, DataError> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    parse_npz(&bytes, path)
}

/// Parses the bytes of an `.npz` archive; `path` only names the file in errors.
pub fn parse_npz(bytes: &[u8], path: &Path) -> Result<Vec<(String, NpyArray)>, DataError> {
    let bad = |p: String| DataError::format(path, p);
    let eocd = (0..=bytes.len().saturating_sub(22))
        .rev()
        .take(22 + 65535)
        .find(|&i| bytes.get(i..i + 4) == Some(b"PK\x05\x06"))
        .ok_or_else(|| bad("not a zip archive (no end-of-central-directory record)".into()))?;
    let count = u16_at(bytes, eocd + 10).ok_or_else(|| bad("truncated zip directory".into()))?;
    let mut at =
        u32_at(bytes, eocd + 16).ok_or_else(|| bad("truncated zip directory".into()))? as usize;
    let mut out = Vec::new();
    let mut total = 0u64;
    for _ in 0..count {
        let entry = central_entry(bytes, at)
            .ok_or_else(|| bad(format!("bad zip directory entry at byte {at}")))?;
        at = entry.next;
        let name = entry
            .name
            .strip_suffix(".npy")
            .unwrap_or(&entry.name)
            .to_string();
        let inner = path.join(&entry.name);
        if entry.method != 0 {
            return Err(DataError::format(
                inner,
                format!(
                    "compression method {} is not supported (save with np.savez, not savez_compressed)",
                    entry.method
                ),
            ));
        }
        total = total.saturating_add(entry.size);
        if total > bytes.len() as u64 {
            return Err(bad("zip entries overlap or exceed the archive".into()));
        }
        let data = local_data(bytes, entry.offset, entry.size)
            .ok_or_else(|| DataError::format(&inner, "entry data lies outside the archive"))?;
        out.push((name, parse_npy(data, &inner)?));
    }
    Ok(out)
}

/// One central-directory entry.
struct Entry {
    name: String,
    method: u16,
    size: u64,
    offset: u64,
    next: usize,
}

fn central_entry(b: &[u8], at: usize) -> Option<Entry> {
    if b.get(at..at + 4)? != b"PK\x01\x02" {
        return None;
    }
    let method = u16_at(b, at + 10)?;
    let mut size = u32_at(b, at + 20)? as u64;
    let usize_ = u32_at(b, at + 24)? as u64;
    let name_len = u16_at(b, at + 28)? as usize;
    let extra_len = u16_at(b, at + 30)? as usize;
    let comment_len = u16_at(b, at + 32)? as usize;
    let mut offset = u32_at(b, at + 42)? as u64;
    let name = String::from_utf8_lossy(b.get(at + 46..at + 46 + name_len)?).into_owned();
    let extra = b.get(at + 46 + name_len..at + 46 + name_len + extra_len)?;
    // Zip64: the 0xFFFFFFFF fields are in the extra field 0x0001, in the order
    // uncompressed size, compressed size, offset.
    let mut e = 0;
    while e + 4 <= extra.len() {
        let id = u16_at(extra, e)?;
        let len = u16_at(extra, e + 2)? as usize;
        if id == 1 {
            let mut f = e + 4;
            let mut take = |v: u64| -> Option<u64> {
                if v != 0xFFFF_FFFF {
                    return Some(v);
                }
                let x = u64_at(extra, f)?;
                f += 8;
                Some(x)
            };
            let _ = take(usize_)?;
            size = take(size)?;
            offset = take(offset)?;
        }
        e += 4 + len;
    }
    let next = at + 46 + name_len + extra_len + comment_len;
    Some(Entry {
        name,
        method,
        size,
        offset,
        next,
    })
}

fn local_data(b: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let at = usize::try_from(offset).ok().filter(|&a| a < b.len())?;
    if b.get(at..at + 4)? != b"PK\x03\x04" {
        return None;
    }
    let start = at + 30 + u16_at(b, at + 26)? as usize + u16_at(b, at + 28)? as usize;
    b.get(start..start.checked_add(usize::try_from(size).ok()?)?)
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn garden(data: &std::path::Path) -> std::path::PathBuf {
        data.join("test_garden.npz")
    }

    #[test]
    fn reads_gsplat_garden() {
        let Some(data) = crate::testdata::test_data() else {
            return;
        };
        let arrays = read_npz(&garden(&data)).unwrap();
        let names: Vec<&str> = arrays.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["means3d", "colors", "viewmats", "Ks", "height", "width"]
        );
        let get = |n: &str| &arrays.iter().find(|(k, _)| k == n).unwrap().1;
        assert_eq!(get("means3d").shape, vec![138766, 3]);
        assert_eq!(get("viewmats").shape, vec![3, 4, 4]);
        assert_eq!(get("Ks").shape, vec![3, 3, 3]);
        assert_eq!(get("height").data, vec![420.0]);
        assert_eq!(get("width").data, vec![648.0]);
        // A viewmat is a rigid transform: last row (0, 0, 0, 1).
        assert_eq!(&get("viewmats").data[12..16], &[0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn garbled_archives_are_errors() {
        let Some(data) = crate::testdata::test_data() else {
            return;
        };
        let bytes = std::fs::read(garden(&data)).unwrap();
        let p = Path::new("g.npz");
        assert!(
            parse_npz(&bytes[..1000], p)
                .unwrap_err()
                .to_string()
                .contains("g.npz")
        );
        let mut b = bytes.clone();
        let n = b.len();
        b[n - 6..n - 2].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_npz(&b, p).is_err());
        // Compressed entry.
        let mut b = bytes.clone();
        let cd = u32_at(&b, n - 6).unwrap() as usize;
        b[cd + 10] = 8;
        assert!(
            parse_npz(&b, p)
                .unwrap_err()
                .to_string()
                .contains("savez_compressed")
        );
        assert!(parse_npz(b"PK\x05\x06", p).is_err());
    }
}
