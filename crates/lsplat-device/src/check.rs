//! Shape checks every backend runs on an op's buffers before launching it.

use crate::{DeviceError, Result};

/// `got` must equal `expected`.
pub fn exact(op: &'static str, what: &str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{what} has {got} elements, expected {expected}"),
        ))
    }
}

/// `got` must be at least `needed` (per-pixel buffers sized for the largest camera).
pub fn at_least(op: &'static str, what: &str, got: usize, needed: usize) -> Result<()> {
    if got >= needed {
        Ok(())
    } else {
        Err(DeviceError::shape(
            op,
            format!("{what} has {got} elements, needs at least {needed}"),
        ))
    }
}
