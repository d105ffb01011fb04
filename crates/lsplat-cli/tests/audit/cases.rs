//! The generated cases, reader by reader. Every `Expect::Fail` input is invalid by
//! construction (a count that disagrees with the bytes, a value out of its domain, a
//! missing part); `Expect::Any` inputs are random byte flips.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::fixture::Fixture;
use crate::{Case, Expect};

fn v(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// A seeded generator for the random flips (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `bytes` with `k` random bytes of `range` replaced.
fn flipped(bytes: &[u8], range: std::ops::Range<usize>, k: usize, rng: &mut Rng) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..k {
        let i = range.start + rng.below(range.len());
        b[i] ^= 1 << rng.below(8);
    }
    b
}

pub fn all(fx: &Fixture) -> Vec<Case> {
    let mut out = Vec::new();
    ply(fx, &mut out);
    cameras_json(fx, &mut out);
    transforms(fx, &mut out);
    colmap(fx, &mut out);
    npy(fx, &mut out);
    dataset(fx, &mut out);
    embeddings(fx, &mut out);
    labels(fx, &mut out);
    checkpoints(fx, &mut out);
    scene_files(fx, &mut out);
    config_values(&mut out);
    flags(fx, &mut out);
    out
}

/// Writes `bytes` as `name` in a fresh case folder.
fn put(fx: &Fixture, case: &str, name: &str, bytes: &[u8]) -> PathBuf {
    let d = fx.case_dir(case);
    let f = d.join(name);
    std::fs::write(&f, bytes).unwrap();
    f
}

// ---------------------------------------------------------------------------- PLY

