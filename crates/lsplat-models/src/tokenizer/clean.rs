//! open_clip's text clean-up before tokenizing: `basic_clean` (ftfy's `fix_text`, HTML
//! unescaping twice, strip) and `whitespace_clean`, with Python's semantics for
//! whitespace and `html.unescape`.
//!
//! ftfy's `fix_text` is reproduced for its default configuration except the mojibake
//! repair (`fix_encoding` and the byte-level fixes it drives: `restore_byte_a0`,
//! `replace_lossy_sequences`, `decode_inconsistent_utf8`), which guesses whether text
//! was decoded in the wrong legacy encoding from a large table of heuristics. Text that
//! ftfy would re-decode (UTF-8 read as Latin-1/Windows-125x/MacRoman, e.g. `Ã©` for `é`)
//! is tokenized as written; every other step is applied in ftfy's order, repeated until
//! nothing changes: HTML entities (only in segments without `<`), C1 controls read as
//! Windows-1252, Latin ligatures, full-width characters, curly quotes, line breaks,
//! terminal escapes, control characters, NFC.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::{Captures, Regex};
use unicode_normalization::UnicodeNormalization;

/// Python's `str.isspace`: bidirectional class WS, B or S, or category Zs.
pub fn py_isspace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\u{0b}'
            | '\u{0c}'
            | '\r'
            | '\u{1c}'..='\u{1f}'
            | ' '
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// open_clip's `whitespace_clean`: `" ".join(text.split()).strip()`.
pub fn whitespace_clean(s: &str) -> String {
    s.split(py_isspace)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// open_clip's `basic_clean`: `ftfy.fix_text`, `html.unescape` twice, strip.
pub fn basic_clean(s: &str) -> String {
    let fixed = fix_text(s);
    let once = html_unescape(&fixed);
    let twice = html_unescape(&once);
    py_strip(&twice).to_string()
}

/// open_clip's `_clean_lower`: `whitespace_clean(basic_clean(x)).lower()`.
pub fn clean_lower(s: &str) -> String {
    whitespace_clean(&basic_clean(s)).to_lowercase()
}

/// The HTML5 named character references: name (with or without `;`) → text.
fn html5() -> &'static HashMap<String, String> {
    static T: OnceLock<HashMap<String, String>> = OnceLock::new();
    T.get_or_init(|| {
        include_str!("html5_entities.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (name, cps) = l.split_once('\t')?;
                let text: String = cps
                    .split(' ')
                    .filter_map(|h| u32::from_str_radix(h, 16).ok().and_then(char::from_u32))
                    .collect();
                Some((name.to_string(), text))
            })
            .collect()
    })
}

/// Windows-1252 for the bytes 0x80..=0x9f; the five it leaves undefined map to
/// themselves (HTML's numeric references and ftfy's "sloppy" codec agree on this).
fn cp1252_c1(b: u32) -> char {
    const T: [u32; 32] = [
        0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039,
        0x152, 0x8d, 0x17d, 0x8f, 0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014,
        0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
    ];
    char::from_u32(T[(b - 0x80) as usize]).unwrap_or('\u{fffd}')
}

/// The text of a numeric character reference, as Python's `html.unescape` gives it.
fn numeric_reference(num: Option<u32>) -> Cow<'static, str> {
    let Some(n) = num.filter(|&n| n <= 0x10ffff) else {
        return "\u{fffd}".into();
    };
    match n {
        0 => "\u{fffd}".into(),
        0x0d => "\r".into(),
        0x80..=0x9f => cp1252_c1(n).to_string().into(),
        0xd800..=0xdfff => "\u{fffd}".into(),
        0x01..=0x08 | 0x0b | 0x0e..=0x1f | 0x7f | 0xfdd0..=0xfdef => "".into(),
        _ if n & 0xfffe == 0xfffe => "".into(),
        _ => char::from_u32(n).map_or("\u{fffd}".into(), |c| c.to_string().into()),
    }
}

/// Python's `html.unescape` (HTML5 rules: numeric references, named references with
/// or without `;`, the longest known prefix of an unknown name).
pub fn html_unescape(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\x0c <&#;]{1,32};?)").expect("regex")
    });
    re.replace_all(s, |c: &Captures<'_>| -> String {
        let body = &c[1];
        if let Some(num) = body.strip_prefix('#') {
            let n = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex.trim_end_matches(';'), 16).ok(),
                None => num.trim_end_matches(';').parse::<u32>().ok(),
            };
            return numeric_reference(n).into_owned();
        }
        let table = html5();
        if let Some(t) = table.get(body) {
            return t.clone();
        }
        let chars: Vec<(usize, char)> = body.char_indices().collect();
        for x in (2..chars.len()).rev() {
            let (cut, _) = chars[x];
            if let Some(t) = table.get(&body[..cut]) {
                return format!("{t}{}", &body[cut..]);
            }
        }
        format!("&{body}")
    })
}

/// ftfy's entity table: every `&name;` of HTML5, and the upper-case spelling of the
/// lower-case names when HTML itself does not define it (`&EACUTE;` → `É`).
fn ftfy_entities() -> &'static HashMap<String, String> {
    static T: OnceLock<HashMap<String, String>> = OnceLock::new();
    T.get_or_init(|| {
        let mut out = HashMap::new();
        for (name, text) in html5() {
            if !name.ends_with(';') {
                continue;
            }
            out.insert(format!("&{name}"), text.clone());
            if *name == name.to_lowercase() {
                let upper = format!("&{}", name.to_uppercase());
                if html_unescape(&upper) == upper.as_str() {
                    out.insert(upper, text.to_uppercase());
                }
            }
        }
        out
    })
}

