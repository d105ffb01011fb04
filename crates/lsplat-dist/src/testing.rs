//! An in-process world of threads, for testing collectives' users without MPI.

use std::sync::{Arc, Barrier, Mutex};

use crate::{Comm, Result};

/// Shared by the ranks of one world.
#[derive(Debug)]
struct World {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

/// One rank of an in-process world.
#[derive(Debug)]
pub struct ThreadComm {
    rank: usize,
    world: Arc<World>,
}

impl ThreadComm {
    /// Every rank deposits `mine`; returns every rank's deposit, in rank order.
    fn exchange(&self, mine: Vec<u8>) -> Vec<Vec<u8>> {
        self.world.slots.lock().unwrap()[self.rank] = mine;
        self.world.barrier.wait();
        let all = self.world.slots.lock().unwrap().clone();
        self.world.barrier.wait();
        all
    }
}

/// Numbers that travel as little-endian bytes.
trait Word: Copy {
    const N: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            const N: usize = size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
        }
    )*};
}
word!(f32, f64, u64);

fn to_bytes<T: Word>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * T::N);
    for &x in v {
        x.put(&mut out);
    }
    out
}

fn from_bytes<T: Word>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(T::N).map(T::get).collect()
}

impl ThreadComm {
    fn reduce<T: Word>(&self, buf: &mut [T], op: impl Fn(T, T) -> T) {
        let all = self.exchange(to_bytes(buf));
        let parts: Vec<Vec<T>> = all.iter().map(|b| from_bytes(b)).collect();
        for (i, out) in buf.iter_mut().enumerate() {
            *out = parts[1..].iter().fold(parts[0][i], |a, p| op(a, p[i]));
        }
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world(&self) -> usize {
        self.world.slots.lock().unwrap().len()
    }
    fn describe(&self) -> String {
        "threads".into()
    }
    fn sum_f32(&self, _: &'static str, buf: &mut [f32]) -> Result<()> {
        self.reduce(buf, |a, b| a + b);
        Ok(())
    }
    fn sum_f64(&self, _: &'static str, buf: &mut [f64]) -> Result<()> {
        self.reduce(buf, |a, b| a + b);
        Ok(())
    }
    fn or_u64(&self, _: &'static str, buf: &mut [u64]) -> Result<()> {
        self.reduce(buf, |a, b| a | b);
        Ok(())
    }
    fn gather_u64(&self, _: &'static str, value: u64) -> Result<Vec<u64>> {
        Ok(self
            .exchange(value.to_le_bytes().to_vec())
            .iter()
            .map(|b| u64::from_le_bytes(b[..8].try_into().unwrap()))
            .collect())
    }
    fn broadcast(&self, _: &'static str, root: usize, buf: &mut Vec<u8>) -> Result<()> {
        let all = self.exchange(buf.clone());
        *buf = all[root].clone();
        Ok(())
    }
    fn barrier(&self, _: &'static str) -> Result<()> {
        self.exchange(Vec::new());
        Ok(())
    }
    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted with {code}", self.rank)
    }
}

/// Runs `f` on `world` ranks (threads) and returns their results in rank order.
pub fn run_ranks<R: Send>(world: usize, f: impl Fn(&dyn Comm) -> R + Sync) -> Vec<R> {
    let shared = Arc::new(World {
        barrier: Barrier::new(world),
        slots: Mutex::new(vec![Vec::new(); world]),
    });
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let c = ThreadComm {
                    rank,
                    world: shared.clone(),
                };
                let f = &f;
                s.spawn(move || f(&c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