fn ply(fx: &Fixture, out: &mut Vec<Case>) {
    let good = std::fs::read(&fx.ply).unwrap();
    let end = good.windows(11).position(|w| w == b"end_header\n").unwrap() + 11;
    let header = String::from_utf8(good[..end].to_vec()).unwrap();
    let props: Vec<String> = header
        .lines()
        .filter_map(|l| l.strip_prefix("property float "))
        .map(str::to_string)
        .collect();
    let n: usize = header
        .lines()
        .find_map(|l| l.strip_prefix("element vertex "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stride = 4 * props.len();
    assert_eq!(good.len(), end + n * stride, "a float-only PLY");
    let at = |name: &str| 4 * props.iter().position(|q| q == name).unwrap();
    let edit = |from: &str, to: &str| {
        assert!(header.contains(from), "{from}");
        let mut b = header.replacen(from, to, 1).into_bytes();
        b.extend_from_slice(&good[end..]);
        b
    };
    let body = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    let put_f32 = |b: &mut Vec<u8>, off: usize, x: f32| {
        b[end + off..end + off + 4].copy_from_slice(&x.to_le_bytes())
    };
    let mut inputs: Vec<(String, Vec<u8>, Expect)> = vec![
        ("control".into(), good.clone(), Expect::Succeed),
        ("empty file".into(), Vec::new(), Expect::Fail),
        ("magic only".into(), b"ply\n".to_vec(), Expect::Fail),
        (
            "cut in the header".into(),
            good[..end / 2].to_vec(),
            Expect::Fail,
        ),
        (
            "header without body".into(),
            good[..end].to_vec(),
            Expect::Fail,
        ),
        (
            "cut in the body".into(),
            good[..end + n * stride / 2 + 3].to_vec(),
            Expect::Fail,
        ),
        (
            "one byte short".into(),
            good[..good.len() - 1].to_vec(),
            Expect::Fail,
        ),
        ("bad magic".into(), edit("ply\n", "plx\n"), Expect::Fail),
        (
            "zero vertices".into(),
            edit(&format!("element vertex {n}"), "element vertex 0"),
            Expect::Fail,
        ),
        (
            "one vertex too many".into(),
            edit(
                &format!("element vertex {n}"),
                &format!("element vertex {}", n + 1),
            ),
            Expect::Fail,
        ),
        (
            "2^32-1 vertices".into(),
            edit(&format!("element vertex {n}"), "element vertex 4294967295"),
            Expect::Fail,
        ),
        (
            "count past u64".into(),
            edit(
                &format!("element vertex {n}"),
                "element vertex 99999999999999999999999",
            ),
            Expect::Fail,
        ),
        (
            "negative count".into(),
            edit(&format!("element vertex {n}"), "element vertex -3"),
            Expect::Fail,
        ),
        (
            "count not a number".into(),
            edit(&format!("element vertex {n}"), "element vertex many"),
            Expect::Fail,
        ),
        (
            "opacity missing".into(),
            edit("property float opacity\n", ""),
            Expect::Fail,
        ),
        (
            "x as double".into(),
            edit("property float x\n", "property double x\n"),
            Expect::Fail,
        ),
        (
            "unknown type".into(),
            edit("property float y\n", "property quad y\n"),
            Expect::Fail,
        ),
        (
            "ascii header on a binary body".into(),
            edit("format binary_little_endian 1.0", "format ascii 1.0"),
            Expect::Fail,
        ),
        (
            "format version 2".into(),
            edit(
                "format binary_little_endian 1.0",
                "format binary_little_endian 2.0",
            ),
            Expect::Fail,
        ),
        (
            "no end_header".into(),
            edit("end_header\n", "end_headr\n"),
            Expect::Fail,
        ),
        (
            "garbage header line".into(),
            edit("end_header\n", "foo bar baz\nend_header\n"),
            Expect::Fail,
        ),
        (
            "all bits set (NaN everywhere)".into(),
            body(&|b| b[end..].iter_mut().for_each(|x| *x = 0xFF)),
            Expect::Fail,
        ),
        (
            "x is NaN".into(),
            body(&|b| put_f32(b, at("x"), f32::NAN)),
            Expect::Fail,
        ),
        (
            "scale is +inf".into(),
            body(&|b| put_f32(b, at("scale_0"), f32::INFINITY)),
            Expect::Fail,
        ),
        (
            "opacity is -inf".into(),
            body(&|b| put_f32(b, at("opacity"), f32::NEG_INFINITY)),
            Expect::Fail,
        ),
        (
            // Documented rule (Gaussians::normalize_rotations): a zero quaternion is
            // read as the identity, so this one is a control.
            "zero quaternion (read as the identity)".into(),
            body(&|b| {
                ["rot_0", "rot_1", "rot_2", "rot_3"]
                    .iter()
                    .for_each(|r| put_f32(b, at(r), 0.0))
            }),
            Expect::Succeed,
        ),
        (
            "duplicate property".into(),
            edit("property float y\n", "property float y\nproperty float y\n"),
            Expect::Fail,
        ),
    ];
    let mut rng = Rng(0x91a);
    for k in 0..10 {
        inputs.push((
            format!("header flip {k}"),
            flipped(&good, 0..end, 1, &mut rng),
            Expect::Any,
        ));
        inputs.push((
            format!("body flips {k}"),
            flipped(&good, end..good.len(), 8, &mut rng),
            Expect::Any,
        ));
    }
    let cams = fx.scene_dir.join("cameras.json");
    let ds = fx.scene_dir.join("dataset");
    for (i, (name, bytes, expect)) in inputs.into_iter().enumerate() {
        let case = format!("ply{i}");
        let f = put(fx, &case, "splat.ply", &bytes);
        let d = f.parent().unwrap().to_path_buf();
        out.push(Case::new(
            "ply: synth",
            name.clone(),
            v(&[
                "synth",
                "--splats",
                &p(&f),
                "--orbit",
                "2",
                "--width",
                "16",
                "--height",
                "12",
                "--out",
                &p(&d.join("synth")),
            ]),
            expect,
        ));
        let scene = fx.scene_with(&d, &f, &cams, &ds);
        out.push(Case::new(
            "ply: train",
            name,
            v(&[
                "train",
                "--scene",
                &p(&scene),
                "--out",
                &p(&d.join("run")),
                "--set",
                "train.iterations=2",
                "--set",
                "log.eval=false",
            ]),
            expect,
        ));
    }
}

// ---------------------------------------------------------------- cameras.json

fn json_cases(
    fx: &Fixture,
    family: &'static str,
    file: &str,
    good: &Value,
    edits: Vec<(&str, Box<dyn Fn(&mut Value)>)>,
    out: &mut Vec<Case>,
) {
    let text = good.to_string();
    let mut inputs: Vec<(String, Vec<u8>, Expect)> = vec![
        ("control".into(), text.clone().into_bytes(), Expect::Succeed),
        ("empty file".into(), Vec::new(), Expect::Fail),
        (
            "cut in half".into(),
            text.as_bytes()[..text.len() / 2].to_vec(),
            Expect::Fail,
        ),
        ("null".into(), b"null".to_vec(), Expect::Fail),
        (
            "not UTF-8".into(),
            vec![0xff, 0xfe, b'[', 0x80],
            Expect::Fail,
        ),
    ];
    for (name, f) in edits {
        let mut j = good.clone();
        f(&mut j);
        inputs.push((name.into(), j.to_string().into_bytes(), Expect::Fail));
    }
    for (i, (name, bytes, expect)) in inputs.into_iter().enumerate() {
        let case = format!("{}{i}", file.replace('.', "_"));
        let f = put(fx, &case, file, &bytes);
        let d = f.parent().unwrap().to_path_buf();
        out.push(Case::new(
            family,
            name,
            v(&[
                "synth",
                "--splats",
                &p(&fx.ply),
                "--cameras",
                &p(&f),
                "--out",
                &p(&d.join("synth")),
            ]),
            expect,
        ));
    }
}

fn cameras_json(fx: &Fixture, out: &mut Vec<Case>) {
    let good: Value =
        serde_json::from_slice(&std::fs::read(fx.scene_dir.join("cameras.json")).unwrap()).unwrap();
    let first = |f: fn(&mut serde_json::Map<String, Value>)| -> Box<dyn Fn(&mut Value)> {
        Box::new(move |j: &mut Value| f(j[0].as_object_mut().unwrap()))
    };
    let edits: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
        ("empty list", Box::new(|j| *j = json!([]))),
        (
            "an object",
            Box::new(|j| *j = json!({"cameras": j.clone()})),
        ),
        ("fx missing", first(|c| drop(c.remove("fx")))),
        ("fx = 0", first(|c| drop(c.insert("fx".into(), json!(0))))),
        (
            "fx negative",
            first(|c| drop(c.insert("fx".into(), json!(-5.0)))),
        ),
        (
            "fx a string",
            first(|c| drop(c.insert("fx".into(), json!("a")))),
        ),
        (
            "width 0",
            first(|c| drop(c.insert("width".into(), json!(0)))),
        ),
        (
            "height negative",
            first(|c| drop(c.insert("height".into(), json!(-12)))),
        ),
        (
            "100000 x 100000 pixels",
            first(|c| {
                c.insert("width".into(), json!(100000));
                c.insert("height".into(), json!(100000));
            }),
        ),
        (
            "width past u32",
            first(|c| drop(c.insert("width".into(), json!(4294967296u64)))),
        ),
        (
            "position of two",
            first(|c| drop(c.insert("position".into(), json!([0, 0])))),
        ),
        (
            "rotation 2x3",
            first(|c| drop(c.insert("rotation".into(), json!([[1, 0, 0], [0, 1, 0]])))),
        ),
        (
            "rotation scaled",
            first(|c| drop(c.insert("rotation".into(), json!([[2, 0, 0], [0, 1, 0], [0, 0, 1]])))),
        ),
        (
            "rotation a reflection",
            first(|c| drop(c.insert("rotation".into(), json!([[-1, 0, 0], [0, 1, 0], [0, 0, 1]])))),
        ),
        (
            "position 1e300 (not finite once squared)",
            first(|c| drop(c.insert("position".into(), json!([1e300, 0, 0])))),
        ),
        ("img_name missing", first(|c| drop(c.remove("img_name")))),
        (
            "img_name a number",
            first(|c| drop(c.insert("img_name".into(), json!(5)))),
        ),
        (
            "img_name empty",
            first(|c| drop(c.insert("img_name".into(), json!("")))),
        ),
        (
            "two cameras one name",
            Box::new(|j| {
                let name = j[0]["img_name"].clone();
                j[1]["img_name"] = name;
            }),
        ),
    ];
    json_cases(fx, "cameras.json", "cameras.json", &good, edits, out);
}

fn transforms(fx: &Fixture, out: &mut Vec<Case>) {
    let good: Value = serde_json::from_slice(&std::fs::read(&fx.transforms).unwrap()).unwrap();
    let frame0 = |f: fn(&mut serde_json::Map<String, Value>)| -> Box<dyn Fn(&mut Value)> {
        Box::new(move |j: &mut Value| f(j["frames"][0].as_object_mut().unwrap()))
    };
    let top = |f: fn(&mut serde_json::Map<String, Value>)| -> Box<dyn Fn(&mut Value)> {
        Box::new(move |j: &mut Value| f(j.as_object_mut().unwrap()))
    };
    let edits: Vec<(&str, Box<dyn Fn(&mut Value)>)> = vec![
        ("no frames", top(|t| drop(t.remove("frames")))),
        (
            "frames empty",
            top(|t| drop(t.insert("frames".into(), json!([])))),
        ),
        (
            "frames an object",
            top(|t| drop(t.insert("frames".into(), json!({})))),
        ),
        (
            "no transform_matrix",
            frame0(|f| drop(f.remove("transform_matrix"))),
        ),
        (
            "matrix of 2 rows",
            frame0(|f| f["transform_matrix"].as_array_mut().unwrap().truncate(2)),
        ),
        (
            "matrix with a string",
            frame0(|f| f["transform_matrix"][0][0] = json!("x")),
        ),
        (
            "matrix a reflection",
            frame0(|f| {
                for r in 0..3 {
                    let x = f["transform_matrix"][r][0].as_f64().unwrap();
                    f["transform_matrix"][r][0] = json!(-x);
                }
            }),
        ),
        (
            "matrix scaled",
            frame0(|f| {
                for r in 0..3 {
                    let x = f["transform_matrix"][r][1].as_f64().unwrap();
                    f["transform_matrix"][r][1] = json!(3.0 * x);
                }
            }),
        ),
        (
            "k1 distortion",
            top(|t| drop(t.insert("k1".into(), json!(0.1)))),
        ),
        (
            "fisheye model",
            top(|t| drop(t.insert("camera_model".into(), json!("OPENCV_FISHEYE")))),
        ),
        ("w = 0", top(|t| drop(t.insert("w".into(), json!(0))))),
        ("fl_x = 0", top(|t| drop(t.insert("fl_x".into(), json!(0))))),
        (
            "fl_x negative",
            top(|t| drop(t.insert("fl_x".into(), json!(-3.0)))),
        ),
        (
            "no focal length",
            top(|t| {
                t.remove("fl_x");
                t.remove("fl_y");
            }),
        ),
        ("no file_path", frame0(|f| drop(f.remove("file_path")))),
        (
            "two frames one file",
            Box::new(|j| {
                let fp = j["frames"][0]["file_path"].clone();
                j["frames"][1]["file_path"] = fp;
            }),
        ),
    ];
    json_cases(fx, "transforms.json", "transforms.json", &good, edits, out);
}

// ----------------------------------------------------------------------- COLMAP

fn colmap(fx: &Fixture, out: &mut Vec<Case>) {
    let cams = std::fs::read_to_string(fx.colmap_txt.join("cameras.txt")).unwrap();
    let imgs = std::fs::read_to_string(fx.colmap_txt.join("images.txt")).unwrap();
    let cam_line = cams
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .to_string();
    let img_line = imgs
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap()
        .to_string();
    let t: Vec<&str> = cam_line.split_whitespace().collect();
    let it: Vec<&str> = img_line.split_whitespace().collect();
    let cam_edit = |i: usize, to: &str| {
        let mut t2: Vec<String> = t.iter().map(|s| s.to_string()).collect();
        t2[i] = to.to_string();
        (cams.replacen(&cam_line, &t2.join(" "), 1), imgs.clone())
    };
    let img_edit = |i: usize, to: &str| {
        let mut t2: Vec<String> = it.iter().map(|s| s.to_string()).collect();
        t2[i] = to.to_string();
        (cams.clone(), imgs.replacen(&img_line, &t2.join(" "), 1))
    };
    let mut txt: Vec<(String, (String, String), Expect)> = vec![
        (
            "control".into(),
            (cams.clone(), imgs.clone()),
            Expect::Succeed,
        ),
        ("unknown model".into(), cam_edit(1, "FOO"), Expect::Fail),
        (
            "distorted model".into(),
            {
                let (c, i) = cam_edit(1, "OPENCV");
                (
                    c.replacen(
                        &t[4..].join(" "),
                        &format!("{} 0.1 0 0 0", t[4..].join(" ")),
                        1,
                    ),
                    i,
                )
            },
            Expect::Fail,
        ),
        (
            "PINHOLE with 3 params".into(),
            (cams.replacen(&cam_line, &t[..7].join(" "), 1), imgs.clone()),
            Expect::Fail,
        ),
        ("width 0".into(), cam_edit(2, "0"), Expect::Fail),
        ("width negative".into(), cam_edit(2, "-48"), Expect::Fail),
        ("fx negative".into(), cam_edit(4, "-10"), Expect::Fail),
        ("fx nan".into(), cam_edit(4, "nan"), Expect::Fail),
        ("fy inf".into(), cam_edit(5, "inf"), Expect::Fail),
        (
            "camera id not a number".into(),
            cam_edit(0, "one"),
            Expect::Fail,
        ),
        (
            "zero quaternion".into(),
            {
                let mut t2: Vec<String> = it.iter().map(|s| s.to_string()).collect();
                t2[1..5].iter_mut().for_each(|x| *x = "0".into());
                (cams.clone(), imgs.replacen(&img_line, &t2.join(" "), 1))
            },
            Expect::Fail,
        ),
        ("qw nan".into(), img_edit(1, "nan"), Expect::Fail),
        ("tx inf".into(), img_edit(5, "inf"), Expect::Fail),
        ("missing camera".into(), img_edit(8, "99"), Expect::Fail),
        (
            "no image name".into(),
            (
                cams.clone(),
                imgs.replacen(&img_line, &it[..9].join(" "), 1),
            ),
            Expect::Fail,
        ),
        (
            "two images one name".into(),
            {
                let other = imgs
                    .lines()
                    .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                    .nth(1)
                    .unwrap()
                    .to_string();
                let name = it[9];
                let o: Vec<&str> = other.split_whitespace().collect();
                (
                    cams.clone(),
                    imgs.replacen(&other, &format!("{} {name}", o[..9].join(" ")), 1),
                )
            },
            Expect::Fail,
        ),
        (
            "no cameras".into(),
            (String::new(), imgs.clone()),
            Expect::Fail,
        ),
        (
            "no images".into(),
            (cams.clone(), String::new()),
            Expect::Fail,
        ),
        (
            "not UTF-8".into(),
            (format!("{cams}\u{0}"), imgs.clone()),
            Expect::Fail,
        ),
    ];
    txt.push((
        "cut line".into(),
        (
            cams.clone(),
            imgs.replacen(&img_line, &it[..4].join(" "), 1),
        ),
        Expect::Fail,
    ));
    for (i, (name, (c, im), expect)) in txt.into_iter().enumerate() {
        let d = fx.case_dir(&format!("colmap_txt{i}"));
        let m = d.join("sparse");
        std::fs::create_dir_all(&m).unwrap();
        let mut cb = c.into_bytes();
        if name == "not UTF-8" {
            cb.push(0xff);
        }
        std::fs::write(m.join("cameras.txt"), cb).unwrap();
        if name != "no images" {
            std::fs::write(m.join("images.txt"), im).unwrap();
        }
        out.push(Case::new(
            "colmap text",
            name,
            v(&[
                "synth",
                "--splats",
                &p(&fx.ply),
                "--cameras",
                &p(&m),
                "--out",
                &p(&d.join("synth")),
            ]),
            expect,
        ));
    }
    // Binary: cameras.bin = u64 count, then (u32 id, u32 model, u64 w, u64 h, f64 ×4).
    let cb = std::fs::read(fx.colmap_bin.join("cameras.bin")).unwrap();
    let ib = std::fs::read(fx.colmap_bin.join("images.bin")).unwrap();
    let with = |b: &[u8], at: usize, bytes: &[u8]| {
        let mut b = b.to_vec();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let mut bin: Vec<(String, Vec<u8>, Vec<u8>, Expect)> = vec![
        ("control".into(), cb.clone(), ib.clone(), Expect::Succeed),
        (
            "cameras.bin empty".into(),
            Vec::new(),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "images.bin empty".into(),
            cb.clone(),
            Vec::new(),
            Expect::Fail,
        ),
        (
            "camera count 2^64-1".into(),
            with(&cb, 0, &u64::MAX.to_le_bytes()),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "camera count one more".into(),
            with(
                &cb,
                0,
                &(u64::from_le_bytes(cb[..8].try_into().unwrap()) + 1).to_le_bytes(),
            ),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "image count 1e9".into(),
            cb.clone(),
            with(&ib, 0, &1_000_000_000u64.to_le_bytes()),
            Expect::Fail,
        ),
        (
            "model id 99".into(),
            with(&cb, 12, &99u32.to_le_bytes()),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "width 0".into(),
            with(&cb, 16, &0u64.to_le_bytes()),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "width 2^40".into(),
            with(&cb, 16, &(1u64 << 40).to_le_bytes()),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "fx NaN".into(),
            with(&cb, 32, &f64::NAN.to_le_bytes()),
            ib.clone(),
            Expect::Fail,
        ),
        (
            "qw NaN".into(),
            cb.clone(),
            with(&ib, 12, &f64::NAN.to_le_bytes()),
            Expect::Fail,
        ),
        (
            "zero quaternion".into(),
            cb.clone(),
            with(&ib, 12, &[0u8; 32]),
            Expect::Fail,
        ),
        (
            "camera id 99".into(),
            cb.clone(),
            with(&ib, 12 + 56, &99u32.to_le_bytes()),
            Expect::Fail,
        ),
    ];
    for k in [4, 8, 13, 30, cb.len() - 1] {
        bin.push((
            format!("cameras.bin cut at {k}"),
            cb[..k].to_vec(),
            ib.clone(),
            Expect::Fail,
        ));
    }
    for k in [5, 8, 40, 75, ib.len() - 9, ib.len() - 1] {
        bin.push((
            format!("images.bin cut at {k}"),
            cb.clone(),
            ib[..k].to_vec(),
            Expect::Fail,
        ));
    }
    let mut rng = Rng(0xc01);
    for k in 0..6 {
        bin.push((
            format!("flips {k}"),
            flipped(&cb, 0..cb.len(), 2, &mut rng),
            flipped(&ib, 0..ib.len(), 2, &mut rng),
            Expect::Any,
        ));
    }
    for (i, (name, c, im, expect)) in bin.into_iter().enumerate() {
        let d = fx.case_dir(&format!("colmap_bin{i}"));
        let m = d.join("sparse");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("cameras.bin"), c).unwrap();
        std::fs::write(m.join("images.bin"), im).unwrap();
        out.push(Case::new(
            "colmap binary",
            name,
            v(&[
                "synth",
                "--splats",
                &p(&fx.ply),
                "--cameras",
                &p(&m),
                "--out",
                &p(&d.join("synth")),
            ]),
            expect,
        ));
    }
}

// --------------------------------------------------------------- LangSplat npy

/// An npy file: header dict text, then `body`.
fn npy_bytes(descr: &str, shape: &str, fortran: bool, body: &[u8]) -> Vec<u8> {
    let mut h = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': ({shape}), }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(body);
    b
}

fn npy(fx: &Fixture, out: &mut Vec<Case>) {
    let src = fx.scene_dir.join("language_features");
    let f1 = std::fs::read(src.join("frame_00001_f.npy")).unwrap();
    let s1 = std::fs::read(src.join("frame_00001_s.npy")).unwrap();
    let fa = lsplat_data::npy::read_npy(&src.join("frame_00001_f.npy")).unwrap();
    let sa = lsplat_data::npy::read_npy(&src.join("frame_00001_s.npy")).unwrap();
    let le = |x: &[f32]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let shape = |s: &[usize]| s.iter().map(|d| format!("{d}, ")).collect::<String>();
    let (fs, ss) = (shape(&fa.shape), shape(&sa.shape));
    let with_s = |f: &dyn Fn(&mut Vec<f32>)| {
        let mut d = sa.data.clone();
        f(&mut d);
        npy_bytes("<f4", &ss, false, &le(&d))
    };
    let with_f = |f: &dyn Fn(&mut Vec<f32>)| {
        let mut d = fa.data.clone();
        f(&mut d);
        npy_bytes("<f4", &fs, false, &le(&d))
    };
    // (name, replacement of frame_00001_f.npy, of frame_00001_s.npy); None = removed.
    let cases: Vec<(&str, Option<Vec<u8>>, Option<Vec<u8>>, Expect)> = vec![
        (
            "control",
            Some(f1.clone()),
            Some(s1.clone()),
            Expect::Succeed,
        ),
        ("_s.npy missing", Some(f1.clone()), None, Expect::Fail),
        ("_f.npy missing", None, Some(s1.clone()), Expect::Fail),
        (
            "_f.npy empty",
            Some(Vec::new()),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "_f.npy cut",
            Some(f1[..f1.len() - 5].to_vec()),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "_s.npy cut",
            Some(f1.clone()),
            Some(s1[..s1.len() / 2].to_vec()),
            Expect::Fail,
        ),
        (
            "bad magic",
            Some([b"\x93NUMPX".as_slice(), &f1[6..]].concat()),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "header length past the file",
            Some([&f1[..8], &[0xff, 0xff], &f1[10..]].concat()),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "int32 zero features",
            Some(npy_bytes("<i4", &fs, false, &vec![0u8; fa.data.len() * 4])),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "big-endian complex",
            Some(npy_bytes(">c8", &fs, false, &vec![0u8; fa.data.len() * 8])),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "fortran order",
            Some(npy_bytes("<f4", &fs, true, &le(&fa.data))),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "shape 1e12 rows",
            Some(npy_bytes("<f4", "1000000000000, 3, ", false, &le(&fa.data))),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "shape overflowing",
            Some(npy_bytes(
                "<f4",
                "4294967296, 4294967296, 4294967296, ",
                false,
                &[],
            )),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "1-D features",
            Some(npy_bytes(
                "<f4",
                &format!("{}, ", fa.data.len()),
                false,
                &le(&fa.data),
            )),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "header not a dict",
            Some(
                npy_bytes("<f4", "3, 3", false, &[])
                    .iter()
                    .map(|&b| if b == b'{' { b'[' } else { b })
                    .collect(),
            ),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "feature NaN",
            Some(with_f(&|d| d[1] = f32::NAN)),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "feature inf",
            Some(with_f(&|d| d[0] = f32::INFINITY)),
            Some(s1.clone()),
            Expect::Fail,
        ),
        (
            "seg index past the rows",
            Some(f1.clone()),
            Some(with_s(&|d| d[0] = 100000.0)),
            Expect::Fail,
        ),
        (
            "seg index 0.5",
            Some(f1.clone()),
            Some(with_s(&|d| d[0] = 0.5)),
            Expect::Fail,
        ),
        (
            "seg index -7",
            Some(f1.clone()),
            Some(with_s(&|d| d[0] = -7.0)),
            Expect::Fail,
        ),
        (
            "seg NaN",
            Some(f1.clone()),
            Some(with_s(&|d| d[3] = f32::NAN)),
            Expect::Fail,
        ),
        (
            "seg of 3 levels",
            Some(f1.clone()),
            Some(npy_bytes(
                "<f4",
                &shape(&[3, sa.shape[1], sa.shape[2]]),
                false,
                &le(&sa.data[..3 * sa.shape[1] * sa.shape[2]]),
            )),
            Expect::Fail,
        ),
        (
            "seg 65536x65536 claimed",
            Some(f1.clone()),
            Some(npy_bytes("<f4", "4, 65536, 65536, ", false, &le(&sa.data))),
            Expect::Fail,
        ),
    ];
    for (i, (name, f, s, expect)) in cases.into_iter().enumerate() {
        let d = fx.case_dir(&format!("npy{i}"));
        let lf = d.join("language_features");
        std::fs::create_dir_all(&lf).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), lf.join(e.file_name())).unwrap();
        }
        for (file, bytes) in [("frame_00001_f.npy", f), ("frame_00001_s.npy", s)] {
            match bytes {
                Some(b) => std::fs::write(lf.join(file), b).unwrap(),
                None => std::fs::remove_file(lf.join(file)).unwrap(),
            }
        }
        out.push(Case::new(
            "langsplat npy: import",
            name,
            v(&[
                "import",
                "langsplat",
                "--source",
                &p(&lf),
                "--out",
                &p(&d.join("dataset")),
            ]),
            expect,
        ));
    }
    let d = fx.case_dir("npy_empty");
    out.push(Case::new(
        "langsplat npy: import",
        "empty folder",
        v(&[
            "import",
            "langsplat",
            "--source",
            &p(&d),
            "--out",
            &p(&d.join("dataset")),
        ]),
        Expect::Fail,
    ));
}

