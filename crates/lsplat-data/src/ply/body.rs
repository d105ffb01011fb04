//! PLY body decoding: walks to one element and hands each of its items to a sink.

use super::header::{Element, Format, Header, Scalar};

/// Calls `sink(item, values)` for every item of element `target`, with the values of
/// its (scalar) properties in header order. Elements before it are skipped; elements
/// after it are ignored. Errors are plain problem texts.
pub(crate) fn for_each_item(
    bytes: &[u8],
    header: &Header,
    target: usize,
    mut sink: impl FnMut(usize, &[f64]) -> Result<(), String>,
) -> Result<(), String> {
    let body = bytes.get(header.body_offset..).unwrap_or_default();
    let elements = header
        .elements
        .get(..=target)
        .ok_or("element index out of range")?;
    let (before, el) = elements.split_at(target);
    let el = &el[0];
    if let Some(p) = el.props.iter().find(|p| p.list.is_some()) {
        return Err(format!(
            "list property `{}` in element `{}` is not supported",
            p.name, el.name
        ));
    }
    let mut row = vec![0f64; el.props.len()];
    match header.format {
        Format::Ascii => {
            let text =
                std::str::from_utf8(body).map_err(|_| "ASCII body is not text".to_string())?;
            let mut tokens = text.split_ascii_whitespace();
            for e in before {
                skip_ascii(&mut tokens, e)?;
            }
            let needed = el.count.saturating_mul(el.props.len());
            if needed > body.len() / 2 + 1 {
                return Err(truncated(el, body.len()));
            }
            for i in 0..el.count {
                for (v, p) in row.iter_mut().zip(&el.props) {
                    let t = tokens
                        .next()
                        .ok_or_else(|| format!("truncated: {} {i} is incomplete", el.name))?;
                    *v = t.parse().map_err(|_| {
                        format!("{} {i}: `{}` = `{t}` is not a number", el.name, p.name)
                    })?;
                }
                sink(i, &row)?;
            }
        }
        Format::BinaryLe | Format::BinaryBe => {
            let be = header.format == Format::BinaryBe;
            let mut at = 0usize;
            for e in before {
                at = skip_binary(body, at, e, be)?;
            }
            let stride = el.fixed_stride().unwrap_or(0);
            let rest = body.get(at..).unwrap_or_default();
            let need = el
                .count
                .checked_mul(stride)
                .ok_or_else(|| truncated(el, rest.len()))?;
            if rest.len() < need {
                return Err(truncated(el, rest.len()));
            }
            for (i, item) in rest[..need].chunks_exact(stride.max(1)).enumerate() {
                let mut off = 0;
                for (v, p) in row.iter_mut().zip(&el.props) {
                    *v = p.ty.decode(&item[off..off + p.ty.size()], be);
                    off += p.ty.size();
                }
                sink(i, &row)?;
            }
        }
    }
    Ok(())
}

fn truncated(el: &Element, have: usize) -> String {
    format!(
        "truncated: {} `{}` items do not fit in the {have} remaining bytes",
        el.count, el.name
    )
}

/// Skips the items of an ASCII element.
fn skip_ascii<'a>(tokens: &mut impl Iterator<Item = &'a str>, el: &Element) -> Result<(), String> {
    let short = || format!("truncated inside element `{}`", el.name);
    if el.props.is_empty() {
        return Ok(());
    }
    for _ in 0..el.count {
        for p in &el.props {
            let t = tokens.next().ok_or_else(short)?;
            if p.list.is_some() {
                let n: usize = t
                    .parse()
                    .map_err(|_| format!("list count `{t}` in `{}` is not a count", el.name))?;
                for _ in 0..n {
                    tokens.next().ok_or_else(short)?;
                }
            }
        }
    }
    Ok(())
}

/// Skips the items of a binary element starting at `at`; returns the new offset.
fn skip_binary(body: &[u8], mut at: usize, el: &Element, be: bool) -> Result<usize, String> {
    let short = || format!("truncated inside element `{}`", el.name);
    if let Some(stride) = el.fixed_stride() {
        let end = el
            .count
            .checked_mul(stride)
            .and_then(|n| n.checked_add(at))
            .ok_or_else(short)?;
        return if end <= body.len() {
            Ok(end)
        } else {
            Err(short())
        };
    }
    for _ in 0..el.count {
        for p in &el.props {
            let Some(ct) = p.list else {
                at += p.ty.size();
                continue;
            };
            let c = body.get(at..at + ct.size()).ok_or_else(short)?;
            let n = Scalar::decode(ct, c, be);
            if !(0.0..=u32::MAX as f64).contains(&n) {
                return Err(format!("bad list count {n} in element `{}`", el.name));
            }
            at += ct.size() + n as usize * p.ty.size();
        }
        if at > body.len() {
            return Err(short());
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::super::header::parse_header;
    use super::*;

    fn collect(bytes: &[u8], target: usize) -> Result<Vec<Vec<f64>>, String> {
        let h = parse_header(bytes)?;
        let mut out = Vec::new();
        for_each_item(bytes, &h, target, |_, r| {
            out.push(r.to_vec());
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn skips_earlier_elements() {
        let a = b"ply\nformat ascii 1.0\nelement face 2\nproperty list uchar int idx\nelement vertex 2\n\
property float x\nproperty int y\nend_header\n3 0 1 2\n1 5\n1.5 -2\n2.5 7\n";
        assert_eq!(
            collect(a, 1).unwrap(),
            vec![vec![1.5, -2.0], vec![2.5, 7.0]]
        );
        let mut b =
            b"ply\nformat binary_big_endian 1.0\nelement face 1\nproperty list uchar ushort idx\n\
element vertex 1\nproperty double x\nend_header\n"
                .to_vec();
        b.extend_from_slice(&[2, 0, 1, 0, 2]);
        b.extend_from_slice(&4.5f64.to_be_bytes());
        assert_eq!(collect(&b, 1).unwrap(), vec![vec![4.5]]);
        assert!(
            collect(&b[..b.len() - 1], 1)
                .unwrap_err()
                .contains("truncated")
        );
        assert!(
            collect(&b[..b.len() - 9], 1)
                .unwrap_err()
                .contains("truncated")
        );
    }

    #[test]
    fn bad_ascii_values() {
        let a = b"ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nend_header\n1\nabc\n";
        let e = collect(a, 0).unwrap_err();
        assert!(e.contains("vertex 1") && e.contains("abc"), "{e}");
        let a =
            b"ply\nformat ascii 1.0\nelement vertex 99999999999\nproperty float x\nend_header\n1\n";
        assert!(collect(a, 0).unwrap_err().contains("truncated"));
    }
}
