//! The MPI world (feature `mpi`): rsmpi over the MPI library the launcher provides.

use std::sync::Mutex;
use std::time::Duration;

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use crate::watch::Watch;
use crate::{Comm, DistError, Launcher, Result};

/// Send and receive buffers of the sums (sized on first use, then reused).
#[derive(Default)]
struct Scratch {
    f32: Vec<f32>,
    f64: Vec<f64>,
    u64: Vec<u64>,
}

/// One rank of an MPI world.
pub(crate) struct MpiComm {
    rank: usize,
    world: usize,
    library: String,
    /// Serialises the calls into MPI (the watchdog's abort excepted) and holds the
    /// receive buffers.
    calls: Mutex<Scratch>,
    watch: Watch,
    /// Finalises MPI when dropped (after the watchdog has stopped).
    _universe: mpi::environment::Universe,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MpiComm(rank {} of {})", self.rank, self.world)
    }
}

impl MpiComm {
    /// Joins the world the launcher started; its size must be the launcher's.
    pub(crate) fn init(l: Launcher, timeout: Duration) -> Result<MpiComm> {
        let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Multiple)
            .ok_or_else(|| DistError::Init("MPI was already initialised in this process".into()))?;
        let comm = SimpleCommunicator::world();
        let (rank, world) = (comm.rank() as usize, comm.size() as usize);
        if world != l.ranks {
            return Err(DistError::Init(format!(
                "{} announced {} ranks but MPI's world has {world}: is this binary linked against the launcher's MPI?",
                l.name, l.ranks
            )));
        }
        let library = mpi::environment::library_version()
            // "Open MPI v4.1.4, package: …": the name and version.
            .map(|v| v.split([',', '\n']).next().unwrap_or("").trim().to_string())
            .unwrap_or_default();
        // The watchdog ends the job from its own thread: MPI_Abort needs
        // MPI_THREAD_MULTIPLE; with less, exiting makes the launcher end the others.
        let multiple = threading == mpi::Threading::Multiple;
        let watch = Watch::start(rank, timeout, move || {
            if multiple {
                SimpleCommunicator::world().abort(3)
            } else {
                std::process::exit(3)
            }
        });
        Ok(MpiComm {
            rank,
            world,
            library,
            calls: Mutex::new(Scratch::default()),
            watch,
            _universe: universe,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scratch> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `buf = Σ_ranks buf` through `scratch` (MPI's all-reduce needs two buffers).
fn sum_into<T: Equivalence + Copy + Default>(
    scratch: &mut Vec<T>,
    buf: &mut [T],
    op: SystemOperation,
) {
    scratch.clear();
    scratch.extend_from_slice(buf);
    SimpleCommunicator::world().all_reduce_into(&scratch[..], buf, op);
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world(&self) -> usize {
        self.world
    }
    fn describe(&self) -> String {
        format!("MPI ({}), {} ranks", self.library, self.world)
    }
    fn sum_f32(&self, what: &'static str, buf: &mut [f32]) -> Result<()> {
        let mut s = self.lock();
        let _w = self.watch.wait(what);
        sum_into(&mut s.f32, buf, SystemOperation::sum());
        Ok(())
    }
    fn sum_f64(&self, what: &'static str, buf: &mut [f64]) -> Result<()> {
        let mut s = self.lock();
        let _w = self.watch.wait(what);
        sum_into(&mut s.f64, buf, SystemOperation::sum());
        Ok(())
    }
    fn or_u64(&self, what: &'static str, buf: &mut [u64]) -> Result<()> {
        let mut s = self.lock();
        let _w = self.watch.wait(what);
        sum_into(&mut s.u64, buf, SystemOperation::bitwise_or());
        Ok(())
    }
    fn gather_u64(&self, what: &'static str, value: u64) -> Result<Vec<u64>> {
        let _s = self.lock();
        let _w = self.watch.wait(what);
        let mut all = vec![0u64; self.world];
        SimpleCommunicator::world().all_gather_into(&value, &mut all[..]);
        Ok(all)
    }
    fn broadcast(&self, what: &'static str, root: usize, buf: &mut Vec<u8>) -> Result<()> {
        let _s = self.lock();
        let _w = self.watch.wait(what);
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(root as i32);
        let mut len = buf.len() as u64;
        root.broadcast_into(&mut len);
        buf.resize(len as usize, 0);
        root.broadcast_into(&mut buf[..]);
        Ok(())
    }
    fn barrier(&self, what: &'static str) -> Result<()> {
        let _s = self.lock();
        let _w = self.watch.wait(what);
        SimpleCommunicator::world().barrier();
        Ok(())
    }
    fn set_timeout(&self, timeout: Duration) {
        self.watch.set_timeout(timeout);
    }
    fn abort(&self, code: i32) -> ! {
        SimpleCommunicator::world().abort(code)
    }
}