// ------------------------------------------------------------- Parquet datasets

fn rewrite_masks(
    src: &Path,
    dst: &Path,
    f: &dyn Fn(&arrow_array::RecordBatch) -> arrow_array::RecordBatch,
) {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(src).unwrap()).unwrap();
    let meta = r.metadata().file_metadata().key_value_metadata().cloned();
    let batches: Vec<_> = r.build().unwrap().map(|b| f(&b.unwrap())).collect();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(dst).unwrap(),
        batches[0].schema(),
        None,
    )
    .unwrap();
    for kv in meta.into_iter().flatten() {
        w.append_key_value_metadata(kv);
    }
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// `b` with column `name` replaced by `f(old column)`.
fn with_column(
    b: &arrow_array::RecordBatch,
    name: &str,
    f: &dyn Fn(&arrow_array::ArrayRef) -> arrow_array::ArrayRef,
) -> arrow_array::RecordBatch {
    use std::sync::Arc;
    let schema = b.schema();
    let mut fields = Vec::new();
    let mut cols = Vec::new();
    for (i, fl) in schema.fields().iter().enumerate() {
        let c = if fl.name() == name {
            f(b.column(i))
        } else {
            b.column(i).clone()
        };
        fields.push(arrow_schema::Field::new(
            fl.name(),
            c.data_type().clone(),
            fl.is_nullable() || c.null_count() > 0,
        ));
        cols.push(c);
    }
    arrow_array::RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(fields)), cols).unwrap()
}

