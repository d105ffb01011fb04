//! Progress of the long commands on stderr: a bar on a terminal; elsewhere (CI,
//! `nohup`, Slurm logs) a plain line at a steady cadence — every
//! `log.progress_every_s` seconds or `log.progress_every_percent` of the work,
//! whichever comes first — with the count, the rate, the time left and the command's
//! message (the loss), never an ANSI code.
//!
//! The rate, and the time left from it, is measured over a warm window: the last half
//! of the elapsed time, at most [`RATE_WINDOW_S`] seconds, never the first unit of
//! work (which carries the set-up: caches built, kernels compiled), so a slow start
//! does not inflate the estimate for the rest of the run.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lsplat_core::config::LogConfig;

/// Seconds of recent work the rate is measured over.
pub const RATE_WINDOW_S: f64 = 30.0;
/// Seconds between refreshes of the bar's rate and time left.
const BAR_REFRESH_S: f64 = 0.5;

/// When a plain progress line is printed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cadence {
    /// At least this often (seconds).
    pub every_s: f64,
    /// And whenever this share of the work (percent) has been done since the last.
    pub every_percent: f64,
}

impl Cadence {
    /// The cadence a configuration's `[log]` section sets.
    pub fn of(log: &LogConfig) -> Cadence {
        Cadence {
            every_s: log.progress_every_s,
            every_percent: log.progress_every_percent,
        }
    }
}

impl Default for Cadence {
    fn default() -> Self {
        Cadence::of(&LogConfig::default())
    }
}

/// The rate of recent work: `(seconds, position)` samples of the last
/// [`RATE_WINDOW_S`] seconds, from the end of the first unit of work on.
#[derive(Debug, Default)]
pub struct Rate {
    samples: VecDeque<(f64, u64)>,
    start: Option<u64>,
}

impl Rate {
    /// Records the position `pos` at `t` seconds.
    pub fn record(&mut self, t: f64, pos: u64) {
        let start = *self.start.get_or_insert(pos);
        if pos == start {
            // The first unit has not finished: nothing warm to measure yet.
            return;
        }
        // Samples at least 1/64 of the elapsed time (at most 1/32 of the window)
        // apart; in between, the newest one moves (never the first, the warm window's
        // anchor).
        let spacing = (t / 64.0).min(RATE_WINDOW_S / 32.0);
        let n = self.samples.len();
        match self.samples.back_mut() {
            Some(last) if n >= 2 && t - last.0 < spacing => *last = (t, pos),
            _ => self.samples.push_back((t, pos)),
        }
        // Keep one sample at or before the window's start, so the window is full.
        while self.samples.len() > 2 && t - self.samples[1].0 >= RATE_WINDOW_S {
            self.samples.pop_front();
        }
    }

    /// Units per second over the window — the last half of the elapsed time, at most
    /// [`RATE_WINDOW_S`] — once two samples span some time.
    pub fn per_second(&self) -> Option<f64> {
        let &(t1, p1) = self.samples.back()?;
        let start = t1 - (t1 / 2.0).min(RATE_WINDOW_S);
        let &(t0, p0) = self
            .samples
            .iter()
            .rev()
            .find(|s| s.0 <= start)
            .or(self.samples.front())?;
        (t1 > t0 && p1 > p0).then(|| (p1 - p0) as f64 / (t1 - t0))
    }

    /// Seconds left for `remaining` units at the window's rate.
    pub fn eta(&self, remaining: u64) -> Option<f64> {
        self.per_second().map(|r| remaining as f64 / r)
    }
}

enum Mode {
    Bar(ProgressBar),
    Lines,
    Hidden,
}

/// Progress of one command's work (`what`: the command, `unit`: what is counted).
pub struct Progress {
    mode: Mode,
    what: String,
    unit: String,
    len: u64,
    pos: u64,
    t0: Instant,
    rate: Rate,
    cadence: Cadence,
    message: String,
    last_line: f64,
    last_share: u64,
    last_refresh: f64,
}

impl Progress {
    /// `len` units (0 = not known yet); shown when `show` — as a bar on a terminal,
    /// else as lines at `cadence`.
    pub fn new(what: &str, len: u64, unit: &str, show: bool, cadence: Cadence) -> Progress {
        let mode = match (show, std::io::stderr().is_terminal()) {
            (false, _) => Mode::Hidden,
            (true, false) => Mode::Lines,
            (true, true) => {
                let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                let template = format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}");
                bar.set_style(
                    ProgressStyle::with_template(&template)
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                Mode::Bar(bar)
            }
        };
        let p = Progress {
            mode,
            what: what.to_string(),
            unit: unit.to_string(),
            len,
            pos: 0,
            t0: Instant::now(),
            rate: Rate::default(),
            cadence,
            message: String::new(),
            last_line: 0.0,
            last_share: 0,
            last_refresh: f64::NEG_INFINITY,
        };
        if matches!(p.mode, Mode::Lines) {
            p.print(&format!(
                "{}: started, {} {} (progress every {}s or {}%)",
                p.what,
                if len > 0 { len.to_string() } else { "?".into() },
                p.unit,
                p.cadence.every_s,
                p.cadence.every_percent
            ));
        }
        p
    }

