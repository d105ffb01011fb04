//! Compiling a kernel source into a shared object: the system C++ compiler, a scan
//! pass that finds the kernels after macro expansion, generated `extern "C"`
//! trampolines, and a disk cache per (source, defines, warp size, compiler)
//! ([`crate::kcache`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use lsplat_device::{DeviceError, Result};

/// The emulation header (kernels/simt.h).
pub const SIMT_H: &str = include_str!("../../../../kernels/simt.h");

/// Changes whenever the generated translation unit changes shape (cache key).
const UNIT_VERSION: u32 = 2;

/// The C++ compiler the runtime uses.
#[derive(Clone, Debug)]
pub struct Compiler {
    /// Program (from `CXX`, else `g++`, else `clang++`).
    pub program: String,
    /// First line of `--version`.
    pub version: String,
}

const NO_CXX: &str = "the simt runtime compiles kernels with a C++20 compiler at run time: \
     install g++ (Debian/Ubuntu: `apt-get install g++`) or clang++, or point CXX at one";

fn unavailable(reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        backend: "simt",
        reason: reason.into(),
    }
}

/// Finds the compiler once per process.
pub fn compiler() -> Result<Compiler> {
    static FOUND: OnceLock<std::result::Result<Compiler, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let candidates: Vec<String> = match std::env::var("CXX") {
                Ok(c) if !c.trim().is_empty() => vec![c],
                _ => vec!["g++".into(), "clang++".into()],
            };
            for c in &candidates {
                if let Ok(out) = Command::new(c).arg("--version").output()
                    && out.status.success()
                {
                    let text = String::from_utf8_lossy(&out.stdout);
                    return Ok(Compiler {
                        program: c.clone(),
                        version: text.lines().next().unwrap_or("").trim().to_string(),
                    });
                }
            }
            Err(format!("{NO_CXX} (tried {})", candidates.join(", ")))
        })
        .clone()
        .map_err(unavailable)
}

/// Where compiled kernels are kept: `LSPLAT_KERNEL_CACHE`, else the user cache folder
/// (see [`crate::kcache`]).
pub fn cache_dir() -> PathBuf {
    crate::kcache::dir("simt")
}

/// A kernel found by the scan pass: its name and launch bound expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDecl {
    /// The `extern "C"` name.
    pub name: String,
    /// The `__launch_bounds__` expression after macro expansion, if any.
    pub bound: Option<String>,
}

/// A compiled module on disk and the kernels it exports.
pub struct Built {
    /// The shared object.
    pub path: PathBuf,
    /// Its kernels.
    pub kernels: Vec<KernelDecl>,
}

fn kernel_error(label: &str, message: String) -> DeviceError {
    DeviceError::Kernel {
        kernel: label.to_string(),
        message,
    }
}

fn define_args(defines: &[(String, String)], warp: u32) -> Vec<String> {
    let mut v: Vec<String> = defines.iter().map(|(n, d)| format!("-D{n}={d}")).collect();
    v.push(format!("-DLS_WARP_SIZE={warp}"));
    v
}

fn header() -> String {
    let body: String = SIMT_H
        .lines()
        .map(|l| if l.trim() == "#pragma once" { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n");
    format!("#line 1 \"simt.h\"\n{body}\n")
}

/// Compiles (or finds in the cache) `source` for warp size `warp`.
pub fn build(label: &str, source: &str, defines: &[(String, String)], warp: u32) -> Result<Built> {
    let cxx = compiler()?;
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).map_err(|e| {
        unavailable(format!(
            "cannot create the kernel cache {}: {e}",
            dir.display()
        ))
    })?;
    let key = crate::kcache::key((
        UNIT_VERSION,
        SIMT_H,
        source,
        defines,
        warp,
        &cxx.version,
        &cxx.program,
    ));
    let stem: String = label
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("kernel")
        .to_string();
    let base = dir.join(format!("{stem}-w{warp}-{key:016x}"));
    let so = base.with_extension("so");
    let list = base.with_extension("kernels");
    // One build per module at a time in this process (parallel tests ask for the same
    // modules at once); other processes are safe through the temporary names below.
    let gate = build_gate(&base);
    let _held = gate.lock().unwrap_or_else(|e| e.into_inner());
    if so.exists()
        && let Ok(text) = std::fs::read_to_string(&list)
        && let Some(kernels) = parse_list(&text)
    {
        return Ok(Built { path: so, kernels });
    }
    let defs = define_args(defines, warp);
    let kernels = scan(&cxx, label, source, &defs)?;
    if kernels.is_empty() {
        return Err(kernel_error(
            label,
            "no `extern \"C\" __global__` kernel found".into(),
        ));
    }
    let mut unit = header();
    unit.push_str(&source_line(label, source));
    unit.push_str(source);
    unit.push_str("\n#line 1 \"simt-trampolines\"\n");
    for k in &kernels {
        unit.push_str(&format!(
            "extern \"C\" __attribute__((visibility(\"default\"))) int ls_simt_run_{n}(\
             const ls_simt::Launch* l, void** p) {{ return ls_simt::run_block(l, p, \
             &ls_simt::invoke<{n}>, \"{n}\", {b}); }}\n",
            n = k.name,
            b = k.bound.as_deref().unwrap_or("0")
        ));
    }
    // Unique temporary names, then renames: concurrent builds of the same module (tests
    // in parallel, several processes) never see a half-written file.
    let cpp = crate::kcache::temp_path(&base, "cpp");
    let tmp_so = crate::kcache::temp_path(&base, "so.tmp");
    std::fs::write(&cpp, &unit)
        .map_err(|e| unavailable(format!("cannot write {}: {e}", cpp.display())))?;
    let out = Command::new(&cxx.program)
        .args([
            "-std=c++20",
            "-O2",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
        ])
        .args([
            "-ffp-contract=off",
            "-fno-exceptions",
            "-Wall",
            "-Wno-unused-function",
        ])
        .args(&defs)
        .arg("-o")
        .arg(&tmp_so)
        .arg(&cpp)
        .output()
        .map_err(|e| unavailable(format!("cannot run {}: {e}", cxx.program)))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp_so);
        let log = String::from_utf8_lossy(&out.stderr);
        return Err(kernel_error(
            label,
            format!(
                "{} failed (source kept at {}):\n{}",
                cxx.program,
                cpp.display(),
                trim_log(&log)
            ),
        ));
    }
    let _ = std::fs::remove_file(&cpp);
    let listing: String = kernels
        .iter()
        .map(|k| format!("{} {}\n", k.name, k.bound.as_deref().unwrap_or("-")))
        .collect();
    let tmp_list = crate::kcache::temp_path(&base, "kernels.tmp");
    std::fs::write(&tmp_list, listing)
        .and_then(|_| std::fs::rename(&tmp_so, &so))
        .and_then(|_| std::fs::rename(&tmp_list, &list))
        .map_err(|e| unavailable(format!("cannot store {}: {e}", so.display())))?;
    Ok(Built { path: so, kernels })
}

