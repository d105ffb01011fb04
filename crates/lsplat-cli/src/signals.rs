//! Ctrl-C and SIGTERM during `train`: the first signal asks the run to stop after the
//! current step (checkpointed, `summary.json` marked interrupted, exit 130 or 143); a
//! second one ends the process at once with the same code.
//!
//! The handlers only store to atomics (async-signal-safe); the engine reads the flag
//! once per step through its `StopRequest` resource.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};

/// The stop flag and which signal raised it.
#[derive(Clone, Debug)]
pub struct Signals {
    /// Raised by the first SIGINT or SIGTERM.
    pub flag: Arc<AtomicBool>,
    which: Arc<AtomicUsize>,
}

impl Signals {
    /// A flag nothing raises (commands that run without handlers, tests).
    pub fn none() -> Signals {
        Signals {
            flag: Arc::new(AtomicBool::new(false)),
            which: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Installs the handlers: the first SIGINT/SIGTERM raises the flag, a second
    /// one exits at once with 128 + the signal number.
    pub fn install() -> Result<Signals> {
        let s = Signals::none();
        for sig in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as the previous signal left it.
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, s.flag.clone())
                .context("installing the signal handlers")?;
            signal_hook::flag::register_usize(sig, s.which.clone(), sig as usize)
                .context("installing the signal handlers")?;
            signal_hook::flag::register(sig, s.flag.clone())
                .context("installing the signal handlers")?;
        }
        Ok(s)
    }

    /// The signal received, if any.
    pub fn received(&self) -> Option<i32> {
        self.flag
            .load(Ordering::Relaxed)
            .then(|| self.which.load(Ordering::Relaxed) as i32)
    }
}

/// A run stopped by a signal: `main` prints it and exits with 128 + `signal`.
#[derive(Debug)]
pub struct Interrupted {
    /// SIGINT or SIGTERM.
    pub signal: i32,
    /// What was kept and how to go on.
    pub message: String,
}

impl Interrupted {
    /// The signal's name.
    pub fn name(&self) -> &'static str {
        match self.signal {
            SIGINT => "SIGINT (Ctrl-C)",
            SIGTERM => "SIGTERM",
            _ => "a signal",
        }
    }

    /// The process exit code: 130 for SIGINT, 143 for SIGTERM.
    pub fn exit_code(&self) -> u8 {
        (128 + self.signal).clamp(0, 255) as u8
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted by {}: {}", self.name(), self.message)
    }
}

impl std::error::Error for Interrupted {}