/// ftfy's `unescape_html`.
fn unescape_html(s: &str) -> Cow<'_, str> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"&#?[0-9A-Za-z]{1,24};").expect("regex"));
    re.replace_all(s, |c: &Captures<'_>| -> String {
        let m = &c[0];
        if let Some(t) = ftfy_entities().get(m) {
            return t.clone();
        }
        if m.starts_with("&#") {
            let u = html_unescape(m);
            if !u.contains(';') {
                return u.into_owned();
            }
        }
        m.to_string()
    })
}

/// One character of ftfy's translation tables (C1 controls, ligatures, widths, quotes,
/// control characters), appended to `out`.
fn translate_char(c: char, out: &mut String) {
    let cp = c as u32;
    match c {
        '\u{80}'..='\u{9f}' => out.push(cp1252_c1(cp)),
        _ => out.push(c),
    }
}

fn fix_latin_ligatures(c: char) -> Option<&'static str> {
    Some(match c {
        'Ĳ' => "IJ",
        'ĳ' => "ij",
        'ŉ' => "ʼn",
        'Ǳ' => "DZ",
        'ǲ' => "Dz",
        'ǳ' => "dz",
        'Ǆ' => "DŽ",
        'ǅ' => "Dž",
        'ǆ' => "dž",
        'Ǉ' => "LJ",
        'ǈ' => "Lj",
        'ǉ' => "lj",
        'Ǌ' => "NJ",
        'ǋ' => "Nj",
        'ǌ' => "nj",
        'ﬀ' => "ff",
        'ﬁ' => "fi",
        'ﬂ' => "fl",
        'ﬃ' => "ffi",
        'ﬄ' => "ffl",
        'ﬅ' => "ſt",
        'ﬆ' => "st",
        _ => return None,
    })
}

/// ftfy's `fix_character_width`: the ideographic space and the half-/full-width forms
/// block (U+FF01..U+FFEF) replaced by their NFKC forms.
fn fix_width(c: char, out: &mut String) {
    match c {
        '\u{3000}' => out.push(' '),
        '\u{ff01}'..='\u{ffef}' => out.extend(std::iter::once(c).nfkc()),
        _ => out.push(c),
    }
}

fn is_removed_control(c: char) -> bool {
    matches!(
        c,
        '\u{00}'..='\u{08}'
            | '\u{0b}'
            | '\u{0e}'..='\u{1f}'
            | '\u{7f}'
            | '\u{206a}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffc}'
    )
}

fn map_chars(s: &str, f: impl Fn(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        f(c, &mut out);
    }
    out
}

/// One pass of ftfy's fixers over a segment, in ftfy's order.
fn fix_pass(s: &str, unescape: bool) -> String {
    let mut t: String = if unescape {
        unescape_html(s).into_owned()
    } else {
        s.to_string()
    };
    t = map_chars(&t, translate_char);
    t = map_chars(&t, |c, o| match fix_latin_ligatures(c) {
        Some(r) => o.push_str(r),
        None => o.push(c),
    });
    t = map_chars(&t, fix_width);
    t = map_chars(&t, |c, o| {
        o.push(match c {
            '\u{2bc}' | '\u{2018}'..='\u{201b}' => '\'',
            '\u{201c}'..='\u{201f}' => '"',
            _ => c,
        })
    });
    t = t.replace("\r\n", "\n");
    t = map_chars(&t, |c, o| {
        o.push(match c {
            '\r' | '\u{2028}' | '\u{2029}' | '\u{85}' => '\n',
            _ => c,
        })
    });
    static ANSI: OnceLock<Regex> = OnceLock::new();
    let ansi = ANSI.get_or_init(|| Regex::new(r"\x1b\[(?:\d|;)*[a-zA-Z]").expect("regex"));
    t = ansi.replace_all(&t, "").into_owned();
    t.retain(|c| !is_removed_control(c));
    t.nfc().collect()
}

/// ftfy's `fix_text` with its default configuration, less the mojibake repair (see the
/// module documentation): the text is cut after each line break, each segment fixed
/// until stable; once a segment holds `<`, HTML entities are left alone from there on.
pub fn fix_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut unescape = true;
    for segment in s.split_inclusive('\n') {
        if segment.contains('<') {
            unescape = false;
        }
        let mut text = segment.to_string();
        loop {
            let fixed = fix_pass(&text, unescape);
            if fixed == text {
                break;
            }
            text = fixed;
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_whitespace_and_unescape() {
        assert_eq!(whitespace_clean("  a\u{1c}b\u{3000}c\n\td  "), "a b c d");
        assert_eq!(py_strip("\u{85} x \u{a0}"), "x");
        assert_eq!(
            html_unescape("&amp;lt; &ampx &notit; &#65;&#x42;&#0;&#128;&#1;"),
            "&lt; &x ¬it; AB\u{fffd}€"
        );
        assert_eq!(
            html_unescape("&#99999999999999;&#xD800;&unknown;"),
            "\u{fffd}\u{fffd}&unknown;"
        );
    }

    #[test]
    fn ftfy_fixes_in_order() {
        assert_eq!(fix_text("“curly” ‘quotes’"), "\"curly\" 'quotes'");
        assert_eq!(fix_text("ﬁne ＡＢＣ１２３\u{3000}x"), "fine ABC123 x");
        assert_eq!(fix_text("a\r\nb\rc\u{2028}d"), "a\nb\nc\nd");
        assert_eq!(fix_text("\x1b[31mred\x1b[0m\u{7}"), "red");
        assert_eq!(
            fix_text("e\u{301} &amp; &EACUTE; &#x93;x&#x94;"),
            "é & É \"x\""
        );
        assert_eq!(fix_text("<b>&amp;</b>\n&amp;"), "<b>&amp;</b>\n&amp;");
        assert_eq!(fix_text("&amp;\n<b>"), "&\n<b>");
    }
}
