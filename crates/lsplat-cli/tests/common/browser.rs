//! A viewer process and a headless Chromium driven over WebDriver (chromedriver),
//! for the browser tests. Both are killed when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `chromium` and `chromedriver` (Debian's packages), or None to skip — unless
/// LSPLAT_REQUIRE_BROWSER=1, which makes a missing browser a failure.
pub fn browser() -> Option<(String, String)> {
    let find = |names: &[&str]| {
        names.iter().find_map(|n| {
            let p = Path::new("/usr/bin").join(n);
            p.is_file().then(|| p.to_string_lossy().into_owned())
        })
    };
    let chromium = std::env::var("LSPLAT_CHROMIUM")
        .ok()
        .or_else(|| find(&["chromium", "chromium-browser"]));
    let driver = std::env::var("LSPLAT_CHROMEDRIVER")
        .ok()
        .or_else(|| find(&["chromedriver"]));
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        _ => {
            assert!(
                std::env::var("LSPLAT_REQUIRE_BROWSER").as_deref() != Ok("1"),
                "LSPLAT_REQUIRE_BROWSER=1 but chromium or chromedriver is missing (apt-get install chromium chromium-driver)"
            );
            eprintln!(
                "SKIPPED the browser tests: install Debian's chromium and chromium-driver (or set LSPLAT_CHROMIUM / LSPLAT_CHROMEDRIVER)"
            );
            None
        }
    }
}

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `lsplat-engine view`.
pub struct Viewer {
    pub proc: Proc,
    /// The URL it printed (token included).
    pub url: String,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub token: String,
}

/// Starts `lsplat-engine view <args> --port 0 --host 127.0.0.1` and waits for its URL.
pub fn start_viewer(args: &[&str]) -> Viewer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lsplat-engine"))
        .arg("view")
        .args(args)
        .args(["--port", "0", "--host", "127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(u) = line.trim().strip_prefix("http://") {
                let _ = tx.send(format!("http://{u}"));
            }
        }
    });
    let mut proc = Proc(child);
    let url = match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(u) => u,
        Err(_) => {
            let _ = proc.0.kill();
            let mut err = String::new();
            if let Some(mut e) = proc.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("the viewer printed no URL: {err}");
        }
    };
    let (base, token) = url.split_once("/?token=").unwrap();
    Viewer {
        base: base.to_string(),
        token: token.to_string(),
        url,
        proc,
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A chromedriver listening on a free port, and the WebDriver URL.
pub fn start_driver(driver: &str) -> (Proc, String) {
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proc = Proc(child);
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (proc, format!("http://127.0.0.1:{port}"))
}

/// The capabilities of a headless Chromium with a fresh profile.
pub fn chrome_capabilities(
    chromium: &str,
    profile: &Path,
) -> serde_json::Map<String, serde_json::Value> {
    let args = vec![
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-dev-shm-usage".into(),
        "--window-size=1200,760".into(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({ "binary": chromium, "args": args }),
    );
    caps
}

/// A plain HTTP/1.0 GET: the status code and the body.
pub fn http_get(base: &str, path: &str) -> (u16, String) {
    let hostport = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(hostport).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {hostport}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let code = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    (code, body.to_string())
}

/// Decodes a PNG into (width, height, RGB8).
pub fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgb = match info.color_type {
        png::ColorType::Rgb => buf,
        png::ColorType::Rgba => buf
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        other => panic!("PNG colour type {other:?}"),
    };
    (info.width, info.height, rgb)
}

/// Largest and mean absolute difference of two RGB8 pictures, and the fraction of
/// values differing by more than `tol`.
pub fn compare(a: &[u8], b: &[u8], tol: u8) -> (u8, f64, f64) {
    assert_eq!(a.len(), b.len(), "picture sizes differ");
    let (mut max, mut sum, mut over) = (0u8, 0u64, 0usize);
    for (x, y) in a.iter().zip(b) {
        let d = x.abs_diff(*y);
        max = max.max(d);
        sum += d as u64;
        over += (d > tol) as usize;
    }
    (
        max,
        sum as f64 / a.len().max(1) as f64,
        over as f64 / a.len().max(1) as f64,
    )
}
