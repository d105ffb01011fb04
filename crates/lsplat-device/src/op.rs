//! Device code that plugins bring: an op is a native CPU implementation over host
//! slices plus a CUDA C kernel (written against `compat.h`) that the GPU runtimes
//! compile and cache like the engine's own kernels. [`Backend::run_op`] runs one on
//! any backend, so a new loss or renderer variant needs no new `Backend` method.
//!
//! Conventions:
//! - An op works on `items` independent work items (pixels, Gaussians, …). The kernel
//!   is `extern "C" __global__ void <entry>(u32 items, <args in order>)`: buffers as
//!   pointers (`const float*`, `float*`, `const u32*`, `u32*`, `const double*`,
//!   `double*`), scalars by value
//!   (`float`, `u32`). It is launched as a 1-D grid of [`OpKernel::block`] threads per
//!   block covering `items` (at most 2²⁰ blocks: loop grid-stride past that).
//! - The CPU implementation receives the same arguments as host slices, and a
//!   [`HostPool`] to split row-wise work over the backend's threads.
//! - Ops are deterministic: the same inputs on the same backend give the same bits
//!   (reduce in a fixed order; no floating-point atomics).

use std::ops::Range;

use crate::{Backend, DeviceError, Result};

/// The kernel half of an op.
#[derive(Clone, Debug)]
pub struct OpKernel {
    /// CUDA C source; `#include "compat.h"` (and the engine's other headers) is
    /// spliced in. Several ops may share one source: it is compiled once.
    pub source: &'static str,
    /// The `__global__` function to launch.
    pub entry: &'static str,
    /// Threads per block.
    pub block: u32,
    /// Extra `-D` defines (the engine's rasterizer constants are always defined).
    pub defines: Vec<(String, String)>,
}

/// One op of a plugin.
pub trait DeviceOp: Send + Sync {
    /// The plugin that declares it (for messages).
    fn plugin(&self) -> &'static str;
    /// The op's name (for messages).
    fn name(&self) -> &'static str;
    /// The kernel the GPU runtimes launch. It must be the same for every value of the
    /// op type (it depends only on the plugin and the op's name): a runtime compiles it
    /// at the first launch and looks it up by (plugin, name) after that.
    fn kernel(&self) -> OpKernel;
    /// Checks a call before it runs on any backend: `lens[i]` is the length of
    /// buffer argument `i` (0 for a scalar). A kernel trusts what this accepts, so
    /// it should refuse every length its kernel would read or write past.
    fn check(&self, items: usize, lens: &[usize]) -> Result<()>;
    /// The native CPU implementation.
    fn run_cpu(&self, items: usize, args: &mut HostArgs<'_>, pool: &dyn HostPool) -> Result<()>;
}

/// A scalar argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `float`.
    F32(f32),
    /// `u32`.
    U32(u32),
}

