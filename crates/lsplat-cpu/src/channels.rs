//! Channel-count specialisation: common counts are compile-time constants so the
//! per-pair loops unroll; others fall back to a runtime count.

/// A channel count.
pub trait Channels: Copy + Send + Sync {
    /// Accumulator for one row.
    type Acc: Copy;
    /// The count.
    fn n(&self) -> usize;
    /// A zero accumulator.
    fn zeros() -> Self::Acc;
    /// `acc += w·x`.
    fn axpy(acc: &mut Self::Acc, w: f32, x: &[f32]);
    /// Writes the accumulator.
    fn store(acc: &Self::Acc, out: &mut [f32]);
    /// Adds the accumulator to `out`.
    fn add_store(acc: &Self::Acc, out: &mut [f32]);
    /// `out += w·acc` over the first `n()` values of `out`.
    fn scatter(out: &mut [f32], w: f32, acc: &Self::Acc);
    /// `acc += w·x[0..n()]`.
    ///
    /// # Safety
    /// `x` must point to `n()` readable floats.
    unsafe fn axpy_ptr(&self, acc: &mut Self::Acc, w: f32, x: *const f32);
    /// `out[0..n()] += w·acc`.
    ///
    /// # Safety
    /// `out` must point to `n()` writable floats that nothing else accesses.
    unsafe fn scatter_ptr(&self, out: *mut f32, w: f32, acc: &Self::Acc);
    /// The first `n()` values of an accumulator.
    fn view<'a>(&self, acc: &'a Self::Acc) -> &'a [f32];
    /// The first `n()` values of an accumulator, mutable.
    fn view_mut<'a>(&self, acc: &'a mut Self::Acc) -> &'a mut [f32];
}

/// A compile-time channel count (1, 2, 3, 4, 6, 8, 9, 12 or 16: the counts of one to
/// three levels of 3-channel features, with and without a weight channel).
#[derive(Clone, Copy, Debug)]
pub struct Fixed<const C: usize>;

impl<const C: usize> Channels for Fixed<C> {
    type Acc = [f32; C];
    #[inline(always)]
    fn n(&self) -> usize {
        C
    }
    #[inline(always)]
    fn zeros() -> [f32; C] {
        [0.0; C]
    }
    #[inline(always)]
    fn axpy(acc: &mut [f32; C], w: f32, x: &[f32]) {
        let x: &[f32; C] = x.try_into().expect("row length");
        for k in 0..C {
            acc[k] += w * x[k];
        }
    }
    #[inline(always)]
    fn store(acc: &[f32; C], out: &mut [f32]) {
        out.copy_from_slice(acc);
    }
    #[inline(always)]
    fn add_store(acc: &[f32; C], out: &mut [f32]) {
        for (o, a) in out.iter_mut().zip(acc) {
            *o += a;
        }
    }
    #[inline(always)]
    fn scatter(out: &mut [f32], w: f32, acc: &[f32; C]) {
        let out: &mut [f32; C] = out.try_into().expect("row length");
        for k in 0..C {
            out[k] += w * acc[k];
        }
    }
    #[inline(always)]
    unsafe fn axpy_ptr(&self, acc: &mut [f32; C], w: f32, x: *const f32) {
        // SAFETY: the caller guarantees C readable floats at x.
        let x = unsafe { &*(x as *const [f32; C]) };
        for k in 0..C {
            acc[k] += w * x[k];
        }
    }
    #[inline(always)]
    unsafe fn scatter_ptr(&self, out: *mut f32, w: f32, acc: &[f32; C]) {
        // SAFETY: the caller guarantees C exclusively owned writable floats at out.
        let out = unsafe { &mut *(out as *mut [f32; C]) };
        for k in 0..C {
            out[k] += w * acc[k];
        }
    }
    #[inline(always)]
    fn view<'a>(&self, acc: &'a [f32; C]) -> &'a [f32] {
        acc
    }
    #[inline(always)]
    fn view_mut<'a>(&self, acc: &'a mut [f32; C]) -> &'a mut [f32] {
        acc
    }
}

