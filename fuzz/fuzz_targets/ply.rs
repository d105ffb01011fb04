//! Fuzzes the splat PLY reader: any bytes give a value or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = lsplat_data::ply::parse_ply(data, std::path::Path::new("fuzz.ply")) {
        assert_eq!(p.sh_dc.len(), p.gaussians.len());
        assert_eq!(p.sh_rest.len(), p.gaussians.len() * p.rest_len());
        p.gaussians.validate().unwrap();
    }
});
