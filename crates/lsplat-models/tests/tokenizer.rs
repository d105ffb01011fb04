//! The tokenizer against open_clip's own (tokenizer.py from the open_clip_torch wheel,
//! with ftfy and regex) on 2 400 seeded strings: unicode, emoji, CJK, accents,
//! punctuation, HTML entities, curly quotes, full-width forms, control characters,
//! long texts, empty and whitespace-only ones.

mod common;

use lsplat_models::tokenizer::Tokenizer;

#[test]
fn tokens_equal_open_clips_on_generated_strings() {
    let what = "tokenizer vs open_clip";
    let Some(py) = common::python(what) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tokens.json");
    let Some(()) = common::run_script(&py, "tests/clip_tokens.py", &[out.to_str().unwrap()], what)
    else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let vocab = std::path::PathBuf::from(doc["vocab"].as_str().unwrap());
    let tok = Tokenizer::from_file(&vocab).unwrap();
    assert_eq!(tok.vocab_size(), 49_408);
    let strings = doc["strings"].as_array().unwrap();
    let tokens = doc["tokens"].as_array().unwrap();
    let excluded = doc["excluded"].as_array().unwrap();
    assert!(strings.len() >= 2000, "{} strings", strings.len());
    // Only the planted mojibake (UTF-8 read as Windows-1252) is left out.
    for e in excluded {
        let e = e.as_str().unwrap();
        assert!(e.contains('Ã') || e.contains("â€"), "left out: {e:?}");
    }
    let (mut bad, mut empty, mut long) = (Vec::new(), 0, 0);
    for (s, want) in strings.iter().zip(tokens) {
        let s = s.as_str().unwrap();
        let want: Vec<i64> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let body = tok.encode(s);
        let got = tok.frame(&body);
        if body.is_empty() {
            empty += 1;
            assert!(
                tok.tokenize(s).is_err(),
                "{s:?} is empty after the clean-up"
            );
        }
        long += got.truncated() as usize;
        if got.ids != want {
            bad.push(format!(
                "{s:?}\n  engine   {:?}\n  open_clip {:?}",
                got.ids, want
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} strings differ; first:\n{}",
        bad.len(),
        strings.len(),
        bad[..bad.len().min(8)].join("\n")
    );
    assert!(
        empty >= 5 && long >= 50,
        "{empty} empty and {long} long strings"
    );
    eprintln!(
        "{} strings equal ({empty} empty, {long} cut to 77 tokens); {} left out (mojibake)",
        strings.len(),
        excluded.len()
    );
}
