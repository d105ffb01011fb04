use super::*;

/// Decodes with zune-jpeg in strict mode (an independent decoder).
fn decode(bytes: &[u8]) -> (usize, usize, Vec<u8>) {
    use zune_core::colorspace::ColorSpace;
    use zune_core::options::DecoderOptions;
    let opts = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_strict_mode(true);
    let mut d =
        zune_jpeg::JpegDecoder::new_with_options(zune_core::bytestream::ZCursor::new(bytes), opts);
    let px = d.decode().expect("a valid JPEG");
    let (w, h) = d.dimensions().unwrap();
    (w, h, px)
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    10.0 * (255.0f64.powi(2) / mse.max(1e-12)).log10()
}

/// Smooth gradients, a hard-edged disc and a little noise: a picture like a frame.
fn picture(w: usize, h: usize, seed: u64) -> Vec<u8> {
    let mut rng = lsplat_core::Rng::new(seed);
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let (u, v) = (x as f32 / w as f32, y as f32 / h as f32);
            let inside = (u - 0.6).powi(2) + (v - 0.4).powi(2) < 0.05;
            let base = if inside {
                [230.0, 60.0, 40.0]
            } else {
                [40.0 + 150.0 * u, 90.0 + 100.0 * v, 200.0 - 120.0 * u * v]
            };
            for c in base {
                out.push((c + rng.normal() * 3.0).clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

#[test]
fn zigzag_and_codes_are_the_standards() {
    assert_eq!(&ZIGZAG[..10], &[0, 1, 8, 16, 9, 2, 3, 10, 17, 24]);
    assert_eq!(&ZIGZAG[60..], &[47, 55, 62, 63]);
    let mut seen = [false; 64];
    for &z in &ZIGZAG {
        seen[z as usize] = true;
    }
    assert!(seen.iter().all(|&s| s), "a permutation");
    let t = tables(75);
    let code = |c: u32| (c & 0xffff, c >> 16);
    // Annex K.3: DC luma category 0 is '00', 11 is '111111110'; AC luma EOB '1010',
    // ZRL '11111111001', 0/1 '00'; AC chroma EOB '00'.
    assert_eq!(code(t[DC_AT]), (0b00, 2));
    assert_eq!(code(t[DC_AT + 11]), (0b1_1111_1110, 9));
    assert_eq!(code(t[DC_AT + 16]), (0b00, 2));
    assert_eq!(code(t[AC_AT]), (0b1010, 4));
    assert_eq!(code(t[AC_AT + 0xf0]), (0b111_1111_1001, 11));
    assert_eq!(code(t[AC_AT + 0x01]), (0b00, 2));
    assert_eq!(code(t[AC_AT + 256]), (0b00, 2));
    // IJG's scaling: quality 50 is the table itself, 100 all ones.
    assert_eq!(quant_table(false, 50), LUMA_Q);
    assert_eq!(quant_table(true, 100), [1; 64]);
    assert_eq!(quant_table(false, 25)[0], 32);
}

/// The integer DCT against the float64 DCT-II, at quality 100 (steps of 1) and 50.
#[test]
fn the_integer_dct_is_the_float64_dct() {
    let mut rng = lsplat_core::Rng::new(7);
    for quality in [100u8, 50] {
        let layout = Layout::new(8, 8, quality).unwrap();
        let t = tables(quality);
        let q = quant_table(false, quality);
        let (mut off, mut total) = (0, 0);
        for trial in 0..200 {
            let grey: Vec<u8> = (0..64)
                .map(|i| match trial % 3 {
                    0 => (rng.range(0.0, 256.0) as u32).min(255) as u8,
                    1 => ((i % 8) * 30 + (i / 8) * 3) as u8,
                    _ => {
                        if (i % 8) < 3 {
                            250
                        } else {
                            5
                        }
                    }
                })
                .collect();
            let mut out = [0i32; 64];
            // A grey pixel's Y is its value.
            block(&layout, &t, 0, |x, y| [grey[y * 8 + x]; 3], &mut out);
            for (k, &z) in ZIGZAG.iter().enumerate() {
                let (v, u) = (z as usize / 8, z as usize % 8);
                let c = |k: usize| if k == 0 { 0.5f64.sqrt() } else { 1.0 };
                let mut f = 0.0;
                for y in 0..8 {
                    for x in 0..8 {
                        f += (grey[y * 8 + x] as f64 - 128.0)
                            * ((2 * x + 1) as f64 * u as f64 * std::f64::consts::PI / 16.0).cos()
                            * ((2 * y + 1) as f64 * v as f64 * std::f64::consts::PI / 16.0).cos();
                    }
                }
                let want = (0.25 * c(u) * c(v) * f / q[z as usize] as f64).round() as i32;
                assert!(
                    (out[k] - want).abs() <= 1,
                    "coefficient {z}: {} vs {want}",
                    out[k]
                );
                off += usize::from(out[k] != want);
                total += 1;
            }
        }
        assert!(
            off * 100 < total,
            "quality {quality}: {off} of {total} off by one"
        );
    }
}

#[test]
fn frames_decode_close_to_their_pixels_at_any_size() {
    for (w, h) in [(1usize, 1usize), (17, 9), (33, 31), (160, 96)] {
        let rgb = picture(w, h, (w * h) as u64);
        for quality in [60u8, 92] {
            let jpg = encode(&rgb, w as u32, h as u32, quality, 2).unwrap();
            let (dw, dh, px) = decode(&jpg);
            assert_eq!((dw, dh), (w, h));
            let p = psnr(&px, &rgb);
            let mut theirs = Vec::new();
            jpeg_encoder::Encoder::new(&mut theirs, quality)
                .encode(&rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
                .unwrap();
            let q = psnr(&decode(&theirs).2, &rgb);
            // A 17x9 picture with a disc's edge is hard for any JPEG (both ~21 dB at 60).
            assert!(
                p > q - 0.5,
                "{w}x{h} at {quality}: {p:.1} dB vs jpeg-encoder's {q:.1}"
            );
            let floor = if quality >= 90 { 36.0 } else { 30.0 };
            assert!(w < 100 || p > floor, "{w}x{h} at {quality}: PSNR {p:.1} dB");
        }
    }
}

/// Our frames against the jpeg-encoder crate's at the same quality: as close to the
/// picture, and not much larger (the RST markers cost 2 bytes per interval).
#[test]
fn as_good_as_a_reference_encoder() {
    let (w, h) = (320usize, 180usize);
    let rgb = picture(w, h, 3);
    for quality in [50u8, 80, 95] {
        let ours = encode(&rgb, w as u32, h as u32, quality, 1).unwrap();
        let mut theirs = Vec::new();
        jpeg_encoder::Encoder::new(&mut theirs, quality)
            .encode(&rgb, w as u16, h as u16, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let (a, b) = (psnr(&decode(&ours).2, &rgb), psnr(&decode(&theirs).2, &rgb));
        assert!(a > b - 0.5, "quality {quality}: {a:.2} dB vs {b:.2} dB");
        assert!(
            ours.len() < theirs.len() * 21 / 20,
            "quality {quality}: {} bytes vs {}",
            ours.len(),
            theirs.len()
        );
    }
}

#[test]
fn threads_do_not_change_the_bytes_and_bad_sizes_are_refused() {
    let (w, h) = (200usize, 120usize);
    let rgb = picture(w, h, 5);
    for quality in [40u8, 95] {
        let one = encode(&rgb, w as u32, h as u32, quality, 1).unwrap();
        for threads in [2, 3, 7] {
            assert_eq!(
                encode(&rgb, w as u32, h as u32, quality, threads).unwrap(),
                one
            );
        }
        let layout = Layout::new(w as u32, h as u32, quality).unwrap();
        assert!(layout.segments() > 1, "restart intervals are used");
    }
    assert!(encode(&rgb, w as u32, h as u32 + 1, 80, 1).is_err());
    assert!(encode(&[], 0, 0, 80, 1).is_err());
    assert!(Layout::new(70_000, 1, 80).is_err());
}

/// The worst case a slot is sized for holds: noise at quality 100 in 4:4:4.
#[test]
fn slots_hold_the_worst_blocks() {
    let (w, h) = (64usize, 64usize);
    let mut rng = lsplat_core::Rng::new(11);
    let rgb: Vec<u8> = (0..w * h * 3)
        .map(|i| {
            if rng.range(0.0, 1.0) < 0.5 {
                (i % 2) as u8 * 255
            } else {
                0
            }
        })
        .collect();
    let layout = Layout::new(w as u32, h as u32, 100).unwrap();
    let t = tables(100);
    let mut coefs = vec![0i32; layout.blocks() * 64];
    for (i, c) in coefs.chunks_exact_mut(64).enumerate() {
        block(
            &layout,
            &t,
            i,
            |x, y| {
                let p = (y * w + x) * 3;
                [rgb[p], rgb[p + 1], rgb[p + 2]]
            },
            c.try_into().unwrap(),
        );
    }
    let mut slot = vec![0u8; layout.slot_bytes()];
    let mut most = 0;
    for s in 0..layout.segments() {
        most = most.max(segment(&layout, &t, &coefs, s, &mut slot));
    }
    assert!(
        most * 2 < layout.slot_bytes(),
        "{most} of {}",
        layout.slot_bytes()
    );
    let jpg = encode(&rgb, w as u32, h as u32, 100, 2).unwrap();
    assert!(psnr(&decode(&jpg).2, &rgb) > 30.0);
}

/// The reciprocals divide exactly over the range the quantiser meets.
#[test]
fn reciprocals_divide_exactly() {
    for q in 1..256u32 {
        for t in 0..4096u32 {
            assert_eq!((t * RECIP[q as usize]) >> 20, t / q, "{t} / {q}");
        }
    }
}

/// `encode`'s MCU rows of converted planes give the bytes of [`block`]'s one pixel
/// at a time (what the device op and its CPU code run), with edges repeated.
#[test]
fn planes_are_the_blocks() {
    for (w, h) in [(37usize, 21usize), (64, 48), (9, 70)] {
        let rgb = picture(w, h, 9);
        for quality in [70u8, 95] {
            let layout = Layout::new(w as u32, h as u32, quality).unwrap();
            let t = tables(quality);
            let mut coefs = vec![0i32; layout.blocks() * 64];
            for (i, c) in coefs.chunks_exact_mut(64).enumerate() {
                let pixel = |x: usize, y: usize| {
                    let p = (y * w + x) * 3;
                    [rgb[p], rgb[p + 1], rgb[p + 2]]
                };
                block(&layout, &t, i, pixel, c.try_into().unwrap());
            }
            let mut slot = vec![0u8; layout.slot_bytes()];
            let lens: Vec<u32> = (0..layout.segments())
                .map(|s| segment(&layout, &t, &coefs, s, &mut slot) as u32)
                .collect();
            let mut data = Vec::new();
            for s in 0..layout.segments() {
                let len = segment(&layout, &t, &coefs, s, &mut slot);
                data.extend_from_slice(&slot[..len]);
                if s + 1 < layout.segments() {
                    data.extend([0xff, 0xd0 + (s % 8) as u8]);
                }
            }
            assert_eq!(offsets(&lens).last().copied(), Some(data.len() as u32));
            let want = file(&layout, quality, &data);
            assert_eq!(
                encode(&rgb, w as u32, h as u32, quality, 2).unwrap(),
                want,
                "{w}x{h} at {quality}"
            );
        }
    }
}