    fn print(&self, line: &str) {
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "{line}");
    }

    fn share(&self, pos: u64) -> u64 {
        if self.len == 0 || self.cadence.every_percent <= 0.0 {
            return 0;
        }
        (100.0 * pos as f64 / self.len as f64 / self.cadence.every_percent) as u64
    }

    /// Units done.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Sets the total (when it becomes known).
    pub fn set_length(&mut self, len: u64) {
        self.len = len;
        self.last_share = self.share(self.pos);
        if let Mode::Bar(b) = &self.mode {
            b.set_length(len);
        }
    }

    /// Starts (or resumes) at `pos` units already done: they count neither in the
    /// rate nor towards the next line.
    pub fn set_position(&mut self, pos: u64) {
        self.pos = pos;
        self.rate = Rate::default();
        self.rate.record(0.0, pos);
        self.last_share = self.share(pos);
        if let Mode::Bar(b) = &self.mode {
            b.set_position(pos);
        }
    }

    /// The command's own note (e.g. the loss), shown on the bar and on each line.
    pub fn set_message(&mut self, msg: impl Into<String>) {
        self.message = msg.into();
        self.last_refresh = f64::NEG_INFINITY;
    }

    /// `n` more units done.
    pub fn inc(&mut self, n: u64) {
        self.pos += n;
        if matches!(self.mode, Mode::Hidden) {
            return;
        }
        let t = self.t0.elapsed().as_secs_f64();
        self.rate.record(t, self.pos);
        match &self.mode {
            Mode::Bar(b) => {
                b.set_position(self.pos);
                if t - self.last_refresh >= BAR_REFRESH_S {
                    self.last_refresh = t;
                    b.set_message(self.status(false));
                }
            }
            Mode::Lines => {
                let share = self.share(self.pos);
                if t - self.last_line >= self.cadence.every_s || share > self.last_share {
                    self.last_line = t;
                    self.last_share = share;
                    self.print(&self.line(t));
                }
            }
            Mode::Hidden => {}
        }
    }

    /// Rate, time left and message.
    fn status(&self, with_count: bool) -> String {
        let mut s = String::new();
        if with_count {
            if self.len > 0 {
                s += &format!(
                    "{}/{} {} ({:.0}%)",
                    self.pos,
                    self.len,
                    self.unit,
                    100.0 * self.pos as f64 / self.len as f64
                );
            } else {
                s += &format!("{} {}", self.pos, self.unit);
            }
        }
        let sep = |s: &mut String| {
            if !s.is_empty() {
                *s += ", ";
            }
        };
        if let Some(r) = self.rate.per_second() {
            sep(&mut s);
            s += &format!("{} {}/s", rate(r), self.unit);
            if self.len > self.pos
                && let Some(eta) = self.rate.eta(self.len - self.pos)
            {
                s += &format!(", ETA {}", duration(eta));
            }
        }
        if !self.message.is_empty() {
            sep(&mut s);
            s += &self.message;
        }
        s
    }

    fn line(&self, t: f64) -> String {
        format!(
            "{}: {}, elapsed {}",
            self.what,
            self.status(true),
            duration(t)
        )
    }

    /// The work is done: the bar is cleared; a last line says so.
    pub fn finish(&mut self) {
        match &self.mode {
            Mode::Bar(b) => b.finish_and_clear(),
            Mode::Lines => {
                let t = self.t0.elapsed().as_secs_f64();
                self.print(&format!("{}: done, {}", self.what, self.line_tail(t)));
            }
            Mode::Hidden => {}
        }
    }

    fn line_tail(&self, t: f64) -> String {
        let mut s = format!("{} {} in {}", self.pos, self.unit, duration(t));
        if !self.message.is_empty() {
            s += ", ";
            s += &self.message;
        }
        s
    }

    /// The work stopped early (an error follows): the bar stays as it was.
    pub fn abandon(&mut self) {
        match &self.mode {
            Mode::Bar(b) => b.abandon(),
            Mode::Lines => {
                let t = self.t0.elapsed().as_secs_f64();
                self.print(&format!("{}: stopped, {}", self.what, self.line_tail(t)));
            }
            Mode::Hidden => {}
        }
    }
}

