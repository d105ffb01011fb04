//! What each kind of output folder holds: the names its command writes, so that
//! `--force` removes only those, and anything else in the folder makes it foreign.

use crate::io::is_temp_name;

/// The names one command writes into the folder it owns.
#[derive(Debug)]
pub struct Layout {
    /// The folder's kind, in messages (`run`, `render output`).
    pub kind: &'static str,
    /// A top-level file the command writes.
    pub file: fn(&str) -> bool,
    /// A folder the command writes.
    pub dir: fn(&str) -> bool,
    /// A file it writes inside such a folder.
    pub inner: fn(&str) -> bool,
    /// Whether an unfinished one can be continued (`train --resume`).
    pub resumable: bool,
}

fn ext(name: &str, exts: &[&str]) -> bool {
    exts.iter().any(|e| name.ends_with(e))
}

/// A run of `train` or `solve` (see the module doc of [`crate::run`]); `level_<l>/`
/// folders hold the per-level outputs of a solver run of several levels.
pub const RUN: Layout = Layout {
    kind: "run",
    file: |n| super::RUN_FILES.contains(&n),
    dir: |n| n == super::CHECKPOINT_DIR || n.starts_with("level_"),
    inner: |n| n.ends_with(".safetensors") || super::RUN_FILES.contains(&n),
    resumable: true,
};

/// `render`: `<camera>.npy` and `<camera>.png`, then `summary.json`.
pub const RENDER: Layout = Layout {
    kind: "render output",
    file: |n| ext(n, &[".npy", ".png"]) || n == super::SUMMARY_FILE,
    dir: |_| false,
    inner: |_| false,
    resumable: false,
};

/// `render --layout langsplat`: `renders_npy/<index>.npy` and `renders/<index>.png`
/// inside `<scene>_<level>/train/ours_None`, then `summary.json`.
pub const RENDER_LANGSPLAT: Layout = Layout {
    kind: "render output",
    file: |n| n == super::SUMMARY_FILE,
    dir: |n| matches!(n, "renders_npy" | "renders"),
    inner: |n| ext(n, &[".npy", ".png"]),
    resumable: false,
};

/// `query`: `<camera>/<query>.npy|.png` and `<camera>/features.png`, then
/// `summary.json`.
pub const QUERY: Layout = Layout {
    kind: "query output",
    file: |n| n == super::SUMMARY_FILE,
    dir: |_| true,
    inner: |n| ext(n, &[".npy", ".png"]),
    resumable: false,
};

/// `synth`: `language_features/<stem>_f.npy|_s.npy`, `cameras.json`, `scene.toml`,
/// the `dataset/` a later `import langsplat` writes there, then `summary.json`.
pub const SYNTH: Layout = Layout {
    kind: "synth output",
    // `--tile` writes splats.ply, `--subsets K,…` cameras_K.json and scene_K.toml.
    file: |n| {
        matches!(n, "cameras.json" | "scene.toml" | "splats.ply")
            || n == super::SUMMARY_FILE
            || (n.starts_with("cameras_") && n.ends_with(".json"))
            || (n.starts_with("scene_") && n.ends_with(".toml"))
    },
    dir: |n| matches!(n, "language_features" | "dataset"),
    inner: |n| ext(n, &["_f.npy", "_s.npy", ".parquet"]),
    resumable: false,
};

impl Layout {
    /// Whether a top-level entry is one this command writes (temporary files of its
    /// atomic writes included).
    pub fn owns(&self, name: &str, is_dir: bool) -> bool {
        if is_dir {
            (self.dir)(name)
        } else {
            (self.file)(name) || is_temp_name(name)
        }
    }

    /// Whether a file inside one of its folders is one it writes.
    pub fn owns_inner(&self, name: &str) -> bool {
        (self.inner)(name) || is_temp_name(name)
    }
}
