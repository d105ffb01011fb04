//! Fuzzes the COLMAP binary readers (`cameras.bin`, `images.bin`) and the
//! conversion to cameras.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lsplat_data::cameras::{colmap, parse_cameras_bin, parse_images_bin};

fuzz_target!(|data: &[u8]| {
    let p = std::path::Path::new("fuzz.bin");
    let cams = parse_cameras_bin(data, p);
    let imgs = parse_images_bin(data, p);
    if let (Ok(c), Ok(i)) = (cams, imgs) {
        let _ = colmap::to_cameras(p, &c, &i);
    }
});