/// Progress of a solver (`solve`, `train.solver = average | lsq`): its pass over the
/// fitted cameras, then the least squares' iterations (at most `solve.max_iters`; the
/// time left is an upper bound) with the relative residual.
pub struct SolveProgress {
    show: bool,
    cadence: Cadence,
    passes: Option<Progress>,
    iterations: Option<Progress>,
}

impl SolveProgress {
    /// Shown when `show`, at `cadence` off a terminal.
    pub fn new(show: bool, cadence: Cadence) -> Self {
        SolveProgress {
            show,
            cadence,
            passes: None,
            iterations: None,
        }
    }

    /// One report of the solver.
    pub fn event(&mut self, e: lsplat_engine::resources::FitEvent) {
        use lsplat_engine::resources::FitEvent;
        let (show, cadence) = (self.show, self.cadence);
        match e {
            FitEvent::Cameras { done, total } => {
                let bar = self.passes.get_or_insert_with(|| {
                    Progress::new("solve", total as u64, "cameras", show, cadence)
                });
                let done = done as u64;
                if done > bar.position() {
                    bar.inc(done - bar.position());
                }
                if done >= total as u64 {
                    bar.finish();
                    self.passes = None;
                }
            }
            FitEvent::Iteration {
                iteration,
                max,
                residuals,
            } => {
                let bar = self.iterations.get_or_insert_with(|| {
                    Progress::new("solve lsq", u64::from(max), "iterations", show, cadence)
                });
                let worst = residuals.iter().copied().fold(0.0, f64::max);
                bar.set_message(format!("relative residual {worst:.2e} (levels: worst)"));
                let it = u64::from(iteration);
                if it > bar.position() {
                    bar.inc(it - bar.position());
                }
            }
        }
    }

    /// The solver returned.
    pub fn finish(&mut self) {
        for bar in [self.passes.take(), self.iterations.take()]
            .iter_mut()
            .flatten()
        {
            bar.finish();
        }
    }
}

/// A rate with three significant digits.
fn rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.3}")
    }
}

/// `4s`, `3m 12s`, `2h 05m`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let whole = s.round() as u64;
    if s < 10.0 {
        format!("{s:.1}s")
    } else if whole < 60 {
        format!("{whole}s")
    } else if whole < 3600 {
        format!("{}m {:02}s", whole / 60, whole % 60)
    } else {
        format!("{}h {:02}m", whole / 3600, (whole / 60) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose first 300 steps take 1 s each (cold caches: an operator built per
    /// camera) and the rest 10 ms: a minute into the fast part, the time left comes
    /// from the fast rate within 2 % (the whole-run average would be 5.7× too long).
    #[test]
    fn eta_comes_from_the_warm_window() {
        let (len, mut t, mut rate) = (100_000u64, 0.0, Rate::default());
        rate.record(0.0, 0);
        for pos in 1..=300 {
            t += 1.0;
            rate.record(t, pos);
        }
        for pos in 301..=6300 {
            t += 0.01;
            rate.record(t, pos);
        }
        let truth = (len - 6300) as f64 * 0.01;
        let eta = rate.eta(len - 6300).unwrap();
        let naive = (len - 6300) as f64 / (6300.0 / t);
        assert!((eta / truth - 1.0).abs() < 0.02, "{eta} vs {truth}");
        assert!(
            naive / truth > 5.0,
            "the naive estimate {naive} was the issue"
        );
    }

    /// The first unit (set-up) is not in the rate: a 100 s first step then steady
    /// 1 s steps give 1 step/s from the second sample on.
    #[test]
    fn the_first_unit_is_not_in_the_rate() {
        let mut rate = Rate::default();
        rate.record(0.0, 0);
        rate.record(100.0, 1);
        assert_eq!(rate.per_second(), None);
        rate.record(101.0, 2);
        rate.record(102.0, 3);
        assert_eq!(rate.per_second(), Some(1.0));
    }

    /// Slow units (longer than the window) still give a rate over the last unit.
    #[test]
    fn units_longer_than_the_window_have_a_rate() {
        let mut rate = Rate::default();
        rate.record(0.0, 0);
        for pos in 1..=5 {
            rate.record(60.0 * pos as f64, pos);
        }
        let r = rate.per_second().unwrap();
        assert!((r - 1.0 / 60.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(4.26), "4.3s");
        assert_eq!(duration(42.0), "42s");
        assert_eq!(duration(192.0), "3m 12s");
        assert_eq!(duration(7500.0), "2h 05m");
        assert_eq!(duration(f64::INFINITY), "?");
    }
}
