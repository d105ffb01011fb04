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
}

/// A compile-time channel count (up to 16).
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
            8 => {
                let $ch = $crate::channels::Fixed::<8>;
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
