// Used by the MPI communicator only; built (and unit-tested) without it too.
#![cfg_attr(not(feature = "mpi"), allow(dead_code))]

//! A watchdog over the collectives: one that waits longer than the timeout ends the
//! job, so a dead or stuck rank never leaves the others hanging.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Shared {
    /// The collective being waited on and since when.
    current: Mutex<Option<(Instant, &'static str)>>,
    stop: AtomicBool,
    /// The timeout in milliseconds.
    timeout_ms: AtomicU64,
}

/// Watches the collectives of one rank.
pub(crate) struct Watch {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

/// Marks one collective as being waited on until dropped.
pub(crate) struct Waiting<'a>(&'a Watch);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        *self
            .0
            .shared
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl Watch {
    /// Starts the watchdog of `rank`: a collective waiting longer than `timeout`
    /// prints what it waited on and calls `expire` (which must end the job).
    pub(crate) fn start(
        rank: usize,
        timeout: Duration,
        expire: impl Fn() + Send + 'static,
    ) -> Watch {
        let shared = Arc::new(Shared {
            current: Mutex::new(None),
            stop: AtomicBool::new(false),
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lsplat-dist-watch".into())
            .spawn(move || {
                while !s.stop.load(Ordering::Relaxed) {
                    let timeout = Duration::from_millis(s.timeout_ms.load(Ordering::Relaxed));
                    let tick = (timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(250));
                    std::thread::sleep(tick);
                    let late = match *s.current.lock().unwrap_or_else(|e| e.into_inner()) {
                        Some((since, what)) if since.elapsed() > timeout => Some(what),
                        _ => None,
                    };
                    if let Some(what) = late {
                        eprintln!(
                            "error: rank {rank}: {what} waited more than {:.1} s for the other ranks (dist.timeout_s): another rank has stopped, hangs, or runs something else; ending every rank",
                            timeout.as_secs_f64()
                        );
                        expire();
                        return;
                    }
                }
            })
            .expect("spawning the collectives' watchdog thread");
        Watch {
            shared,
            thread: Some(thread),
        }
    }

    /// Changes the timeout.
    pub(crate) fn set_timeout(&self, timeout: Duration) {
        self.shared
            .timeout_ms
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    /// Marks `what` as waited on until the guard drops (allocates nothing).
    pub(crate) fn wait(&self, what: &'static str) -> Waiting<'_> {
        *self
            .shared
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), what));
        Waiting(self)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_late_collective_expires_and_a_prompt_one_does_not() {
        let fired = Arc::new(AtomicUsize::new(0));
        let f = fired.clone();
        let w = Watch::start(0, Duration::from_millis(100), move || {
            f.fetch_add(1, Ordering::SeqCst);
        });
        drop(w.wait("a prompt all-reduce"));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(fired.load(Ordering::SeqCst), 0);
        let g = w.wait("a stuck all-reduce");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(fired.load(Ordering::SeqCst), 1);
        drop(g);
    }
}