fn build_gate(base: &std::path::Path) -> std::sync::Arc<std::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    static GATES: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut map = GATES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(base.to_path_buf()).or_default().clone()
}

/// A `#line` directive so diagnostics count lines of `source` (engine sources bring
/// their own).
fn source_line(name: &str, source: &str) -> String {
    if source.starts_with("#line") {
        String::new()
    } else {
        let name = name.split(' ').next().unwrap_or("kernel");
        format!("#line 1 \"{name}\"\n")
    }
}

fn trim_log(log: &str) -> String {
    const MAX: usize = 6000;
    if log.len() <= MAX {
        log.trim().to_string()
    } else {
        let mut end = MAX;
        while !log.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n[… {} more bytes]", &log[..end], log.len() - end)
    }
}

fn parse_list(text: &str) -> Option<Vec<KernelDecl>> {
    text.lines()
        .map(|l| {
            let (name, bound) = l.split_once(' ')?;
            Some(KernelDecl {
                name: name.to_string(),
                bound: (bound != "-").then(|| bound.to_string()),
            })
        })
        .collect()
}

/// Preprocesses the source with the scan markers and lists its kernels.
fn scan(cxx: &Compiler, label: &str, source: &str, defs: &[String]) -> Result<Vec<KernelDecl>> {
    let mut child = Command::new(&cxx.program)
        .args(["-std=c++20", "-E", "-P", "-x", "c++", "-DLS_SIMT_SCAN=1"])
        .args(defs)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| unavailable(format!("cannot run {}: {e}", cxx.program)))?;
    let text = format!("{}{}{source}", header(), source_line(label, source));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| unavailable(format!("{} failed: {e}", cxx.program)))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(kernel_error(
            label,
            format!(
                "preprocessing failed:\n{}",
                trim_log(&String::from_utf8_lossy(&out.stderr))
            ),
        ));
    }
    Ok(find_kernels(&String::from_utf8_lossy(&out.stdout)))
}

/// Finds `LS_SIMT_GLOBAL void [LS_SIMT_BOUNDS(expr)] name(` in preprocessed text.
pub fn find_kernels(text: &str) -> Vec<KernelDecl> {
    const MARK: &str = "LS_SIMT_GLOBAL";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(MARK) {
        rest = &rest[i + MARK.len()..];
        let mut s = rest.trim_start();
        let Some(after) = s.strip_prefix("void") else {
            continue;
        };
        s = after.trim_start();
        let mut bound = None;
        if let Some(b) = s.strip_prefix("LS_SIMT_BOUNDS") {
            let b = b.trim_start();
            let Some((expr, tail)) = balanced(b) else {
                continue;
            };
            bound = Some(expr.trim().to_string());
            s = tail.trim_start();
        }
        let name: String = s
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && s[name.len()..].trim_start().starts_with('(') {
            out.push(KernelDecl { name, bound });
        }
    }
    out
}

/// Splits `(…)rest` at the parenthesis matching the first one.
fn balanced(s: &str) -> Option<(&str, &str)> {
    if !s.starts_with('(') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[1..i], &s[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kernels_and_bounds() {
        let text = "extern \"C\" LS_SIMT_GLOBAL void LS_SIMT_BOUNDS((16u * (16u))) ls_a(int x) {}\n\
                    extern \"C\" LS_SIMT_GLOBAL void ls_b (float* p) {}\n\
                    LS_SIMT_GLOBAL int not_a_kernel;";
        let k = find_kernels(text);
        assert_eq!(
            k,
            vec![
                KernelDecl {
                    name: "ls_a".into(),
                    bound: Some("(16u * (16u))".into())
                },
                KernelDecl {
                    name: "ls_b".into(),
                    bound: None
                }
            ]
        );
    }

    #[test]
    fn listing_round_trips() {
        let k = parse_list("a 256\nb -\n").unwrap();
        assert_eq!(k[0].bound.as_deref(), Some("256"));
        assert_eq!(k[1].bound, None);
    }
}
