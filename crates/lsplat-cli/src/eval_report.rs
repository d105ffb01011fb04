//! The report of `eval lerf`: one summary JSON per protocol (`lerf.json` for the 2D
//! protocols, `lerf_3d.json` for the 3D one) with the same fields, and the printout
//! (one protocol, or 2D and 3D side by side).

use std::path::{Path, PathBuf};

use anyhow::Result;
use lsplat_data::io::write_bytes_atomic;
use lsplat_query::score::{self, Report, Summary};
use serde_json::{Map, Value, json};

/// One scored (frame, query) pair.
pub struct Pair {
    /// Frame stem.
    pub frame: String,
    /// Category.
    pub query: String,
    /// IoU of the predicted mask with the labels'.
    pub iou: f64,
    /// Protocol-specific fields of `per_query`.
    pub extra: Map<String, Value>,
}

/// What a protocol found.
pub struct Outcome {
    /// Short name in printouts (`2D`, `3D`).
    pub key: &'static str,
    /// The protocol and its source.
    pub protocol: String,
    /// Its JSON file name.
    pub file: &'static str,
    /// Every pair, frame by frame in label order.
    pub pairs: Vec<Pair>,
    /// Protocol-specific summary fields (and their printout lines).
    pub fields: Vec<(String, Value, String)>,
    /// mIoU and mAcc, overall and per category.
    pub report: Report,
}

impl Outcome {
    /// An outcome from its pairs.
    pub fn new(
        key: &'static str,
        protocol: String,
        file: &'static str,
        pairs: Vec<Pair>,
    ) -> Result<Outcome> {
        let ious: Vec<(String, f64)> = pairs.iter().map(|p| (p.query.clone(), p.iou)).collect();
        let report = score::summarize(&ious)?;
        Ok(Outcome {
            key,
            protocol,
            file,
            pairs,
            fields: Vec::new(),
            report,
        })
    }
}

/// What every protocol's report shares.
pub struct Common {
    /// The labels folder.
    pub labels: PathBuf,
    /// The level runs.
    pub runs: Vec<PathBuf>,
    /// Their levels.
    pub levels: Vec<u8>,
    /// Label frames.
    pub frames: usize,
    /// Label objects with a shape partly outside the image (clipped).
    pub clipped: usize,
    /// The output folder.
    pub out: PathBuf,
}

impl Common {
    /// The scene's name: the labels folder's.
    fn scene(&self) -> String {
        self.labels
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }
}

fn summary_json(s: &Summary) -> Value {
    json!({"pairs": s.pairs, "miou": s.miou, "acc_25": s.acc_25, "acc_50": s.acc_50})
}

/// The summary JSON of one protocol.
pub fn to_json(c: &Common, o: &Outcome) -> Value {
    let mut m = Map::new();
    m.insert("protocol".into(), json!(o.protocol));
    m.insert("scene".into(), json!(c.scene()));
    m.insert("labels".into(), json!(c.labels.display().to_string()));
    let runs: Vec<String> = c.runs.iter().map(|p| p.display().to_string()).collect();
    m.insert("runs".into(), json!(runs));
    m.insert("levels".into(), json!(c.levels));
    m.insert("frames".into(), json!(c.frames));
    m.insert("pairs".into(), json!(o.pairs.len()));
    m.insert("miou".into(), json!(o.report.all.miou));
    m.insert("acc_25".into(), json!(o.report.all.acc_25));
    m.insert("acc_50".into(), json!(o.report.all.acc_50));
    for (k, v, _) in &o.fields {
        m.insert(k.clone(), v.clone());
    }
    m.insert("clipped_shapes".into(), json!(c.clipped));
    let cats: Vec<Value> = o
        .report
        .categories
        .iter()
        .map(|(name, s)| {
            let mut v = summary_json(s);
            v["category"] = json!(name);
            v
        })
        .collect();
    m.insert("per_category".into(), Value::Array(cats));
    let pairs: Vec<Value> = o
        .pairs
        .iter()
        .map(|p| {
            let mut v = Map::new();
            v.insert("frame".into(), json!(p.frame));
            v.insert("query".into(), json!(p.query));
            v.insert("iou".into(), json!(p.iou));
            v.extend(p.extra.clone());
            Value::Object(v)
        })
        .collect();
    m.insert("per_query".into(), Value::Array(pairs));
    Value::Object(m)
}

