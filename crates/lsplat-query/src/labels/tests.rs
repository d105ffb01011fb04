use super::*;

fn frame(objects: &str) -> Frame {
    let t = format!(
        r#"{{"info": {{"width": 10, "height": 8, "name": "frame_00007.jpg"}}, "objects": [{objects}]}}"#
    );
    parse_frame(&t, Path::new("frame_00007.json")).unwrap()
}

fn count(m: &[u8]) -> usize {
    m.iter().filter(|v| **v != 0).count()
}

#[test]
fn rectangles_holes_parts_and_union() {
    // A rectangle (1,1)-(6,5): 6×5 pixels, bounds inclusive as cv2.fillPoly.
    let f = frame(
        r#"{"category": "box", "bbox": [1, 1, 6, 5], "segmentation": [[1, 1], [6, 1], [6, 5], [1, 5]]}"#,
    );
    assert_eq!((f.stem(), f.number()), ("frame_00007", Some(7)));
    let q = f.queries();
    assert_eq!(count(&q[0].mask), 30);
    assert_eq!(q[0].mask[10 + 1], 1);
    assert_eq!(q[0].mask[5 * 10 + 6], 1);
    assert_eq!(q[0].mask[6 * 10 + 6], 0);
    // A hole: outer 0..8 × 0..6 (63 px) minus the hole's interior (3..5 × 2..4
    // outline stays filled; interior (4, 3) only).
    let f = frame(
        r#"{"category": "ring", "bbox": [0, 0, 8, 6], "segmentation": [[[0, 0], [8, 0], [8, 6], [0, 6]], [[3, 2], [5, 2], [5, 4], [3, 4]]]}"#,
    );
    let m = &f.queries()[0].mask;
    assert_eq!(count(m), 63 - 1);
    assert_eq!(m[3 * 10 + 4], 0);
    assert_eq!(m[2 * 10 + 3], 1);
    // Two parts in one object, and two objects of one category (union, both boxes);
    // float vertices are truncated.
    let f = frame(
        r#"{"category": "cup", "bbox": [0, 0, 1, 1], "segmentation": [[[0, 0], [1.9, 0], [1, 1], [0, 1]], [[8, 6], [9, 6], [9, 7], [8, 7]]]},
           {"category": "plate", "bbox": [4, 4, 5, 5], "segmentation": [[4, 4], [5, 4], [5, 5], [4, 5]]},
           {"category": "cup", "bbox": [3, 0, 3, 0], "segmentation": [[3, 0], [3, 0], [3, 0]]}"#,
    );
    let q = f.queries();
    assert_eq!(
        q.iter().map(|q| q.category.as_str()).collect::<Vec<_>>(),
        ["cup", "plate"]
    );
    assert_eq!(count(&q[0].mask), 4 + 4 + 1);
    assert_eq!(q[0].boxes.len(), 2);
    assert_eq!(count(&q[1].mask), 4);
    // A triangle: pixels inside or on the outline.
    let f = frame(
        r#"{"category": "t", "bbox": [0, 0, 4, 4], "segmentation": [[0, 0], [4, 0], [0, 4]]}"#,
    );
    assert_eq!(count(&f.queries()[0].mask), 5 + 4 + 3 + 2 + 1);
    // Off-image parts are clipped.
    let f = frame(
        r#"{"category": "big", "bbox": [-5, -5, 20, 20], "segmentation": [[-5, -5], [20, -5], [20, 20], [-5, 20]]}"#,
    );
    assert_eq!(count(&f.queries()[0].mask), 80);
    assert_eq!(f.clipped, 1);
    assert_eq!(
        ring_pixels(&f.objects[0].rings, 10, 8),
        80,
        "the count without the mask"
    );
}

