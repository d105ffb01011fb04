//! The configuration reference, generated from the configuration types.
//!
//! Every section and enum of [`crate::config`] derives [`Describe`]
//! (`lsplat-config-derive`): the derive lists each key under its serde name with its
//! doc comment and `#[config(range = "...")]`, and asks the key's type to describe
//! itself. The defaults come from `Config::default()`, the one source of defaults, so
//! a new key shows up here — in `lsplat-engine config`, `config --toml` and
//! docs/config.md — with nothing else to edit.
//!
//! Ranges use a small notation that [`Range::parse`] reads (and a test checks against
//! `Config::validate`): `[a, b]`, `(a, b]`, `[a, b)`, `(a, b)`, `>= a`, `> a`,
//! `<= b`, `a or b or c`.

use std::path::PathBuf;

use crate::Config;

/// What a configuration type is, for the reference.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeDoc {
    /// A scalar, named as in TOML (`integer`, `float`, `boolean`, `string`, `path`).
    Scalar(&'static str),
    /// An optional value (unset by default when the default is `None`).
    Optional(Box<TypeDoc>),
    /// An array of values.
    List(Box<TypeDoc>),
    /// One of these strings (`(name, doc)`).
    Choice(Vec<(&'static str, String)>),
    /// A table of keys.
    Section {
        /// The section's doc comment (of its type).
        doc: String,
        /// Its keys, in declaration order.
        fields: Vec<Field>,
    },
}

/// One key of a section.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The key's name in TOML.
    pub key: &'static str,
    /// Its doc comment.
    pub doc: String,
    /// Its allowed values (`#[config(range = "...")]`), if restricted.
    pub range: Option<String>,
    /// Its type.
    pub ty: TypeDoc,
}

/// A configuration type that can describe itself (derive it with
/// `#[derive(lsplat_config_derive::Describe)]`).
pub trait Describe {
    /// The type, for the reference.
    fn describe() -> TypeDoc;
}

macro_rules! scalar {
    ($name:literal: $($t:ty),*) => {
        $(impl Describe for $t {
            fn describe() -> TypeDoc {
                TypeDoc::Scalar($name)
            }
        })*
    };
}
scalar!("integer": u8, u16, u32, u64, i32, i64, usize);
scalar!("float": f32, f64);
scalar!("boolean": bool);
scalar!("string": String);
scalar!("path": PathBuf);

impl<T: Describe> Describe for Option<T> {
    fn describe() -> TypeDoc {
        TypeDoc::Optional(Box::new(T::describe()))
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe() -> TypeDoc {
        TypeDoc::List(Box::new(T::describe()))
    }
}

impl TypeDoc {
    /// The type in words: `integer`, `path (optional)`, `list of integer`,
    /// `"a" | "b"`.
    pub fn name(&self) -> String {
        match self {
            TypeDoc::Scalar(s) => s.to_string(),
            TypeDoc::Optional(t) => format!("{} (optional)", t.name()),
            TypeDoc::List(t) => format!("list of {}", t.name()),
            TypeDoc::Choice(v) => v
                .iter()
                .map(|(n, _)| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(" | "),
            TypeDoc::Section { .. } => "section".into(),
        }
    }
}

/// One row of the reference: a leaf key with its full dotted name.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// `section.key`.
    pub key: String,
    /// The type in words.
    pub ty: String,
    /// The default as TOML (`unset` for an optional value without one).
    pub default: String,
    /// Allowed values, if restricted.
    pub range: Option<String>,
    /// The doc comment, with an enum's choices appended (`name: doc`).
    pub doc: String,
}

/// A section of the reference: its name, doc comment and keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// The section (`train`).
    pub name: String,
    /// Its doc comment (the field's in `Config`).
    pub doc: String,
    /// Its keys.
    pub keys: Vec<Key>,
}

/// The whole reference, section by section, in declaration order.
pub fn reference() -> Vec<Section> {
    let defaults = toml::Value::try_from(Config::default()).expect("config serialises");
    let TypeDoc::Section { fields, .. } = Config::describe() else {
        unreachable!("Config is a section")
    };
    let mut out = Vec::new();
    for f in fields {
        let mut keys = Vec::new();
        collect(f.key, &f.ty, defaults.get(f.key), &mut keys);
        out.push(Section {
            name: f.key.to_string(),
            doc: f.doc.clone(),
            keys,
        });
    }
    out
}

fn collect(prefix: &str, ty: &TypeDoc, default: Option<&toml::Value>, out: &mut Vec<Key>) {
    let TypeDoc::Section { fields, .. } = ty else {
        return;
    };
    for f in fields {
        let key = format!("{prefix}.{}", f.key);
        let value = default.and_then(|d| d.get(f.key));
        if matches!(f.ty, TypeDoc::Section { .. }) {
            collect(&key, &f.ty, value, out);
            continue;
        }
        let mut doc = f.doc.clone();
        let choices = match &f.ty {
            TypeDoc::Choice(c) => Some(c),
            TypeDoc::Optional(t) | TypeDoc::List(t) => match &**t {
                TypeDoc::Choice(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        for (name, d) in choices.into_iter().flatten() {
            doc.push_str(&format!("\n\n- `{name}`: {d}"));
        }
        out.push(Key {
            key,
            ty: f.ty.name(),
            default: value.map_or("unset".into(), toml_inline),
            range: f.range.clone(),
            doc,
        });
    }
}

/// A value as inline TOML.
fn toml_inline(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        toml::Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        // An f32 default prints as the shortest decimal that reads back as it
        // (0.0025, not 0.0024999999441206455).
        toml::Value::Float(x) if (*x as f32) as f64 == *x => format!("{:?}", *x as f32),
        toml::Value::Float(x) => format!("{x:?}"),
        other => other.to_string(),
    }
}

/// `lsplat-engine config`: every key with its type, default, range and doc.
pub fn text() -> String {
    let mut s = String::new();
    for sec in reference() {
        s.push_str(&format!("[{}]  {}\n", sec.name, first_sentence(&sec.doc)));
        for k in &sec.keys {
            s.push_str(&format!("  {} = {}    ({}", k.key, k.default, k.ty));
            if let Some(r) = &k.range {
                s.push_str(&format!("; {r}"));
            }
            s.push_str(")\n");
            for line in wrap(&k.doc, 84) {
                s.push_str(&format!("      {line}\n"));
            }
        }
        s.push('\n');
    }
    s
}

/// `lsplat-engine config --toml`: a complete scene file, every key at its default
/// with its doc as comments (optional keys without a default commented out).
pub fn toml() -> String {
    let mut s = String::from(
        "# lsplat-engine scene file: every key at its default (`lsplat-engine config --toml`).\n\
         # Relative paths in this file are relative to the file's folder; paths given with\n\
         # --set on the command line are relative to the working directory.\n",
    );
    for sec in reference() {
        s.push('\n');
        for line in wrap(&sec.doc, 86) {
            s.push_str(&format!("# {line}\n"));
        }
        s.push_str(&format!("[{}]\n", sec.name));
        for k in &sec.keys {
            let name = &k.key[sec.name.len() + 1..];
            for line in wrap(&k.doc, 86) {
                s.push_str(&format!("# {line}\n"));
            }
            let mut ty = format!("# type: {}", k.ty);
            if let Some(r) = &k.range {
                ty.push_str(&format!("; range: {r}"));
            }
            s.push_str(&format!("{ty}\n"));
            if k.default == "unset" {
                s.push_str(&format!("# {name} =\n"));
            } else {
                s.push_str(&format!("{name} = {}\n", k.default));
            }
        }
    }
    s
}

/// docs/config.md: the reference as Markdown.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Configuration reference\n\n\
         Generated from the configuration types (`lsplat-core/src/config.rs`) by\n\
         `lsplat-engine config --markdown`; a test fails when this file drifts from them\n\
         (regenerate: `cargo run -p lsplat-cli -- config --markdown > docs/config.md`).\n\n\
         A run's configuration is these defaults, overlaid by the scene file, overlaid by\n\
         `--set key=value` (repeatable). Relative paths in a scene file are relative to\n\
         that file's folder; paths given with `--set` are relative to the working\n\
         directory; a run records them resolved (absolute) in its `config.toml`.\n\
         `lsplat-engine config --toml` prints a complete, commented scene file.\n",
    );
    for sec in reference() {
        s.push_str(&format!("\n## `[{}]`\n\n{}\n\n", sec.name, sec.doc));
        s.push_str("| key | type | default | range |\n|---|---|---|---|\n");
        for k in &sec.keys {
            s.push_str(&format!(
                "| `{}` | {} | `{}` | {} |\n",
                k.key,
                k.ty.replace('|', "\\|"),
                k.default,
                k.range.as_deref().unwrap_or("").replace('|', "\\|")
            ));
        }
        s.push('\n');
        for k in &sec.keys {
            s.push_str(&format!(
                "- `{}`: {}\n",
                k.key,
                k.doc.replace("\n\n", "\n  ")
            ));
        }
    }
    s
}

fn first_sentence(doc: &str) -> &str {
    doc.split("\n\n").next().unwrap_or("")
}

/// Words of `text` in lines of at most `width` characters (paragraphs kept).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (i, para) in text.split("\n\n").enumerate() {
        if i > 0 {
            out.push(String::new());
        }
        let mut line = String::new();
        for w in para.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
                out.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(w);
        }
        if !line.is_empty() {
            out.push(line);
        }
    }
    out
}

