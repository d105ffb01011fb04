//! The plugins this binary links (`lsplat-plugins`, shared with the Python package).

pub use lsplat_plugins::{
    BUILT_IN_MODEL, check, check_dataset, describe, load_run, loss, model, resolve_iterations,
};