/// An argument of [`Backend::run_op`].
pub enum OpArg<'a, B: Backend> {
    /// `const float*`.
    F32(&'a B::Buf<f32>),
    /// `float*`.
    F32Mut(&'a mut B::Buf<f32>),
    /// `const u32*`.
    U32(&'a B::Buf<u32>),
    /// `u32*`.
    U32Mut(&'a mut B::Buf<u32>),
    /// `const double*`.
    F64(&'a B::Buf<f64>),
    /// `double*` (scratch an op writes for a later one to read).
    F64Mut(&'a mut B::Buf<f64>),
    /// A value.
    Scalar(Scalar),
}

/// An argument as the CPU implementation sees it.
#[derive(Debug, Default)]
pub enum HostArg<'a> {
    /// Taken already (see [`HostArgs`]).
    #[default]
    Taken,
    /// Read-only floats.
    F32(&'a [f32]),
    /// Writable floats.
    F32Mut(&'a mut [f32]),
    /// Read-only integers.
    U32(&'a [u32]),
    /// Writable integers.
    U32Mut(&'a mut [u32]),
    /// Read-only doubles.
    F64(&'a [f64]),
    /// Writable doubles.
    F64Mut(&'a mut [f64]),
    /// A value.
    Scalar(Scalar),
}

/// Most arguments an op call takes (every backend's [`check_call`] refuses more).
pub const MAX_OP_ARGS: usize = 16;

/// The arguments of one CPU op call, held inline (a call allocates nothing).
/// Writable slices are handed out once (so an implementation can hold several of them
/// at the same time).
#[derive(Debug)]
pub struct HostArgs<'a> {
    op: &'static str,
    args: [HostArg<'a>; MAX_OP_ARGS],
    /// Arguments given (more than [`MAX_OP_ARGS`]: every access is an error).
    len: usize,
}

impl<'a> HostArgs<'a> {
    /// Arguments of op `op`.
    pub fn new(op: &'static str, args: impl IntoIterator<Item = HostArg<'a>>) -> Self {
        let mut held: [HostArg<'a>; MAX_OP_ARGS] = Default::default();
        let mut len = 0;
        for a in args {
            if let Some(slot) = held.get_mut(len) {
                *slot = a;
            }
            len += 1;
        }
        HostArgs {
            op,
            args: held,
            len,
        }
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True without arguments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Argument `i`, if given.
    fn get(&self, i: usize) -> Option<&HostArg<'a>> {
        if self.len > MAX_OP_ARGS || i >= self.len {
            return None;
        }
        self.args.get(i)
    }

    fn wrong(&self, i: usize, want: &str) -> DeviceError {
        if self.len > MAX_OP_ARGS {
            return DeviceError::shape(
                self.op,
                format!("{} arguments (at most {MAX_OP_ARGS})", self.len),
            );
        }
        let got = match self.get(i) {
            None => "nothing".to_string(),
            Some(HostArg::Taken) => "an argument taken already".to_string(),
            Some(HostArg::F32(_)) => "a read-only float buffer".to_string(),
            Some(HostArg::F32Mut(_)) => "a writable float buffer".to_string(),
            Some(HostArg::U32(_)) => "a read-only u32 buffer".to_string(),
            Some(HostArg::U32Mut(_)) => "a writable u32 buffer".to_string(),
            Some(HostArg::F64(_)) => "a read-only double buffer".to_string(),
            Some(HostArg::F64Mut(_)) => "a writable double buffer".to_string(),
            Some(HostArg::Scalar(s)) => format!("the scalar {s:?}"),
        };
        DeviceError::shape(
            self.op,
            format!("argument {i} should be {want}, the caller passed {got}"),
        )
    }

    /// Takes argument `i` when `pick` accepts it; otherwise leaves it in place and
    /// reports what was expected.
    fn take<T>(
        &mut self,
        i: usize,
        want: &str,
        pick: impl FnOnce(HostArg<'a>) -> std::result::Result<T, HostArg<'a>>,
    ) -> Result<T> {
        if self.get(i).is_none() {
            return Err(self.wrong(i, want));
        }
        let slot = &mut self.args[i];
        match pick(std::mem::take(slot)) {
            Ok(v) => Ok(v),
            Err(back) => {
                *slot = back;
                Err(self.wrong(i, want))
            }
        }
    }

    /// Argument `i` as read-only floats (a writable buffer is read too).
    pub fn f32(&mut self, i: usize) -> Result<&'a [f32]> {
        self.take(i, "a float buffer", |a| match a {
            HostArg::F32(s) => Ok(s),
            HostArg::F32Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as writable floats.
    pub fn f32_mut(&mut self, i: usize) -> Result<&'a mut [f32]> {
        self.take(i, "a writable float buffer", |a| match a {
            HostArg::F32Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as read-only integers.
    pub fn u32(&mut self, i: usize) -> Result<&'a [u32]> {
        self.take(i, "a u32 buffer", |a| match a {
            HostArg::U32(s) => Ok(s),
            HostArg::U32Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as writable integers.
    pub fn u32_mut(&mut self, i: usize) -> Result<&'a mut [u32]> {
        self.take(i, "a writable u32 buffer", |a| match a {
            HostArg::U32Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as read-only doubles (a writable buffer is read too).
    pub fn f64(&mut self, i: usize) -> Result<&'a [f64]> {
        self.take(i, "a double buffer", |a| match a {
            HostArg::F64(s) => Ok(s),
            HostArg::F64Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as writable doubles.
    pub fn f64_mut(&mut self, i: usize) -> Result<&'a mut [f64]> {
        self.take(i, "a writable double buffer", |a| match a {
            HostArg::F64Mut(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Argument `i` as a `float` value.
    pub fn scalar_f32(&self, i: usize) -> Result<f32> {
        match self.get(i) {
            Some(HostArg::Scalar(Scalar::F32(v))) => Ok(*v),
            _ => Err(self.wrong(i, "a float value")),
        }
    }

    /// Argument `i` as a `u32` value.
    pub fn scalar_u32(&self, i: usize) -> Result<u32> {
        match self.get(i) {
            Some(HostArg::Scalar(Scalar::U32(v))) => Ok(*v),
            _ => Err(self.wrong(i, "a u32 value")),
        }
    }
}

/// Row-parallel work on the host for CPU op implementations.
pub trait HostPool: Sync {
    /// Number of blocks `rows` rows are split into by [`HostPool::for_rows`]
    /// (depends only on `rows` and the pool's thread count).
    fn blocks(&self, rows: usize) -> usize;
    /// Splits `0..rows` into [`HostPool::blocks`] contiguous ascending blocks and runs
    /// `f(block, rows, out_rows)` on each, in parallel, where `out_rows` is the block's
    /// part of `out` (`[rows, row_len]`). Returns the blocks' results summed in block
    /// order (deterministic).
    fn for_rows(
        &self,
        rows: usize,
        out: &mut [f32],
        row_len: usize,
        f: &(dyn Fn(usize, Range<usize>, &mut [f32]) -> f64 + Sync),
    ) -> f64;
}

/// A [`HostPool`] that runs everything on the calling thread, in one block.
#[derive(Clone, Copy, Debug, Default)]
pub struct SerialPool;

impl HostPool for SerialPool {
    fn blocks(&self, rows: usize) -> usize {
        usize::from(rows > 0)
    }

    fn for_rows(
        &self,
        rows: usize,
        out: &mut [f32],
        row_len: usize,
        f: &(dyn Fn(usize, Range<usize>, &mut [f32]) -> f64 + Sync),
    ) -> f64 {
        if rows == 0 {
            return 0.0;
        }
        f(0, 0..rows, &mut out[..rows * row_len])
    }
}

/// Checks that `out` can hold `rows` rows of `row_len` before [`HostPool::for_rows`].
pub fn check_rows(op: &'static str, out: usize, rows: usize, row_len: usize) -> Result<()> {
    crate::check::at_least(op, "output", out, rows * row_len)
}

/// The op's label in messages and kernel caches: `plugin/op`.
pub fn label(op: &dyn DeviceOp) -> String {
    format!("{}/{}", op.plugin(), op.name())
}

/// [`Backend::run_op`] for backends without a native path: copies every buffer to the
/// host, runs the CPU implementation serially, and writes the writable ones back.
pub fn run_through_host<B: Backend>(
    dev: &B,
    op: &dyn DeviceOp,
    items: usize,
    args: &mut [OpArg<'_, B>],
) -> Result<()> {
    enum Held {
        F(Vec<f32>),
        U(Vec<u32>),
        D(Vec<f64>),
        S(Scalar),
    }
    check_call(op, items, args)?;
    let mut held = Vec::with_capacity(args.len());
    for a in args.iter() {
        held.push(match a {
            OpArg::F32(b) => Held::F(dev.download(*b)?),
            OpArg::F32Mut(b) => Held::F(dev.download(&**b)?),
            OpArg::U32(b) => Held::U(dev.download(*b)?),
            OpArg::U32Mut(b) => Held::U(dev.download(&**b)?),
            OpArg::F64(b) => Held::D(dev.download(*b)?),
            OpArg::F64Mut(b) => Held::D(dev.download(&**b)?),
            OpArg::Scalar(s) => Held::S(*s),
        });
    }
    {
        let host = held.iter_mut().zip(args.iter()).map(|(h, a)| match (h, a) {
            (Held::F(v), OpArg::F32Mut(_)) => HostArg::F32Mut(v),
            (Held::F(v), _) => HostArg::F32(v),
            (Held::U(v), OpArg::U32Mut(_)) => HostArg::U32Mut(v),
            (Held::U(v), _) => HostArg::U32(v),
            (Held::D(v), OpArg::F64Mut(_)) => HostArg::F64Mut(v),
            (Held::D(v), _) => HostArg::F64(v),
            (Held::S(s), _) => HostArg::Scalar(*s),
        });
        op.run_cpu(items, &mut HostArgs::new(op.name(), host), &SerialPool)?;
    }
    for (h, a) in held.iter().zip(args.iter_mut()) {
        match (h, a) {
            (Held::F(v), OpArg::F32Mut(b)) => dev.upload_into(b, v)?,
            (Held::U(v), OpArg::U32Mut(b)) => dev.upload_into(b, v)?,
            (Held::D(v), OpArg::F64Mut(b)) => dev.upload_into(b, v)?,
            _ => {}
        }
    }
    Ok(())
}

/// Runs [`DeviceOp::check`] on the lengths of `args` (every backend's `run_op` calls
/// it before anything runs).
pub fn check_call<B: Backend>(
    op: &dyn DeviceOp,
    items: usize,
    args: &[OpArg<'_, B>],
) -> Result<()> {
    let mut lens = [0usize; MAX_OP_ARGS];
    if args.len() > lens.len() {
        return Err(DeviceError::shape(
            op.name(),
            format!("{} arguments (at most {})", args.len(), lens.len()),
        ));
    }
    for (l, a) in lens.iter_mut().zip(args) {
        *l = match a {
            OpArg::F32(b) => B::buf_len(*b),
            OpArg::F32Mut(b) => B::buf_len(&**b),
            OpArg::U32(b) => B::buf_len(*b),
            OpArg::U32Mut(b) => B::buf_len(&**b),
            OpArg::F64(b) => B::buf_len(*b),
            OpArg::F64Mut(b) => B::buf_len(&**b),
            OpArg::Scalar(_) => 0,
        };
    }
    op.check(items, &lens[..args.len()]).map_err(|e| match e {
        DeviceError::Shape { problem, .. } => DeviceError::Shape {
            op: op.name(),
            problem: format!("{} (plugin {})", problem, op.plugin()),
        },
        e => e,
    })
}
