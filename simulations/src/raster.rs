//! A tiny RGB rasteriser for `plot.png`: lines, dashed lines, rectangles and 8×8 bitmap
//! text (the public-domain font8x8 glyphs), encoded with the `png` crate.
//! Deterministic: the same plot gives the same bytes.
//!
//! Must not: depend on anything but `png` and `font8x8`.

use font8x8::{UnicodeFonts, BASIC_FONTS};

/// An RGB colour.
pub type Rgb = [u8; 3];

/// A white canvas.
pub struct Canvas {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Canvas {
    /// A white canvas of `w` × `h` pixels.
    pub fn new(w: usize, h: usize) -> Self {
        Canvas {
            w,
            h,
            px: vec![255; w * h * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = (y as usize * self.w + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    /// A line `thick` pixels wide; `dash` > 0 draws `dash` on, `dash` off.
    pub fn line(
        &mut self,
        (x0, y0): (f64, f64),
        (x1, y1): (f64, f64),
        c: Rgb,
        thick: i64,
        dash: usize,
    ) {
        let (mut x, mut y) = (x0.round() as i64, y0.round() as i64);
        let (xe, ye) = (x1.round() as i64, y1.round() as i64);
        let (dx, dy) = ((xe - x).abs(), -(ye - y).abs());
        let (sx, sy) = (if x < xe { 1 } else { -1 }, if y < ye { 1 } else { -1 });
        let mut err = dx + dy;
        let mut n = 0usize;
        loop {
            if dash == 0 || (n / dash).is_multiple_of(2) {
                for t in 0..thick {
                    if dx >= -dy {
                        self.set(x, y + t, c);
                    } else {
                        self.set(x + t, y, c);
                    }
                }
            }
            n += 1;
            if x == xe && y == ye {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// A filled rectangle between two corners.
    pub fn rect(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), c: Rgb) {
        let (xa, xb) = (x0.min(x1).round() as i64, x0.max(x1).round() as i64);
        let (ya, yb) = (y0.min(y1).round() as i64, y0.max(y1).round() as i64);
        for y in ya..=yb {
            for x in xa..=xb {
                self.set(x, y, c);
            }
        }
    }

    /// Text with its top-left corner at (x, y); non-ASCII shows as '?'.
    pub fn text(&mut self, x: f64, y: f64, s: &str, c: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let glyph = BASIC_FONTS
                .get(ch)
                .or_else(|| BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits & (1 << col) != 0 {
                        self.set(x as i64 + (i * 8 + col) as i64, y as i64 + row as i64, c);
                    }
                }
            }
        }
    }

    /// Width of `s` in pixels.
    pub fn text_width(s: &str) -> f64 {
        (s.chars().count() * 8) as f64
    }

    /// PNG bytes.
    pub fn png(&self) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.w as u32, self.h as u32);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            match enc.write_header() {
                Ok(mut writer) => {
                    if writer.write_image_data(&self.px).is_err() {
                        return Vec::new();
                    }
                }
                Err(_) => return Vec::new(),
            }
        }
        out
    }
}