fn u32_map(c: &arrow_array::ArrayRef, f: &dyn Fn(usize, u32) -> u32) -> arrow_array::ArrayRef {
    use arrow_array::cast::AsArray;
    let a = c.as_primitive::<arrow_array::types::UInt32Type>();
    std::sync::Arc::new(arrow_array::UInt32Array::from_iter_values(
        (0..a.len()).map(|i| f(i, a.value(i))),
    ))
}

fn dataset(fx: &Fixture, out: &mut Vec<Case>) {
    use std::sync::Arc;
    let src = fx.scene_dir.join("dataset");
    let masks = std::fs::read(src.join("masks.parquet")).unwrap();
    let feats = std::fs::read(src.join("features.parquet")).unwrap();
    type Edit = Box<dyn Fn(&Path, &Path)>;
    let bytes = |m: Vec<u8>, f: Vec<u8>| -> Edit {
        Box::new(move |_: &Path, d: &Path| {
            std::fs::write(d.join("masks.parquet"), &m).unwrap();
            std::fs::write(d.join("features.parquet"), &f).unwrap();
        })
    };
    let masks_col =
        |col: &'static str, f: fn(&arrow_array::ArrayRef) -> arrow_array::ArrayRef| -> Edit {
            Box::new(move |s: &Path, d: &Path| {
                std::fs::copy(s.join("features.parquet"), d.join("features.parquet")).unwrap();
                rewrite_masks(&s.join("masks.parquet"), &d.join("masks.parquet"), &|b| {
                    with_column(b, col, &f)
                });
            })
        };
    let cases: Vec<(&str, Edit, Expect)> = vec![
        (
            "control",
            bytes(masks.clone(), feats.clone()),
            Expect::Succeed,
        ),
        (
            "masks.parquet empty",
            bytes(Vec::new(), feats.clone()),
            Expect::Fail,
        ),
        (
            "masks.parquet cut",
            bytes(masks[..masks.len() / 2].to_vec(), feats.clone()),
            Expect::Fail,
        ),
        (
            "features.parquet cut",
            bytes(masks.clone(), feats[..feats.len() - 9].to_vec()),
            Expect::Fail,
        ),
        (
            "features.parquet garbage",
            bytes(
                masks.clone(),
                vec![0x50, 0x41, 0x52, 0x31, 7, 7, 7, 7, 0x50, 0x41, 0x52, 0x31],
            ),
            Expect::Fail,
        ),
        (
            "masks.parquet missing",
            Box::new(|s: &Path, d: &Path| {
                std::fs::copy(s.join("features.parquet"), d.join("features.parquet")).unwrap();
            }),
            Expect::Fail,
        ),
        (
            "features.parquet missing",
            Box::new(|s: &Path, d: &Path| {
                std::fs::copy(s.join("masks.parquet"), d.join("masks.parquet")).unwrap();
            }),
            Expect::Fail,
        ),
        (
            "width 0",
            masks_col("width", |c| u32_map(c, &|_, _| 0)),
            Expect::Fail,
        ),
        (
            "65536x49152 claimed",
            masks_col("width", |c| u32_map(c, &|_, _| 65536)),
            Expect::Fail,
        ),
        (
            "2^32-1 x 2^32-1 claimed",
            masks_col("height", |c| u32_map(c, &|_, _| u32::MAX)),
            Expect::Fail,
        ),
        (
            "height one less (runs past the end)",
            masks_col("height", |c| u32_map(c, &|_, h| h / 4)),
            Expect::Fail,
        ),
        (
            "masks count lies",
            masks_col("masks", |c| u32_map(c, &|_, m| m + 1000)),
            Expect::Fail,
        ),
        (
            "width as text",
            masks_col("width", |c| {
                use arrow_array::cast::AsArray;
                let a = c.as_primitive::<arrow_array::types::UInt32Type>();
                Arc::new(arrow_array::StringArray::from_iter_values(
                    (0..a.len()).map(|i| a.value(i).to_string()),
                ))
            }),
            Expect::Fail,
        ),
        (
            "a null width",
            masks_col("width", |c| {
                use arrow_array::cast::AsArray;
                let a = c.as_primitive::<arrow_array::types::UInt32Type>();
                Arc::new(arrow_array::UInt32Array::from_iter(
                    (0..a.len()).map(|i| (i > 0).then(|| a.value(i))),
                ))
            }),
            Expect::Fail,
        ),
        (
            "level 9",
            masks_col("level", |c| {
                use arrow_array::cast::AsArray;
                let a = c.as_primitive::<arrow_array::types::UInt8Type>();
                Arc::new(arrow_array::UInt8Array::from_iter_values(
                    (0..a.len()).map(|_| 9),
                ))
            }),
            Expect::Fail,
        ),
        (
            "every image named alike",
            masks_col("image", |c| {
                Arc::new(arrow_array::StringArray::from_iter_values(
                    (0..c.len()).map(|_| "frame_00001"),
                ))
            }),
            Expect::Fail,
        ),
        (
            "run masks past the table",
            Box::new(|s: &Path, d: &Path| {
                std::fs::copy(s.join("features.parquet"), d.join("features.parquet")).unwrap();
                rewrite_masks(&s.join("masks.parquet"), &d.join("masks.parquet"), &|b| {
                    with_column(b, "run_mask", &|c| {
                        use arrow_array::cast::AsArray;
                        let l = c.as_list::<i32>();
                        let vals = u32_map(l.values(), &|_, _| 1_000_000);
                        let field = Arc::new(arrow_schema::Field::new_list_field(
                            arrow_schema::DataType::UInt32,
                            false,
                        ));
                        Arc::new(arrow_array::ListArray::new(
                            field,
                            l.offsets().clone(),
                            vals,
                            None,
                        ))
                    })
                });
            }),
            Expect::Fail,
        ),
        (
            "run lengths past the image",
            Box::new(|s: &Path, d: &Path| {
                std::fs::copy(s.join("features.parquet"), d.join("features.parquet")).unwrap();
                rewrite_masks(&s.join("masks.parquet"), &d.join("masks.parquet"), &|b| {
                    with_column(b, "run_length", &|c| {
                        use arrow_array::cast::AsArray;
                        let l = c.as_list::<i32>();
                        let vals = u32_map(l.values(), &|_, _| u32::MAX);
                        let field = Arc::new(arrow_schema::Field::new_list_field(
                            arrow_schema::DataType::UInt32,
                            false,
                        ));
                        Arc::new(arrow_array::ListArray::new(
                            field,
                            l.offsets().clone(),
                            vals,
                            None,
                        ))
                    })
                });
            }),
            Expect::Fail,
        ),
    ];
    let ply = fx.ply.clone();
    let cams = fx.scene_dir.join("cameras.json");
    for (i, (name, edit, expect)) in cases.into_iter().enumerate() {
        let d = fx.case_dir(&format!("dataset{i}"));
        let ds = d.join("dataset");
        std::fs::create_dir_all(&ds).unwrap();
        edit(&src, &ds);
        let scene = fx.scene_with(&d, &ply, &cams, &ds);
        for (family, args) in [
            (
                "dataset: train",
                v(&[
                    "train",
                    "--scene",
                    &p(&scene),
                    "--out",
                    &p(&d.join("run")),
                    "--set",
                    "train.iterations=2",
                    "--set",
                    "log.eval=false",
                ]),
            ),
            (
                "dataset: solve",
                v(&[
                    "solve",
                    "--scene",
                    &p(&scene),
                    "--method",
                    "average",
                    "--out",
                    &p(&d.join("solved")),
                ]),
            ),
            (
                "dataset: bench",
                v(&[
                    "bench",
                    "--scene",
                    &p(&scene),
                    "--iters",
                    "1",
                    "--warmup",
                    "0",
                ]),
            ),
        ] {
            out.push(Case::new(family, name, args, expect));
        }
    }
}