/// Writes every protocol's JSON and prints the results.
pub fn finish(c: &Common, outcomes: &[Outcome], runs: usize, seconds: f64) -> Result<()> {
    let mut files = Vec::new();
    for o in outcomes {
        let path = c.out.join(o.file);
        write_bytes_atomic(
            &path,
            serde_json::to_string_pretty(&to_json(c, o))?.as_bytes(),
        )?;
        files.push(path);
    }
    let pairs = outcomes.first().map_or(0, |o| o.pairs.len());
    println!(
        "LERF `{}`: {} frames, {pairs} (frame, query) pairs, {runs} level run(s) in {seconds:.2} s",
        c.scene(),
        c.frames,
    );
    match outcomes {
        [one] => print_one(one),
        _ => print_side_by_side(outcomes),
    }
    if c.clipped > 0 {
        println!(
            "warning: {} label object(s) extend beyond their image and were clipped to it",
            c.clipped
        );
    }
    for f in &files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

fn count_above(o: &Outcome, b: f64) -> usize {
    o.pairs.iter().filter(|p| p.iou > b).count()
}

fn print_one(o: &Outcome) {
    println!("{}", o.protocol);
    let n = o.pairs.len();
    let a = &o.report.all;
    let mut line = format!(
        "mIoU {:.4}, mAcc@0.25 {:.4} ({}/{n}), mAcc@0.5 {:.4}",
        a.miou,
        a.acc_25,
        count_above(o, 0.25),
        a.acc_50
    );
    for (_, _, text) in o.fields.iter().filter(|f| !f.2.is_empty()) {
        line.push_str(&format!(", {text}"));
    }
    println!("{line}");
}

fn print_side_by_side(os: &[Outcome]) {
    let head: Vec<String> = os.iter().map(|o| format!("{:>12}", o.key)).collect();
    println!("{:<28}{}", "", head.join(""));
    let row = |name: &str, f: &dyn Fn(&Outcome) -> String| {
        let cells: Vec<String> = os.iter().map(|o| format!("{:>12}", f(o))).collect();
        println!("{name:<28}{}", cells.join(""));
    };
    row("mIoU", &|o| format!("{:.4}", o.report.all.miou));
    row("mAcc@0.25", &|o| format!("{:.4}", o.report.all.acc_25));
    row("mAcc@0.5", &|o| format!("{:.4}", o.report.all.acc_50));
    let mut keys: Vec<&str> = Vec::new();
    for o in os {
        for (k, _, _) in o.fields.iter().filter(|f| !f.2.is_empty()) {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    for k in keys {
        row(k, &|o| {
            o.fields
                .iter()
                .find(|f| f.0 == k)
                .and_then(|f| f.1.as_f64())
                .map_or_else(|| "-".into(), |v| format!("{v:.4}"))
        });
    }
    println!("per category (mIoU):");
    for (i, (name, _)) in os[0].report.categories.iter().enumerate() {
        row(&format!("  {name}"), &|o| {
            o.report
                .categories
                .get(i)
                .map_or_else(|| "-".into(), |c| format!("{:.4}", c.1.miou))
        });
    }
    for o in os {
        println!("{}: {}", o.key, o.protocol);
    }
}

/// The overlay file of a (frame, query) pair under `dir`.
pub fn overlay_path(dir: &Path, frame: &str, query: &str) -> PathBuf {
    dir.join(frame)
        .join(format!("{}.png", crate::views::file_stem(query)))
}
