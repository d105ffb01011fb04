use super::*;

#[test]
fn every_key_is_documented_with_a_type_and_a_default() {
    let sections = reference();
    assert!(sections.iter().any(|s| s.name == "train"));
    for s in &sections {
        assert!(!s.doc.is_empty(), "section [{}] has no doc comment", s.name);
        for k in &s.keys {
            assert!(!k.doc.is_empty(), "`{}` has no doc comment", k.key);
            assert!(!k.ty.is_empty() && !k.default.is_empty(), "{k:?}");
        }
    }
    let lr = sections
        .iter()
        .flat_map(|s| &s.keys)
        .find(|k| k.key == "train.lr")
        .expect("train.lr listed");
    assert_eq!(
        (lr.ty.as_str(), lr.default.as_str(), lr.range.as_deref()),
        ("float", "0.0025", Some("(0, 1]"))
    );
    let backend = sections
        .iter()
        .flat_map(|s| &s.keys)
        .find(|k| k.key == "device.backend")
        .expect("device.backend listed");
    assert!(backend.ty.contains("\"cpu\"") && backend.doc.contains("- `simt`:"));
    let splats = sections
        .iter()
        .flat_map(|s| &s.keys)
        .find(|k| k.key == "scene.splats")
        .expect("scene.splats listed");
    assert_eq!(
        (splats.ty.as_str(), splats.default.as_str()),
        ("path (optional)", "unset")
    );
}

/// The ranges printed are the ones `Config::validate` enforces: each value next to a
/// bound is accepted exactly when the range contains it.
#[test]
fn printed_ranges_are_the_validated_ones() {
    let mut checked = 0;
    for k in reference().iter().flat_map(|s| &s.keys) {
        let Some(text) = &k.range else { continue };
        let range = Range::parse(text)
            .unwrap_or_else(|| panic!("`{}`: range `{text}` is not in the notation", k.key));
        let integer = k.ty.starts_with("integer");
        for v in range.probes() {
            if integer && v.fract() != 0.0 {
                continue;
            }
            let set = if integer {
                format!("{}={}", k.key, v as i64)
            } else {
                format!("{}={v:e}", k.key)
            };
            let r = Config::default().set(&set);
            assert_eq!(
                r.is_ok(),
                range.contains(v),
                "{set}: range `{text}` says {}, validate says {r:?}",
                range.contains(v)
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} probes");
}

#[test]
fn range_notation() {
    let r = Range::parse("(0, 1]").unwrap();
    assert!(!r.contains(0.0) && r.contains(1e-9) && r.contains(1.0) && !r.contains(1.1));
    let r = Range::parse(">= 8").unwrap();
    assert!(r.contains(8.0) && !r.contains(7.0));
    let r = Range::parse("8 or 16").unwrap();
    assert!(r.contains(16.0) && !r.contains(12.0));
    assert!(Range::parse("1 to 3").is_none());
}

#[test]
fn the_commented_scene_file_reads_back_as_the_defaults() {
    let text = toml();
    assert!(text.contains("[train]\n") && text.contains("# type: float; range: (0, 1]\nlr = "));
    let back = Config::from_toml(&text, std::path::Path::new("config --toml")).unwrap();
    assert_eq!(back, Config::default());
}

/// docs/config.md is `markdown()`: regenerate it with
/// `cargo run -p lsplat-cli -- config --markdown > docs/config.md`
/// (or `LSPLAT_BLESS=1` on this test).
#[test]
fn docs_config_md_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
    let want = markdown();
    if std::env::var_os("LSPLAT_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/config.md drifted from the configuration types; regenerate it with \
         `cargo run -p lsplat-cli -- config --markdown > docs/config.md`"
    );
}