// ------------------------------------------------------------------ embeddings

fn embeddings(fx: &Fixture, out: &mut Vec<Case>) {
    let arr = lsplat_data::npy::read_npy(&fx.text).unwrap();
    let names = std::fs::read_to_string(fx.text.with_extension("txt")).unwrap();
    let le = |x: &[f32]| x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let (rows, dim) = (arr.shape[0], arr.shape[1]);
    let npy_of =
        |d: &[f32], r: usize, c: usize| npy_bytes("<f4", &format!("{r}, {c}, "), false, &le(d));
    let good = npy_of(&arr.data, rows, dim);
    let mut zero = arr.data.clone();
    zero[4 * dim..5 * dim].iter_mut().for_each(|x| *x = 0.0);
    let mut nan = arr.data.clone();
    nan[dim + 1] = f32::NAN;
    let wide: Vec<f32> = (0..rows * (dim + 2)).map(|i| (i % 7) as f32).collect();
    let cases: Vec<(&str, Vec<u8>, String, Expect)> = vec![
        ("control", good.clone(), names.clone(), Expect::Succeed),
        (
            "a name short",
            good.clone(),
            names.lines().skip(1).collect::<Vec<_>>().join("\n"),
            Expect::Fail,
        ),
        (
            "no canonical phrases",
            good.clone(),
            names.replace("object", "obj").replace("things", "thin"),
            Expect::Fail,
        ),
        (
            "a zero row",
            npy_of(&zero, rows, dim),
            names.clone(),
            Expect::Fail,
        ),
        (
            "a NaN",
            npy_of(&nan, rows, dim),
            names.clone(),
            Expect::Fail,
        ),
        (
            "width of the run + 2",
            npy_of(&wide, rows, dim + 2),
            names.clone(),
            Expect::Fail,
        ),
        (
            "1-D",
            npy_bytes("<f4", &format!("{}, ", rows * dim), false, &le(&arr.data)),
            names.clone(),
            Expect::Fail,
        ),
        ("empty", npy_of(&[], 0, dim), String::new(), Expect::Fail),
        (
            "cut",
            good[..good.len() - 3].to_vec(),
            names.clone(),
            Expect::Fail,
        ),
        (
            "two rows one name",
            good.clone(),
            names.replace("thing 1", "thing 0"),
            Expect::Fail,
        ),
    ];
    for (i, (name, npy, txt, expect)) in cases.into_iter().enumerate() {
        let d = fx.case_dir(&format!("text{i}"));
        let t = d.join("text.npy");
        std::fs::write(&t, npy).unwrap();
        std::fs::write(t.with_extension("txt"), txt).unwrap();
        out.push(Case::new(
            "embeddings: query",
            name,
            v(&[
                "query",
                "--run",
                &p(&fx.run),
                "--text",
                &p(&t),
                "--out",
                &p(&d.join("q")),
            ]),
            expect,
        ));
        out.push(Case::new(
            "embeddings: eval lerf",
            name,
            v(&[
                "eval",
                "lerf",
                "--run",
                &p(&fx.run),
                "--labels",
                &p(&fx.labels),
                "--text",
                &p(&t),
                "--out",
                &p(&d.join("e")),
            ]),
            expect,
        ));
    }
    // A Parquet file that is not an embedding table, and a missing .txt.
    let d = fx.case_dir("text_parquet");
    let t = d.join("text.parquet");
    std::fs::copy(fx.scene_dir.join("dataset/masks.parquet"), &t).unwrap();
    out.push(Case::new(
        "embeddings: query",
        "a masks table",
        v(&[
            "query",
            "--run",
            &p(&fx.run),
            "--text",
            &p(&t),
            "--out",
            &p(&d.join("q")),
        ]),
        Expect::Fail,
    ));
    let d = fx.case_dir("text_notxt");
    let t = d.join("text.npy");
    std::fs::write(&t, &good).unwrap();
    out.push(Case::new(
        "embeddings: query",
        "no .txt",
        v(&[
            "query",
            "--run",
            &p(&fx.run),
            "--text",
            &p(&t),
            "--out",
            &p(&d.join("q")),
        ]),
        Expect::Fail,
    ));
}