/// An allowed set of numbers, as written in `#[config(range = "...")]`.
#[derive(Clone, Debug, PartialEq)]
pub enum Range {
    /// An interval; `None` bounds are open-ended, `bool` = inclusive.
    Interval {
        /// Lower bound and whether it is included.
        low: Option<(f64, bool)>,
        /// Upper bound and whether it is included.
        high: Option<(f64, bool)>,
    },
    /// One of these values.
    OneOf(Vec<f64>),
}

impl Range {
    /// Reads the notation of the module doc; `None` when it is not that notation.
    pub fn parse(s: &str) -> Option<Range> {
        let s = s.trim();
        let num = |t: &str| t.trim().parse::<f64>().ok();
        if let Some(r) = s.strip_prefix(">=") {
            return Some(Range::Interval {
                low: Some((num(r)?, true)),
                high: None,
            });
        }
        if let Some(r) = s.strip_prefix('>') {
            return Some(Range::Interval {
                low: Some((num(r)?, false)),
                high: None,
            });
        }
        if let Some(r) = s.strip_prefix("<=") {
            return Some(Range::Interval {
                low: None,
                high: Some((num(r)?, true)),
            });
        }
        if s.contains(" or ") {
            return s
                .split(" or ")
                .map(num)
                .collect::<Option<_>>()
                .map(Range::OneOf);
        }
        let low_inc = match s.chars().next()? {
            '[' => true,
            '(' => false,
            _ => return None,
        };
        let high_inc = match s.chars().last()? {
            ']' => true,
            ')' => false,
            _ => return None,
        };
        let (a, b) = s[1..s.len() - 1].split_once(',')?;
        Some(Range::Interval {
            low: Some((num(a)?, low_inc)),
            high: Some((num(b)?, high_inc)),
        })
    }

    /// Whether `v` is allowed.
    pub fn contains(&self, v: f64) -> bool {
        match self {
            Range::OneOf(list) => list.contains(&v),
            Range::Interval { low, high } => {
                low.is_none_or(|(a, inc)| if inc { v >= a } else { v > a })
                    && high.is_none_or(|(b, inc)| if inc { v <= b } else { v < b })
            }
        }
    }

    /// Values on both sides of each bound (and the listed values with neighbours), to
    /// check a validator against the range.
    pub fn probes(&self) -> Vec<f64> {
        let near = |x: f64| {
            let step = if x.fract() == 0.0 && x.abs() >= 1.0 {
                1.0
            } else {
                (x.abs() * 1e-3).max(1e-6)
            };
            [x - step, x, x + step]
        };
        match self {
            Range::OneOf(list) => list.iter().flat_map(|&x| near(x)).collect(),
            Range::Interval { low, high } => low
                .iter()
                .chain(high.iter())
                .flat_map(|&(x, _)| near(x))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
