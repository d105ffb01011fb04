//! A persistent pool of worker threads for running blocks. Fiber stacks are kept per
//! OS thread by the kernel modules, so the same threads serve every launch.

use std::sync::{Arc, Condvar, Mutex};

type Job<'a> = dyn Fn(usize) + Sync + 'a;

struct State {
    job: Option<&'static Job<'static>>,
    epoch: u64,
    running: usize,
    shutdown: bool,
}

struct Inner {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
}

/// `threads − 1` workers plus the calling thread.
pub(crate) struct Pool {
    inner: Arc<Inner>,
    threads: usize,
    handles: Vec<std::thread::JoinHandle<()>>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    pub(crate) fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                job: None,
                epoch: 0,
                running: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let handles = (1..threads)
            .map(|i| {
                let inner = inner.clone();
                std::thread::Builder::new()
                    .name(format!("lsplat-simt-{i}"))
                    .spawn(move || worker(&inner, i))
                    .expect("spawn a simt worker thread")
            })
            .collect();
        Pool {
            inner,
            threads,
            handles,
        }
    }

    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `job(worker)` on every thread of the pool and waits for all of them.
    pub(crate) fn run(&self, job: &Job<'_>) {
        if self.threads == 1 {
            job(0);
            return;
        }
        // SAFETY: the reference is handed to the workers only until `running` drops to
        // zero, which this function waits for before it returns (and so before `job`
        // can be dropped); the 'static lifetime never escapes that window.
        let job: &'static Job<'static> =
            unsafe { std::mem::transmute::<&Job<'_>, &'static Job<'static>>(job) };
        {
            let mut s = lock(&self.inner.state);
            s.job = Some(job);
            s.epoch += 1;
            s.running = self.threads - 1;
            self.inner.work.notify_all();
        }
        job(0);
        let mut s = lock(&self.inner.state);
        while s.running > 0 {
            s = self.inner.done.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.job = None;
    }
}

fn worker(inner: &Inner, index: usize) {
    let mut seen = 0;
    loop {
        let job = {
            let mut s = lock(&inner.state);
            while s.epoch == seen && !s.shutdown {
                s = inner.work.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.shutdown {
                return;
            }
            seen = s.epoch;
            s.job.expect("a job is set with each epoch")
        };
        job(index);
        let mut s = lock(&inner.state);
        s.running -= 1;
        if s.running == 0 {
            inner.done.notify_all();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.inner.state).shutdown = true;
        self.inner.work.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
