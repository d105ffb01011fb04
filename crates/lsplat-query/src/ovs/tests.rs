use super::*;

/// Writes a PNG of `color` with 8- or 16-bit samples.
fn png(path: &Path, w: u32, h: u32, color: png::ColorType, depth: png::BitDepth, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut buf = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut buf, w, h);
        enc.set_color(color);
        enc.set_depth(depth);
        if color == png::ColorType::Indexed {
            enc.set_palette(vec![0, 0, 0, 255, 255, 255, 10, 200, 30]);
        }
        enc.write_header().unwrap().write_image_data(data).unwrap();
    }
    std::fs::write(path, buf).unwrap();
}

fn grey(path: &Path, w: u32, h: u32, data: &[u8]) {
    png(
        path,
        w,
        h,
        png::ColorType::Grayscale,
        png::BitDepth::Eight,
        data,
    );
}

/// A scene laid out as 3D-OVS distributes it, with grey, RGB and palette masks.
#[test]
fn reads_the_distributed_layout() {
    let d = tempfile::tempdir().unwrap();
    let seg = d.path().join("bed/segmentations");
    std::fs::create_dir_all(&seg).unwrap();
    std::fs::write(
        seg.join("classes.txt"),
        "white sheet\n\n  banana \nblue pillow\n",
    )
    .unwrap();
    let v = seg.join("03");
    grey(&v.join("banana.png"), 3, 2, &[255, 0, 0, 255, 128, 0]);
    // RGB white is 255, a light grey (250, 255, 255) is not.
    png(
        &v.join("blue pillow.png"),
        3,
        2,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &[
            255, 255, 255, 250, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
    );
    // A palette: index 1 is white.
    png(
        &v.join("white sheet.png"),
        3,
        2,
        png::ColorType::Indexed,
        png::BitDepth::Eight,
        &[0, 0, 1, 0, 2, 1],
    );
    grey(&v.join("notes.png"), 1, 1, &[0]);
    grey(&seg.join("10/banana.png"), 2, 2, &[0; 4]);
    grey(&seg.join("10/blue pillow.png"), 2, 2, &[255; 4]);
    grey(&seg.join("10/white sheet.png"), 2, 2, &[0, 255, 0, 0]);
    std::fs::write(seg.join("README"), "not a view").unwrap();
    // The scene folder or its `segmentations` folder.
    for p in [d.path().join("bed"), seg.clone()] {
        let s = read_scene(&p).unwrap();
        assert_eq!(s.classes, ["banana", "blue pillow", "white sheet"]);
        assert_eq!(
            s.frames.iter().map(|f| f.number).collect::<Vec<_>>(),
            [3, 10]
        );
        let f = &s.frames[0];
        assert_eq!(
            (f.width, f.height, f.unlisted.clone()),
            (3, 2, vec!["notes".into()])
        );
        let m = f.masks(&s.classes).unwrap();
        assert_eq!(m[0], [1, 0, 0, 1, 0, 0], "128 is not in the class");
        assert_eq!(m[1], [1, 0, 0, 0, 0, 0]);
        assert_eq!(m[2], [0, 0, 1, 0, 0, 1], "(10, 200, 30) has luma 124");
    }
}

/// Each malformed input is an error naming its file.
#[test]
fn malformed_annotations_name_the_file() {
    let d = tempfile::tempdir().unwrap();
    let seg = d.path().join("segmentations");
    std::fs::create_dir_all(&seg).unwrap();
    let check = |want: &str, file: &str| {
        let e = read_scene(&seg).unwrap_err().to_string();
        assert!(
            e.contains(want) && e.contains(file),
            "{e}\nwant: {want} in {file}"
        );
    };
    check("No such file", "classes.txt");
    std::fs::write(seg.join("classes.txt"), "\n \n").unwrap();
    check("no classes", "classes.txt");
    std::fs::write(seg.join("classes.txt"), "cup\nbowl\ncup\n").unwrap();
    check("line 3: `cup` is listed twice", "classes.txt");
    std::fs::write(seg.join("classes.txt"), "cup\nbowl/plate\n").unwrap();
    check("cannot name a mask file", "classes.txt");
    std::fs::write(seg.join("classes.txt"), "cup\nbowl\n").unwrap();
    check("no view folders", "segmentations");
    grey(&seg.join("00/cup.png"), 2, 2, &[255, 0, 0, 0]);
    check("missing", "00/bowl.png");
    grey(&seg.join("00/bowl.png"), 3, 2, &[255, 0, 0, 0, 0, 0]);
    check("2x2 but the view's other masks are 3x2", "00/cup.png");
    grey(&seg.join("00/bowl.png"), 2, 2, &[1, 1, 0, 0]);
    check("none is 255", "00/bowl.png");
    png(
        &seg.join("00/bowl.png"),
        2,
        2,
        png::ColorType::Grayscale,
        png::BitDepth::Sixteen,
        &[255; 8],
    );
    check("a 16-bit mask", "00/bowl.png");
    std::fs::write(seg.join("00/bowl.png"), b"\x89PNG garbage").unwrap();
    check("not a readable PNG", "00/bowl.png");
    grey(&seg.join("00/bowl.png"), 2, 2, &[0, 0, 0, 255]);
    assert!(read_scene(&seg).is_ok());
    grey(&seg.join("0/cup.png"), 2, 2, &[0; 4]);
    grey(&seg.join("0/bowl.png"), 2, 2, &[0; 4]);
    check("view 0 again", "segmentations/0");
    std::fs::remove_dir_all(seg.join("0")).unwrap();
    std::fs::create_dir_all(seg.join("test_view1")).unwrap();
    check("not a view folder", "test_view1");
}