// ---------------------------------------------------------------- label files

fn labels(fx: &Fixture, out: &mut Vec<Case>) {
    let good_path = fx.labels.join("frame_00003.json");
    let good: Value = serde_json::from_slice(&std::fs::read(&good_path).unwrap()).unwrap();
    let text = good.to_string();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut j = good.clone();
        f(&mut j);
        j.to_string()
    };
    let (w, h) = (
        good["info"]["width"].as_u64().unwrap(),
        good["info"]["height"].as_u64().unwrap(),
    );
    let cases: Vec<(&str, String, Expect)> = vec![
        ("control", text.clone(), Expect::Succeed),
        ("empty", String::new(), Expect::Fail),
        ("cut", text[..text.len() / 2].to_string(), Expect::Fail),
        (
            "no info",
            edit(&|j| drop(j.as_object_mut().unwrap().remove("info"))),
            Expect::Fail,
        ),
        (
            "width 0",
            edit(&|j| j["info"]["width"] = json!(0)),
            Expect::Fail,
        ),
        (
            "width 1e9",
            edit(&|j| j["info"]["width"] = json!(1_000_000_000)),
            Expect::Fail,
        ),
        (
            "65536x49152",
            edit(&|j| {
                j["info"]["width"] = json!(65536);
                j["info"]["height"] = json!(49152);
            }),
            Expect::Fail,
        ),
        (
            "name of no camera",
            edit(&|j| j["info"]["name"] = json!("frame_09999.jpg")),
            Expect::Fail,
        ),
        (
            "objects not a list",
            edit(&|j| j["objects"] = json!({})),
            Expect::Fail,
        ),
        (
            "bbox of three",
            edit(&|j| j["objects"][0]["bbox"] = json!([1, 2, 3])),
            Expect::Fail,
        ),
        (
            "bbox strings",
            edit(&|j| j["objects"][0]["bbox"] = json!(["a", "b", "c", "d"])),
            Expect::Fail,
        ),
        (
            "segmentation garbage",
            edit(&|j| j["objects"][0]["segmentation"] = json!("x")),
            Expect::Fail,
        ),
        (
            "point 8: polygon of one point",
            edit(&|j| j["objects"][0]["segmentation"] = json!([[1, 1]])),
            Expect::Fail,
        ),
        (
            "category empty",
            edit(&|j| j["objects"][0]["category"] = json!("")),
            Expect::Fail,
        ),
        (
            "category without embedding",
            edit(&|j| j["objects"][0]["category"] = json!("zebra")),
            Expect::Fail,
        ),
        (
            "coordinates 1e300",
            edit(&|j| j["objects"][0]["segmentation"] = json!([[0, 0], [1e300, 0], [0, 1e300]])),
            Expect::Fail,
        ),
        // Issue 29 point 8 (the eval helper's part): shapes entirely outside the
        // image, an inverted box, no objects at all.
        (
            "point 8: polygon outside the image",
            edit(&|j| {
                let (x, y) = ((w + 10) as f64, (h + 10) as f64);
                j["objects"][0]["segmentation"] = json!([[x, y], [x + 5.0, y], [x + 5.0, y + 5.0]]);
                j["objects"][0]["bbox"] = json!([x, y, x + 5.0, y + 5.0]);
            }),
            Expect::Fail,
        ),
        (
            "point 8: inverted box",
            edit(&|j| j["objects"][0]["bbox"] = json!([10, 10, 2, 2])),
            Expect::Fail,
        ),
        (
            "point 8: no objects",
            edit(&|j| j["objects"] = json!([])),
            Expect::Fail,
        ),
    ];
    for (i, (name, body, expect)) in cases.into_iter().enumerate() {
        let d = fx.case_dir(&format!("labels{i}"));
        let l = d.join("labels");
        std::fs::create_dir_all(&l).unwrap();
        std::fs::write(l.join("frame_00003.json"), body).unwrap();
        out.push(Case::new(
            "labels: eval lerf",
            name,
            v(&[
                "eval",
                "lerf",
                "--run",
                &p(&fx.run),
                "--labels",
                &p(&l),
                "--text",
                &p(&fx.text),
                "--out",
                &p(&d.join("e")),
            ]),
            expect,
        ));
    }
    let d = fx.case_dir("labels_twice");
    let l = d.join("labels");
    std::fs::create_dir_all(&l).unwrap();
    std::fs::write(l.join("frame_00003.json"), &text).unwrap();
    std::fs::write(l.join("frame_00003_copy.json"), &text).unwrap();
    out.push(Case::new(
        "labels: eval lerf",
        "point 8: two files, one frame",
        v(&[
            "eval",
            "lerf",
            "--run",
            &p(&fx.run),
            "--labels",
            &p(&l),
            "--text",
            &p(&fx.text),
            "--out",
            &p(&d.join("e")),
        ]),
        Expect::Fail,
    ));
}