/// Issue 29, point 8: shapes that cannot be scored are errors naming the file, the
/// object and the shape; shapes partly outside are clipped and counted.
#[test]
fn malformed_shapes_are_errors_and_partly_outside_ones_are_counted() {
    let p = Path::new("labels/frame_00007.json");
    let parse = |objects: &str| {
        let t = format!(
            r#"{{"info": {{"width": 10, "height": 8, "name": "frame_00007.jpg"}}, "objects": [{objects}]}}"#
        );
        parse_frame(&t, p)
    };
    let ok_poly = r#""segmentation": [[1, 1], [3, 1], [3, 3]]"#;
    for (objects, want) in [
        // A polygon entirely outside the image (right of it, then above it).
        (
            r#"{"category": "mug", "bbox": [1, 1, 3, 3], "segmentation": [[12, 1], [15, 1], [15, 4]]}"#,
            "object 0 (`mug`): `segmentation` lies entirely outside the 10x8 image",
        ),
        (
            r#"{"category": "mug", "bbox": [1, 1, 3, 3], "segmentation": [[[1, -9], [5, -9], [5, -2]]]}"#,
            "lies entirely outside",
        ),
        // A box entirely outside, an inverted box, a box between pixel centres.
        (
            &format!(r#"{{"category": "cup", "bbox": [10.5, 1, 14, 3], {ok_poly}}}"#),
            "object 0 (`cup`): `bbox` [10.5, 1.0, 14.0, 3.0] lies entirely outside the 10x8 image",
        ),
        (
            &format!(r#"{{"category": "cup", "bbox": [1, -9, 3, -4], {ok_poly}}}"#),
            "lies entirely outside",
        ),
        (
            &format!(r#"{{"category": "cup", "bbox": [5, 1, 2, 3], {ok_poly}}}"#),
            "object 0 (`cup`): inverted `bbox` [5.0, 1.0, 2.0, 3.0]",
        ),
        (
            &format!(r#"{{"category": "cup", "bbox": [1.2, 1.2, 1.8, 1.8], {ok_poly}}}"#),
            "covers no pixel of the 10x8 image",
        ),
        // No objects at all.
        ("", "no objects"),
    ] {
        let e = parse(objects).unwrap_err().to_string();
        assert!(
            e.starts_with("labels/frame_00007.json: ") && e.contains(want),
            "{e}\nwant: {want}"
        );
    }
    // The second object is named when it is the bad one.
    let e = parse(&format!(
        r#"{{"category": "a", "bbox": [1, 1, 3, 3], {ok_poly}}}, {{"category": "b", "bbox": [3, 3, 1, 1], {ok_poly}}}"#
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("object 1 (`b`): inverted"), "{e}");
    // Partly outside (box, polygon, or both) is clipped and counted once per object;
    // the right and bottom edges (x = width, y = height) are inside.
    let f = parse(&format!(
        r#"{{"category": "a", "bbox": [-2, 1, 3, 3], {ok_poly}}},
           {{"category": "b", "bbox": [1, 1, 3, 3], "segmentation": [[1, 1], [13, 1], [3, 3]]}},
           {{"category": "c", "bbox": [8, 6, 10, 8], "segmentation": [[8, 6], [10, 6], [10, 8]]}},
           {{"category": "d", "bbox": [-1, -1, 11, 9], "segmentation": [[-1, -1], [11, -1], [11, 9]]}}"#
    ))
    .unwrap();
    assert_eq!(f.clipped, 3);
    assert_eq!(
        f.queries()
            .iter()
            .map(|q| count(&q.mask))
            .collect::<Vec<_>>()[..3],
        [6, 17, 3],
        "clipped to the image"
    );
}

/// A folder: sorted files, two files naming one frame, no files.
#[test]
fn label_folders() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |file: &str, image: &str| {
        std::fs::write(
            d.join(file),
            format!(
                r#"{{"info": {{"width": 4, "height": 4, "name": "{image}"}}, "objects": [{{"category": "x", "bbox": [0, 0, 1, 1], "segmentation": [[0, 0], [1, 0], [1, 1]]}}]}}"#
            ),
        )
        .unwrap();
    };
    let e = read_frames(d).unwrap_err().to_string();
    assert!(e.contains("no label files"), "{e}");
    write("frame_00002.json", "frame_00002.jpg");
    write("frame_00001.json", "frame_00001.jpg");
    std::fs::write(d.join("notes.txt"), "not a label").unwrap();
    let f = read_frames(d).unwrap();
    assert_eq!(
        f.iter().map(Frame::stem).collect::<Vec<_>>(),
        ["frame_00001", "frame_00002"]
    );
    write("copy.json", "frame_00002.png");
    let e = read_frames(d).unwrap_err().to_string();
    assert!(
        e.contains("frame_00002.json: names frame `frame_00002` (image `frame_00002.jpg`), as ")
            && e.contains("copy.json does"),
        "{e}"
    );
}

#[test]
fn bad_files_name_the_file_and_the_problem() {
    let p = Path::new("frame_00001.json");
    for (text, want) in [
        ("{", "not valid JSON"),
        (
            r#"{"info": {"width": 4, "name": "a.jpg"}, "objects": []}"#,
            "info.height",
        ),
        (
            r#"{"info": {"width": 4, "height": 4, "name": "a.jpg"}, "objects": [{"category": "x", "bbox": [1, 2], "segmentation": [[0, 0]]}]}"#,
            "object 0: `bbox`",
        ),
        (
            r#"{"info": {"width": 4, "height": 4, "name": "a.jpg"}, "objects": [{"category": "x", "bbox": [1, 2, 3, 4], "segmentation": [[0, "a"]]}]}"#,
            "object 0: `segmentation`",
        ),
    ] {
        let e = parse_frame(text, p).unwrap_err().to_string();
        assert!(
            e.starts_with("frame_00001.json: ") && e.contains(want),
            "{e}"
        );
    }
}