/// Any channel count up to 1024, accumulated in a fixed-size stack buffer.
#[derive(Clone, Copy, Debug)]
pub struct Dynamic(pub usize);

/// Largest channel count the dynamic path accepts.
pub const MAX_CHANNELS: usize = 1024;

impl Channels for Dynamic {
    type Acc = [f32; MAX_CHANNELS];
    #[inline(always)]
    fn n(&self) -> usize {
        self.0
    }
    #[inline(always)]
    fn zeros() -> Self::Acc {
        [0.0; MAX_CHANNELS]
    }
    #[inline(always)]
    fn axpy(acc: &mut Self::Acc, w: f32, x: &[f32]) {
        for (a, v) in acc.iter_mut().zip(x) {
            *a += w * v;
        }
    }
    #[inline(always)]
    fn store(acc: &Self::Acc, out: &mut [f32]) {
        let n = out.len();
        out.copy_from_slice(&acc[..n]);
    }
    #[inline(always)]
    fn add_store(acc: &Self::Acc, out: &mut [f32]) {
        for (o, a) in out.iter_mut().zip(acc) {
            *o += a;
        }
    }
    #[inline(always)]
    fn scatter(out: &mut [f32], w: f32, acc: &Self::Acc) {
        for (o, a) in out.iter_mut().zip(acc) {
            *o += w * a;
        }
    }
    #[inline(always)]
    unsafe fn axpy_ptr(&self, acc: &mut Self::Acc, w: f32, x: *const f32) {
        // SAFETY: the caller guarantees n() readable floats at x.
        let x = unsafe { std::slice::from_raw_parts(x, self.0) };
        Self::axpy(acc, w, x);
    }
    #[inline(always)]
    unsafe fn scatter_ptr(&self, out: *mut f32, w: f32, acc: &Self::Acc) {
        // SAFETY: the caller guarantees n() exclusively owned writable floats at out.
        let out = unsafe { std::slice::from_raw_parts_mut(out, self.0) };
        Self::scatter(out, w, acc);
    }
    #[inline(always)]
    fn view<'a>(&self, acc: &'a Self::Acc) -> &'a [f32] {
        &acc[..self.0]
    }
    #[inline(always)]
    fn view_mut<'a>(&self, acc: &'a mut Self::Acc) -> &'a mut [f32] {
        &mut acc[..self.0]
    }
}

/// Evaluates `$body` with `$ch` bound to the best [`Channels`] for the count `$c`.
macro_rules! with_channels {
    ($c:expr, $ch:ident => $body:expr) => {
        match $c {
            1 => {
                let $ch = $crate::channels::Fixed::<1>;
                $body
            }
            2 => {
                let $ch = $crate::channels::Fixed::<2>;
                $body
            }
            3 => {
                let $ch = $crate::channels::Fixed::<3>;
                $body
            }
            4 => {
                let $ch = $crate::channels::Fixed::<4>;
                $body
            }
            6 => {
                let $ch = $crate::channels::Fixed::<6>;
                $body
            }
            8 => {
                let $ch = $crate::channels::Fixed::<8>;
                $body
            }
            9 => {
                let $ch = $crate::channels::Fixed::<9>;
                $body
            }
            12 => {
                let $ch = $crate::channels::Fixed::<12>;
                $body
            }
            16 => {
                let $ch = $crate::channels::Fixed::<16>;
                $body
            }
            n => {
                let $ch = $crate::channels::Dynamic(n);
                $body
            }
        }
    };
}
pub(crate) use with_channels;

/// Lanes used for `c` channels in block-local buffers: up to 16 channels are padded
/// to a multiple of 4 (whole SIMD registers per row), more are used as they are.
pub fn lanes(c: usize) -> usize {
    if c <= 16 { c.div_ceil(4) * 4 } else { c }
}

/// Evaluates `$body` with `$ch` bound to the [`Channels`] of [`lanes`]`($c)`.
macro_rules! with_lanes {
    ($c:expr, $ch:ident => $body:expr) => {
        $crate::channels::with_channels!($crate::channels::lanes($c), $ch => $body)
    };
}
pub(crate) use with_lanes;
