//! Fuzzes the `.npy` reader (and the `.npz` reader for inputs starting with `PK`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = std::path::Path::new("fuzz.npy");
    if data.starts_with(b"PK") {
        let _ = lsplat_data::npz::parse_npz(data, p);
    } else if let Ok(a) = lsplat_data::npy::parse_npy(data, p) {
        assert_eq!(a.shape.iter().product::<usize>(), a.data.len());
    }
});
