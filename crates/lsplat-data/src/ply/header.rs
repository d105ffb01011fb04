//! PLY header parsing: format, elements and their properties.

/// Storage format of the body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Format {
    Ascii,
    BinaryLe,
    BinaryBe,
}

/// Scalar type of a property.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    F32,
    F64,
}

impl Scalar {
    fn parse(s: &str) -> Option<Scalar> {
        Some(match s {
            "char" | "int8" => Scalar::I8,
            "uchar" | "uint8" => Scalar::U8,
            "short" | "int16" => Scalar::I16,
            "ushort" | "uint16" => Scalar::U16,
            "int" | "int32" => Scalar::I32,
            "uint" | "uint32" => Scalar::U32,
            "float" | "float32" => Scalar::F32,
            "double" | "float64" => Scalar::F64,
            _ => return None,
        })
    }

    /// Size in bytes.
    pub(crate) fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::F64 => 8,
        }
    }

    /// Decodes one value from exactly `size()` bytes.
    pub(crate) fn decode(self, b: &[u8], big_endian: bool) -> f64 {
        let mut a = [0u8; 8];
        let n = self.size().min(b.len());
        a[..n].copy_from_slice(&b[..n]);
        if big_endian {
            a[..n].reverse();
        }
        match self {
            Scalar::I8 => a[0] as i8 as f64,
            Scalar::U8 => a[0] as f64,
            Scalar::I16 => i16::from_le_bytes([a[0], a[1]]) as f64,
            Scalar::U16 => u16::from_le_bytes([a[0], a[1]]) as f64,
            Scalar::I32 => i32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Scalar::U32 => u32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Scalar::F32 => f32::from_le_bytes([a[0], a[1], a[2], a[3]]) as f64,
            Scalar::F64 => f64::from_le_bytes(a),
        }
    }
}

/// A property: a scalar, or a list with a count type and an item type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Property {
    pub name: String,
    pub ty: Scalar,
    /// `Some(count type)` for list properties.
    pub list: Option<Scalar>,
}

/// An element with its count and properties.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Element {
    pub name: String,
    pub count: usize,
    pub props: Vec<Property>,
}

impl Element {
    /// Bytes per item when every property is a scalar.
    pub(crate) fn fixed_stride(&self) -> Option<usize> {
        self.props
            .iter()
            .try_fold(0, |a, p| p.list.is_none().then(|| a + p.ty.size()))
    }
}

/// A parsed header and the offset of the body.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    pub format: Format,
    pub elements: Vec<Element>,
    pub body_offset: usize,
}

/// Parses the header at the start of `bytes`. Errors are plain problem texts.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<Header, String> {
    if !bytes.starts_with(b"ply\n") && !bytes.starts_with(b"ply\r\n") {
        return Err("not a PLY file (it does not start with `ply`)".into());
    }
    const END: &[u8] = b"end_header";
    let limit = bytes.len().min(1 << 20);
    let end = bytes[..limit]
        .windows(END.len())
        .position(|w| w == END)
        .ok_or("bad header: no `end_header` line in the first MiB")?;
    let mut body_offset = end + END.len();
    if bytes[body_offset..].starts_with(b"\r\n") {
        body_offset += 2;
    } else if bytes[body_offset..].starts_with(b"\n") {
        body_offset += 1;
    } else {
        return Err("bad header: `end_header` is not followed by a newline".into());
    }
    let text =
        std::str::from_utf8(&bytes[..end]).map_err(|_| "bad header: it is not text".to_string())?;
    let mut format = None;
    let mut elements: Vec<Element> = Vec::new();
    for (no, line) in text.lines().enumerate().skip(1) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |what: &str| format!("bad header line {}: {what}: `{}`", no + 1, line.trim());
        match words.as_slice() {
            [] | ["comment", ..] | ["obj_info", ..] => {}
            ["format", _, version] if *version != "1.0" => {
                return Err(bad("unknown PLY version (1.0 is the only one)"));
            }
            ["format", f, _] => {
                format = Some(match *f {
                    "ascii" => Format::Ascii,
                    "binary_little_endian" => Format::BinaryLe,
                    "binary_big_endian" => Format::BinaryBe,
                    _ => return Err(bad("unknown format")),
                });
            }
            ["element", name, count] => {
                let count = count
                    .parse()
                    .map_err(|_| bad("element count is not a number"))?;
                elements.push(Element {
                    name: name.to_string(),
                    count,
                    props: Vec::new(),
                });
            }
            ["property", "list", ct, it, name] => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| bad("property before any element"))?;
                let list = Some(Scalar::parse(ct).ok_or_else(|| bad("unknown list count type"))?);
                let ty = Scalar::parse(it).ok_or_else(|| bad("unknown list item type"))?;
                el.props.push(Property {
                    name: name.to_string(),
                    ty,
                    list,
                });
            }
            ["property", ty, name] => {
                let el = elements
                    .last_mut()
                    .ok_or_else(|| bad("property before any element"))?;
                let ty = Scalar::parse(ty).ok_or_else(|| bad("unknown property type"))?;
                el.props.push(Property {
                    name: name.to_string(),
                    ty,
                    list: None,
                });
            }
            _ => return Err(bad("not understood")),
        }
    }
    let format = format.ok_or("bad header: no `format` line")?;
    Ok(Header {
        format,
        elements,
        body_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_elements_and_types() {
        let h = b"ply\r\nformat ascii 1.0\ncomment hi\nelement vertex 2\nproperty float x\nproperty uchar red\n\
element face 1\nproperty list uchar int vertex_indices\nend_header\r\n1 2\n";
        let h = parse_header(h).unwrap();
        assert_eq!(h.format, Format::Ascii);
        assert_eq!(h.elements.len(), 2);
        assert_eq!(h.elements[0].fixed_stride(), Some(5));
        assert_eq!(h.elements[1].fixed_stride(), None);
        assert_eq!(h.body_offset, h.body_offset.min(200));
    }

    #[test]
    fn rejects_bad_headers() {
        assert!(parse_header(b"PLY\n").unwrap_err().contains("not a PLY"));
        assert!(
            parse_header(b"ply\nformat ascii 1.0\n")
                .unwrap_err()
                .contains("end_header")
        );
        let e = parse_header(b"ply\nformat ascii 1.0\nelement vertex x\nend_header\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("count"), "{e}");
        let e = parse_header(b"ply\nformat ascii 1.0\nelement v 1\nproperty half x\nend_header\n")
            .unwrap_err();
        assert!(e.contains("type"), "{e}");
        assert!(
            parse_header(b"ply\nelement v 1\nend_header\n")
                .unwrap_err()
                .contains("format")
        );
        assert!(parse_header(b"ply\nformat ascii 1.0\nproperty float x\nend_header\n").is_err());
        assert!(parse_header(b"ply\nformat ascii 1.0\nend_headerX").is_err());
    }

    #[test]
    fn decodes_scalars() {
        assert_eq!(Scalar::I16.decode(&(-7i16).to_le_bytes(), false), -7.0);
        assert_eq!(Scalar::F32.decode(&1.5f32.to_be_bytes(), true), 1.5);
        assert_eq!(Scalar::F64.decode(&2.25f64.to_le_bytes(), false), 2.25);
        assert_eq!(Scalar::U8.decode(&[200], false), 200.0);
    }
}
