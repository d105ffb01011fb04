//! Fuzzes the COLMAP text readers (`cameras.txt`, `images.txt`) and the conversion
//! to cameras. The input is split at the first NUL byte: cameras, then images.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lsplat_data::cameras::{colmap, parse_cameras_txt, parse_images_txt};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (c, i) = text.split_once('\0').unwrap_or((&text, &text));
    let p = std::path::Path::new("fuzz.txt");
    if let (Ok(c), Ok(i)) = (parse_cameras_txt(c, p), parse_images_txt(i, p)) {
        let _ = colmap::to_cameras(p, &c, &i);
    }
});
