//! Camera sampling: without replacement per epoch, seeded, rank-sharded, drop-last.

/// Picks the cameras of each step.
///
/// Epoch `e` is a permutation of all cameras drawn from `seed` and `e` alone, so a run
/// (or a rank) can resume at any step. With `world > 1` the permutation is truncated
/// to a multiple of `world` (drop-last) and rank `r` takes every `world`-th entry
/// starting at `r`, as PyTorch's distributed sampler does.
#[derive(Clone, Debug)]
pub struct CameraSampler {
    /// The cameras sampled (scene indices).
    pool: Vec<usize>,
    seed: u64,
    rank: usize,
    world: usize,
    epoch: u64,
    order: Vec<usize>,
    cursor: usize,
}

impl CameraSampler {
    /// A sampler over `cameras` cameras for `rank` of `world`.
    pub fn new(cameras: usize, seed: u64, rank: usize, world: usize) -> Result<Self, String> {
        Self::over((0..cameras).collect(), seed, rank, world)
    }

    /// A sampler over the cameras of `pool` (scene indices; e.g. those not held out).
    /// Each epoch permutes the positions in `pool`, so with every camera in the pool
    /// it draws what [`CameraSampler::new`] draws.
    pub fn over(pool: Vec<usize>, seed: u64, rank: usize, world: usize) -> Result<Self, String> {
        let cameras = pool.len();
        if cameras < world.max(1) {
            return Err(format!(
                "{cameras} cameras cannot be shared by {world} ranks"
            ));
        }
        let mut s = CameraSampler {
            pool,
            seed,
            rank,
            world: world.max(1),
            epoch: 0,
            order: Vec::new(),
            cursor: 0,
        };
        s.fill_epoch();
        Ok(s)
    }

    fn fill_epoch(&mut self) {
        let mut perm: Vec<usize> = (0..self.pool.len()).collect();
        let mut rng =
            lsplat_core::Rng::new(self.seed ^ self.epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.shuffle(&mut perm);
        let keep = self.pool.len() - self.pool.len() % self.world;
        self.order.clear();
        self.order
            .extend(perm[..keep].iter().skip(self.rank).step_by(self.world));
        self.cursor = 0;
    }

    /// The next camera.
    pub fn next_camera(&mut self) -> usize {
        if self.cursor == self.order.len() {
            self.epoch += 1;
            self.fill_epoch();
        }
        let c = self.order[self.cursor];
        self.cursor += 1;
        self.pool[c]
    }

    /// Cameras drawn so far (what a checkpoint stores).
    pub fn position(&self) -> u64 {
        self.epoch * self.order.len() as u64 + self.cursor as u64
    }

    /// Continues as if `position` cameras had been drawn: the next camera is the one
    /// an uninterrupted sampler would draw after them.
    pub fn seek(&mut self, position: u64) {
        let per = self.order.len() as u64;
        self.epoch = position / per;
        self.fill_epoch();
        self.cursor = (position % per) as usize;
    }

    /// Current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Cameras this rank visits per epoch.
    pub fn per_epoch(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_epoch_visits_every_camera_once() {
        let mut s = CameraSampler::new(7, 3, 0, 1).unwrap();
        for _ in 0..3 {
            let mut seen: Vec<usize> = (0..7).map(|_| s.next_camera()).collect();
            seen.sort();
            assert_eq!(seen, (0..7).collect::<Vec<_>>());
        }
        let mut a = CameraSampler::new(7, 3, 0, 1).unwrap();
        let mut b = CameraSampler::new(7, 3, 0, 1).unwrap();
        let mut c = CameraSampler::new(7, 4, 0, 1).unwrap();
        let xa: Vec<_> = (0..20).map(|_| a.next_camera()).collect();
        let xb: Vec<_> = (0..20).map(|_| b.next_camera()).collect();
        let xc: Vec<_> = (0..20).map(|_| c.next_camera()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn seeking_continues_the_same_sequence() {
        for (cams, world, rank) in [(7, 1, 0), (9, 2, 1), (1, 1, 0)] {
            let mut a = CameraSampler::new(cams, 11, rank, world).unwrap();
            let all: Vec<usize> = (0..40).map(|_| a.next_camera()).collect();
            assert_eq!(a.position(), 40);
            for k in [0, 1, 3, 6, 7, 14, 39] {
                let mut b = CameraSampler::new(cams, 11, rank, world).unwrap();
                b.seek(k as u64);
                assert_eq!(b.position(), k as u64);
                let rest: Vec<usize> = (k..40).map(|_| b.next_camera()).collect();
                assert_eq!(rest, all[k..], "{cams} cameras, position {k}");
            }
        }
    }

    #[test]
    fn ranks_split_an_epoch_disjointly_with_drop_last() {
        let mut r0 = CameraSampler::new(7, 1, 0, 2).unwrap();
        let mut r1 = CameraSampler::new(7, 1, 1, 2).unwrap();
        assert_eq!(r0.per_epoch(), 3);
        let mut all: Vec<usize> = (0..3)
            .map(|_| r0.next_camera())
            .chain((0..3).map(|_| r1.next_camera()))
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6);
        assert!(CameraSampler::new(1, 0, 0, 2).is_err());
    }

    #[test]
    fn a_pool_is_sampled_and_nothing_else() {
        let mut s = CameraSampler::over(vec![0, 1, 3, 4, 6], 9, 0, 1).unwrap();
        let mut seen: Vec<usize> = (0..5).map(|_| s.next_camera()).collect();
        seen.sort();
        assert_eq!(seen, vec![0, 1, 3, 4, 6]);
        let mut a = CameraSampler::over((0..7).collect(), 3, 0, 1).unwrap();
        let mut b = CameraSampler::new(7, 3, 0, 1).unwrap();
        assert!((0..20).all(|_| a.next_camera() == b.next_camera()));
    }
}
