//! Collectives for data-parallel training.
//!
//! A [`Comm`] is the world of ranks one training job runs on: its rank and size,
//! element-wise sums, a broadcast, a gather of one word per rank and a barrier. World
//! size 1 ([`Local`]) is the default and costs nothing; [`open`] joins the MPI world
//! when the process was started by an MPI launcher (`mpirun`, `srun`) and the binary
//! was built with the `mpi` feature.
//!
//! Every collective is watched: one that waits longer than the configured timeout for
//! the other ranks (a rank died, hangs, or took another path) ends the job on every
//! rank with a message naming the collective ([`watch`]). Data-parallel gradient
//! averaging, dense or over the touched rows only, is [`reduce::GradientReducer`].

mod launcher;
#[cfg(feature = "mpi")]
mod mpi_comm;
pub mod reduce;
mod watch;

pub use launcher::{Launcher, detect, local_rank};
pub use reduce::{GradientReducer, ReduceMode, ReduceStats};

use std::sync::Arc;
use std::time::Duration;

/// Errors of the collectives.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// Started by a launcher with several ranks, but this binary cannot join them.
    #[error(
        "started by {launcher} with {ranks} ranks, but this binary was built without MPI; rebuild with `cargo build --release -p lsplat-cli --features mpi` (needs an MPI installation and libclang)"
    )]
    NotCompiled {
        /// The launcher detected.
        launcher: String,
        /// The world size it announced.
        ranks: usize,
    },
    /// MPI could not be initialised, or reports a world that disagrees with the
    /// launcher.
    #[error("MPI: {0}")]
    Init(String),
    /// Buffers of different lengths on the ranks, or another misuse.
    #[error("{what}: {problem}")]
    Mismatch {
        /// The collective.
        what: String,
        /// What is wrong.
        problem: String,
    },
    /// The ranks disagree about what they run (configuration, scene or binary).
    #[error("rank {rank} differs from rank 0: {what}")]
    Disagree {
        /// The first rank found to differ.
        rank: usize,
        /// What differs.
        what: String,
    },
}

/// Result of the collectives.
pub type Result<T> = std::result::Result<T, DistError>;

/// The ranks of one job. Every rank calls the same collectives in the same order;
/// `what` names the call in timeout messages.
pub trait Comm: Send + Sync + std::fmt::Debug {
    /// This rank (0-based).
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn world(&self) -> usize;
    /// The transport, for logs (`local`, `MPI (Open MPI v4.1.4)`).
    fn describe(&self) -> String;
    /// Element-wise sum over the ranks, in place.
    fn sum_f32(&self, what: &'static str, buf: &mut [f32]) -> Result<()>;
    /// Element-wise sum over the ranks, in place.
    fn sum_f64(&self, what: &'static str, buf: &mut [f64]) -> Result<()>;
    /// Element-wise bitwise or over the ranks, in place.
    fn or_u64(&self, what: &'static str, buf: &mut [u64]) -> Result<()>;
    /// One word from every rank, in rank order.
    fn gather_u64(&self, what: &'static str, value: u64) -> Result<Vec<u64>>;
    /// Rank `root`'s bytes on every rank (`buf` is resized on the others).
    fn broadcast(&self, what: &'static str, root: usize, buf: &mut Vec<u8>) -> Result<()>;
    /// Waits for every rank.
    fn barrier(&self, what: &'static str) -> Result<()>;
    /// Changes how long a collective may wait for the other ranks (the configuration
    /// is known only after the world is joined).
    fn set_timeout(&self, _timeout: Duration) {}
    /// Ends the whole job with exit status `code`: this rank failed (its error is
    /// already printed). At world size 1 the process exits.
    fn abort(&self, code: i32) -> !;
}

/// World size 1: every collective is the identity.
#[derive(Debug, Default)]
pub struct Local;

impl Comm for Local {
    fn rank(&self) -> usize {
        0
    }
    fn world(&self) -> usize {
        1
    }
    fn describe(&self) -> String {
        "local (1 rank)".into()
    }
    fn sum_f32(&self, _: &'static str, _: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn sum_f64(&self, _: &'static str, _: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn or_u64(&self, _: &'static str, _: &mut [u64]) -> Result<()> {
        Ok(())
    }
    fn gather_u64(&self, _: &'static str, value: u64) -> Result<Vec<u64>> {
        Ok(vec![value])
    }
    fn broadcast(&self, _: &'static str, _: usize, _: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn barrier(&self, _: &'static str) -> Result<()> {
        Ok(())
    }
    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

/// Whether this binary can join an MPI world.
pub const MPI_COMPILED: bool = cfg!(feature = "mpi");

/// The world this process belongs to: MPI when a launcher started several ranks (or
/// `force_mpi`), otherwise [`Local`]. `timeout` bounds every collective's wait.
pub fn open(timeout: Duration) -> Result<Arc<dyn Comm>> {
    match detect() {
        Some(l) if l.ranks > 1 => open_mpi(l, timeout),
        _ => Ok(Arc::new(Local)),
    }
}

#[cfg(feature = "mpi")]
fn open_mpi(l: Launcher, timeout: Duration) -> Result<Arc<dyn Comm>> {
    Ok(Arc::new(mpi_comm::MpiComm::init(l, timeout)?))
}

#[cfg(not(feature = "mpi"))]
fn open_mpi(l: Launcher, _: Duration) -> Result<Arc<dyn Comm>> {
    Err(DistError::NotCompiled {
        launcher: l.name.to_string(),
        ranks: l.ranks,
    })
}

/// Checks that every rank holds the same `value` (a hash of `what`); the first rank
/// that differs from rank 0 is named.
pub fn agree(comm: &dyn Comm, what: &'static str, value: u64) -> Result<()> {
    let all = comm.gather_u64(what, value)?;
    match all.iter().position(|&v| v != all[0]) {
        Some(rank) => Err(DistError::Disagree {
            rank,
            what: format!("{what} (hash {:016x} vs {:016x})", all[rank], all[0]),
        }),
        None => Ok(()),
    }
}

/// A 64-bit FNV-1a hash (for [`agree`]: stable across ranks, builds and machines).
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut h = Fnv64::default();
    std::hash::Hasher::write(&mut h, bytes);
    std::hash::Hasher::finish(&h)
}

/// FNV-1a as a [`std::hash::Hasher`], for fingerprints of structured data (write
/// numbers with their fixed-width `write_*` methods, which hash little-endian bytes).
#[derive(Clone, Copy, Debug)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv64 {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write(&v.to_le_bytes());
    }
    fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }
    fn write_usize(&mut self, v: usize) {
        self.write(&(v as u64).to_le_bytes());
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_collectives_are_the_identity() {
        let c = Local;
        let mut v = [1.0f32, -2.0];
        c.sum_f32("t", &mut v).unwrap();
        assert_eq!(v, [1.0, -2.0]);
        assert_eq!(c.gather_u64("t", 7).unwrap(), vec![7]);
        agree(&c, "config", 5).unwrap();
    }

    #[test]
    fn agree_names_the_first_rank_that_differs() {
        let r = testing::run_ranks(3, |c| agree(c, "the configuration", [9, 9, 4][c.rank()]));
        for res in r {
            let e = res.unwrap_err().to_string();
            assert!(
                e.contains("rank 2 differs from rank 0: the configuration"),
                "{e}"
            );
        }
        let r = testing::run_ranks(2, |c| agree(c, "x", 3));
        assert!(r.into_iter().all(|x| x.is_ok()));
    }

    #[test]
    fn fnv_is_fixed() {
        assert_eq!(fnv64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