// ---------------------------------------------------------------- checkpoints

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else if e.file_name() != ".lock" {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

fn checkpoints(fx: &Fixture, out: &mut Vec<Case>) {
    use lsplat_data::run;
    let name3 = run::checkpoint_name(3);
    let name6 = run::checkpoint_name(6);
    type Edit = Box<dyn Fn(&Path)>;
    let ck = |f: fn(&mut Vec<u8>)| -> Edit {
        Box::new(move |r: &Path| {
            for n in [3, 6] {
                let path = r.join("checkpoints").join(run::checkpoint_name(n));
                let mut b = std::fs::read(&path).unwrap();
                f(&mut b);
                std::fs::write(&path, b).unwrap();
            }
        })
    };
    let cases: Vec<(&str, Edit, &[&str], Expect)> = vec![
        (
            "control",
            Box::new(|_: &Path| {}),
            &["train.iterations=8"],
            Expect::Succeed,
        ),
        (
            "no more steps to run",
            Box::new(|_: &Path| {}),
            &[],
            Expect::Fail,
        ),
        (
            "fewer iterations than done",
            Box::new(|_: &Path| {}),
            &["train.iterations=4"],
            Expect::Fail,
        ),
        (
            "a result-changing --set",
            Box::new(|_: &Path| {}),
            &["train.iterations=8", "train.lr=0.1"],
            Expect::Fail,
        ),
        (
            "every checkpoint cut",
            ck(|b| b.truncate(b.len() / 2)),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "every checkpoint one byte flipped",
            ck(|b| {
                let i = b.len() - 5;
                b[i] ^= 0x20
            }),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "header length 2^64-1",
            ck(|b| b[..8].copy_from_slice(&u64::MAX.to_le_bytes())),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "header garbage",
            ck(|b| b[8..16].copy_from_slice(b"!garbage")),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "empty files",
            ck(|b| b.clear()),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "renamed to other steps",
            Box::new(move |r: &Path| {
                let c = r.join("checkpoints");
                std::fs::rename(c.join(&name6), c.join(run::checkpoint_name(7))).unwrap();
                std::fs::rename(c.join(&name3), c.join(run::checkpoint_name(4))).unwrap();
            }),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "no checkpoints",
            Box::new(|r: &Path| std::fs::remove_dir_all(r.join("checkpoints")).unwrap()),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "no config.toml",
            Box::new(|r: &Path| std::fs::remove_file(r.join("config.toml")).unwrap()),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "config.toml garbage",
            Box::new(|r: &Path| std::fs::write(r.join("config.toml"), b"[train\x00").unwrap()),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "config.toml of another run",
            Box::new(|r: &Path| {
                let t = std::fs::read_to_string(r.join("config.toml")).unwrap();
                std::fs::write(r.join("config.toml"), t.replacen("lr = ", "lr = 0.5 #", 1))
                    .unwrap();
            }),
            &["train.iterations=8"],
            Expect::Fail,
        ),
        (
            "the dataset changed",
            Box::new(|r: &Path| {
                let t = std::fs::read_to_string(r.join("config.toml")).unwrap();
                let t = t.replace("bytes = ", "bytes = 1");
                std::fs::write(r.join("config.toml"), t).unwrap();
            }),
            &["train.iterations=8"],
            Expect::Fail,
        ),
    ];
    for (i, (name, edit, sets, expect)) in cases.into_iter().enumerate() {
        let d = fx.case_dir(&format!("ckpt{i}"));
        let r = d.join("run");
        copy_dir(&fx.run, &r);
        edit(&r);
        let mut args = v(&["train", "--resume", &p(&r)]);
        for s in sets {
            args.extend(v(&["--set", s]));
        }
        out.push(Case::new("checkpoints: resume", name, args, expect));
    }
    let d = fx.case_dir("ckpt_none");
    out.push(Case::new(
        "checkpoints: resume",
        "no such run",
        v(&["train", "--resume", &p(&d.join("nope"))]),
        Expect::Fail,
    ));
}

// ---------------------------------------------------------------- scene files

fn scene_files(fx: &Fixture, out: &mut Vec<Case>) {
    let good = std::fs::read_to_string(fx.scene_dir.join("scene.toml")).unwrap();
    let abs = |k: &str, f: &str| format!("{k} = {:?}", fx.scene_dir.join(f).display().to_string());
    let good = good
        .replace(
            "cameras = \"cameras.json\"",
            &abs("cameras", "cameras.json"),
        )
        .replace("dataset = \"dataset\"", &abs("dataset", "dataset"));
    let cases: Vec<(&str, String, Expect)> = vec![
        ("control", good.clone(), Expect::Succeed),
        ("empty", String::new(), Expect::Fail),
        ("a comment only", "# nothing\n".into(), Expect::Fail),
        ("binary garbage", "\u{0}\u{1}\u{2}[[[".into(), Expect::Fail),
        ("unknown key", format!("{good}bogus = 1\n"), Expect::Fail),
        (
            "unknown section",
            format!("{good}[nope]\nx = 1\n"),
            Expect::Fail,
        ),
        (
            "level as text",
            good.replace("level = 1", "level = \"one\""),
            Expect::Fail,
        ),
        (
            "level 7",
            good.replace("level = 1", "level = 7"),
            Expect::Fail,
        ),
        (
            "level -1",
            good.replace("level = 1", "level = -1"),
            Expect::Fail,
        ),
        ("key twice", format!("{good}level = 2\n"), Expect::Fail),
        (
            "splats a number",
            good.replacen("splats = ", "splats = 1 #", 1),
            Expect::Fail,
        ),
        (
            "splats missing file",
            good.replacen("splats = \"", "splats = \"/nonexistent", 1),
            Expect::Fail,
        ),
        (
            "splats a folder",
            good.replacen(
                "splats = \"",
                &format!("splats = \"{}\" #", fx.scene_dir.display()),
                1,
            ),
            Expect::Fail,
        ),
        (
            "cameras a PLY",
            good.replacen(
                "cameras = ",
                &format!("cameras = {:?} #", fx.ply.display().to_string()),
                1,
            ),
            Expect::Fail,
        ),
        (
            "dataset missing",
            good.replacen("dataset = \"", "dataset = \"/nonexistent", 1),
            Expect::Fail,
        ),
        (
            "dataset only",
            format!("[scene]\n{}\n", abs("dataset", "dataset")),
            Expect::Fail,
        ),
        (
            "train.iterations 0",
            format!("{good}[train]\niterations = 0\n"),
            Expect::Fail,
        ),
        (
            "train.lr 1e30",
            format!("{good}[train]\nlr = 1e30\n"),
            Expect::Fail,
        ),
        (
            "seed past i64",
            format!("{good}[train]\nseed = 99999999999999999999\n"),
            Expect::Fail,
        ),
        (
            "inf learning rate",
            format!("{good}[train]\nlr = inf\n"),
            Expect::Fail,
        ),
        (
            "nan tolerance",
            format!("{good}[solve]\ntol = nan\n"),
            Expect::Fail,
        ),
        (
            "demo of 0 cameras",
            "[demo]\ncameras = 0\n".into(),
            Expect::Fail,
        ),
        (
            "demo of 4e9 Gaussians",
            "[demo]\ngaussians = 4000000000\n".into(),
            Expect::Fail,
        ),
        (
            "demo 1x1 images",
            "[demo]\nwidth = 1\nheight = 1\n".into(),
            Expect::Fail,
        ),
        (
            "demo 70000x70000 images",
            "[demo]\nwidth = 70000\nheight = 70000\n".into(),
            Expect::Fail,
        ),
    ];
    for (i, (name, text, expect)) in cases.into_iter().enumerate() {
        let f = put(fx, &format!("scene{i}"), "scene.toml", text.as_bytes());
        let d = f.parent().unwrap().to_path_buf();
        for (family, args) in [
            (
                "scene file: train",
                v(&[
                    "train",
                    "--scene",
                    &p(&f),
                    "--out",
                    &p(&d.join("run")),
                    "--set",
                    "train.iterations=2",
                    "--set",
                    "log.eval=false",
                ]),
            ),
            (
                "scene file: solve",
                v(&[
                    "solve",
                    "--scene",
                    &p(&f),
                    "--method",
                    "average",
                    "--out",
                    &p(&d.join("solved")),
                ]),
            ),
            (
                "scene file: bench",
                v(&["bench", "--scene", &p(&f), "--iters", "1", "--warmup", "0"]),
            ),
        ] {
            out.push(Case::new(family, name, args, expect));
        }
    }
}

// ---------------------------------------------------------- configuration values

fn config_values(out: &mut Vec<Case>) {
    let keys: Vec<(String, String, Option<String>)> = lsplat_core::config_doc::reference()
        .into_iter()
        .flat_map(|s| s.keys)
        .map(|k| (k.key, k.ty, k.range))
        .collect();
    let small = [
        "demo.gaussians=300",
        "demo.cameras=3",
        "demo.width=32",
        "demo.height=24",
        "train.iterations=2",
        "log.eval=false",
        "log.progress=false",
    ];
    for (n, (key, ty, range)) in keys.into_iter().enumerate() {
        // 1e39 is infinite as an f32 but a finite f64: nonsense for certain only when
        // the key's documented range excludes it (the reference does not say which
        // floats are f32).
        let huge_in_range = range
            .as_deref()
            .and_then(lsplat_core::config_doc::Range::parse)
            .is_none_or(|r| r.contains(1e39));
        let mut values = vec!["nan", "-1e400", "[1, 2]", "{a = 1}"];
        if ty.starts_with("integer") || ty.starts_with("list of integer") {
            values.extend(["-1", "99999999999999999999", "1.5"]);
        }
        if ty.starts_with("float") {
            values.extend(["inf", "1e39"]);
        }
        if ty.starts_with("boolean") {
            values.extend(["yes", "2"]);
        }
        for (m, val) in values.into_iter().enumerate() {
            // A far plane at infinity is a meaningful setting; 1e39 is inf as f32.
            let meaningful =
                (key == "render.far" && val == "inf") || (val == "1e39" && huge_in_range);
            // A folder of its own: a case that succeeds must not make later ones
            // fail for finding its finished run.
            let run_out = format!("audit_run_{n}_{m}");
            let mut args = v(&["train", "--out", &run_out]);
            for s in small {
                args.extend(v(&["--set", s]));
            }
            args.extend(v(&["--set", &format!("{key}={val}")]));
            out.push(Case::new(
                "config values",
                format!("{key}={val}"),
                args,
                if meaningful {
                    Expect::Any
                } else {
                    Expect::Fail
                },
            ));
        }
    }
}

// --------------------------------------------------------------------- flags

fn flags(fx: &Fixture, out: &mut Vec<Case>) {
    let r = p(&fx.run);
    let d = fx.case_dir("flags");
    let o = |n: &str| p(&d.join(n));
    let cases: Vec<Vec<String>> = vec![
        v(&["bench", "--iters", "0"]),
        v(&["bench", "--iters", "-3"]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--orbit",
            "0",
            "--out",
            &o("s0"),
        ]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--width",
            "0",
            "--out",
            &o("s1"),
        ]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--objects",
            "0",
            "--out",
            &o("s2"),
        ]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--dim",
            "0",
            "--out",
            &o("s3"),
        ]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--up",
            "w",
            "--out",
            &o("s4"),
        ]),
        v(&[
            "synth",
            "--splats",
            &p(&fx.ply),
            "--width",
            "100000",
            "--height",
            "100000",
            "--orbit",
            "1",
            "--out",
            &o("s5"),
        ]),
        v(&[
            "render",
            "--run",
            &r,
            "--cameras",
            "nope",
            "--out",
            &o("r0"),
        ]),
        v(&[
            "render",
            "--run",
            &r,
            "--backend",
            "quantum",
            "--out",
            &o("r1"),
        ]),
        v(&["render", "--run", &p(&fx.scene_dir), "--out", &o("r2")]),
        v(&["render", "--run", "/nonexistent", "--out", &o("r3")]),
        v(&[
            "query",
            "--run",
            &r,
            "--text",
            &p(&fx.text),
            "--query",
            "no such phrase",
            "--out",
            &o("q0"),
        ]),
        v(&["solve", "--levels", "1,9", "--out", &o("v0")]),
        v(&[
            "solve",
            "--levels",
            "2,2",
            "--method",
            "average",
            "--out",
            &o("v1"),
        ]),
        v(&["train", "--resume", &r, "--out", &o("t0")]),
        v(&["train", "--set", "nokey", "--out", &o("t1")]),
        v(&["train", "--set", "train.iterations", "--out", &o("t2")]),
        v(&["train", "--set", "=3", "--out", &o("t3")]),
        v(&["train", "--set", "train..lr=1", "--out", &o("t4")]),
        v(&[
            "import",
            "langsplat",
            "--source",
            "/nonexistent",
            "--out",
            &o("i0"),
        ]),
        v(&[
            "autoencoder",
            "train",
            "--dataset",
            "/nonexistent",
            "--out",
            &o("a0.safetensors"),
        ]),
        v(&[
            "autoencoder",
            "encode",
            "--model",
            &p(&fx.text),
            "--dataset",
            &p(&fx.scene_dir.join("dataset")),
            "--out",
            &o("a1"),
        ]),
        v(&[
            "eval",
            "lerf",
            "--run",
            &r,
            "--labels",
            "/nonexistent",
            "--text",
            &p(&fx.text),
            "--out",
            &o("e0"),
        ]),
        v(&["config", "--toml", "--markdown"]),
        v(&["no-such-command"]),
    ];
    for args in cases {
        out.push(Case::new("flags", args.join(" "), args, Expect::Fail));
    }
}
