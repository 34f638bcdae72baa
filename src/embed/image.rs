//! A content-based image vector for embedders that have no image model: colour,
//! layout and edge features of a small thumbnail, mapped to the embedder's
//! dimensionality by a fixed seeded projection and L2-normalised.
//!
//! Images that look alike (same colours in the same places, same edges) come out
//! close; the vectors share the texts' dimensionality but are not aligned with the
//! text space, so an image is comparable with other images only.

use std::io::Cursor;

use image::{DynamicImage, ImageReader, Limits, RgbImage};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::{l2_normalize, EmbedError};

/// Side of the square thumbnail every feature is computed on.
const THUMB: u32 = 32;
/// Side of the grayscale layout grid.
const LAYOUT: usize = 8;
/// Hue, saturation and value bins of the colour histogram.
const HUE_BINS: usize = 8;
const SAT_BINS: usize = 3;
const VAL_BINS: usize = 3;
/// Orientation bins of the edge histogram, per cell of a 2×2 grid.
const EDGE_BINS: usize = 8;
const FEATURES: usize = HUE_BINS * SAT_BINS * VAL_BINS + LAYOUT * LAYOUT + 4 * EDGE_BINS;
/// Relative weight of each feature block.
const COLOUR_WEIGHT: f32 = 1.0;
const LAYOUT_WEIGHT: f32 = 0.6;
const EDGE_WEIGHT: f32 = 0.6;
/// Largest width or height, largest width × height (a 6000 × 4000 photo), and the
/// decoder's allocation ceiling: a guard against images that decompress to gigabytes
/// (a 249 KB PNG can declare 16000 × 16000). The header is read and checked before
/// anything is allocated for the pixels.
const MAX_SIDE: u32 = 16_384;
const MAX_PIXELS: u64 = 24_000_000;
const MAX_DECODE_BYTES: u64 = 128 * 1024 * 1024;
/// Seed of the projection; changing it changes every image vector.
const PROJECTION_SEED: u64 = 0x7261_6e6b_696d_6731; // "rankimg1"

/// Turns encoded images (PNG, JPEG, GIF, WebP) into vectors of a fixed length.
pub struct ImageEmbedder {
    dimensions: usize,
    /// `dimensions × FEATURES`, row-major, entries ±1/√dimensions.
    projection: Vec<f32>,
}

impl ImageEmbedder {
    pub fn new(dimensions: usize) -> ImageEmbedder {
        let scale = 1.0 / (dimensions as f32).sqrt();
        let projection = (0..dimensions * FEATURES)
            .map(|index| {
                let hash = xxh3_64_with_seed(&(index as u64).to_le_bytes(), PROJECTION_SEED);
                if hash & 1 == 0 {
                    scale
                } else {
                    -scale
                }
            })
            .collect();
        ImageEmbedder { dimensions, projection }
    }

    /// The L2-normalised vector of an encoded image; `Invalid` when the bytes are not
    /// an image of a supported format.
    pub fn embed(&self, bytes: &[u8]) -> Result<Vec<f32>, EmbedError> {
        let image = decode(bytes)?;
        let features = features(&image);
        let mut vector: Vec<f32> = self
            .projection
            .chunks_exact(FEATURES)
            .map(|row| row.iter().zip(&features).map(|(w, f)| w * f).sum())
            .collect();
        debug_assert_eq!(vector.len(), self.dimensions);
        if !l2_normalize(&mut vector) {
            return Err(EmbedError::Invalid("the image has no usable content".into()));
        }
        Ok(vector)
    }
}

fn decode(bytes: &[u8]) -> Result<DynamicImage, EmbedError> {
    let invalid = |error: &dyn std::fmt::Display| EmbedError::Invalid(format!("not a decodable image: {error}"));
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| invalid(&e))?;
    if reader.format().is_none() {
        return Err(EmbedError::Invalid(
            "not an image: expected PNG, JPEG, GIF or WebP bytes".into(),
        ));
    }
    let (width, height) = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| invalid(&e))?
        .into_dimensions()
        .map_err(|e| invalid(&e))?;
    if width > MAX_SIDE || height > MAX_SIDE || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(EmbedError::TooLarge(format!(
            "the image is {width} × {height} pixels; at most {MAX_PIXELS} pixels and {MAX_SIDE} per side are decoded"
        )));
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let image = reader.decode().map_err(|error| match error {
        image::ImageError::Limits(limit) => EmbedError::TooLarge(format!("the image is too large to decode: {limit}")),
        other => invalid(&other),
    })?;
    if image.width() == 0 || image.height() == 0 {
        return Err(EmbedError::Invalid("the image is empty".into()));
    }
    Ok(image)
}

/// Colour histogram, grayscale layout and edge histogram, each block L2-normalised
/// and weighted.
fn features(image: &DynamicImage) -> Vec<f32> {
    // Scaled down in the image's own colour type first: converting a large greyscale
    // image to RGB would triple it.
    let thumb: RgbImage = image.thumbnail_exact(THUMB, THUMB).to_rgb8();
    let side = THUMB as usize;
    let mut colour = vec![0.0f32; HUE_BINS * SAT_BINS * VAL_BINS];
    let mut gray = vec![0.0f32; side * side];
    for (x, y, pixel) in thumb.enumerate_pixels() {
        let [r, g, b] = pixel.0.map(|c| c as f32 / 255.0);
        let (hue, saturation, value) = hsv(r, g, b);
        let bin = |v: f32, bins: usize| ((v * bins as f32) as usize).min(bins - 1);
        let index = (bin(hue, HUE_BINS) * SAT_BINS + bin(saturation, SAT_BINS)) * VAL_BINS + bin(value, VAL_BINS);
        colour[index] += 1.0;
        gray[y as usize * side + x as usize] = 0.299 * r + 0.587 * g + 0.114 * b;
    }
    // Square roots of frequencies (Hellinger): a dominant colour does not drown the rest.
    colour.iter_mut().for_each(|count| *count = count.sqrt());

    let cell = side / LAYOUT;
    let mut layout = vec![0.0f32; LAYOUT * LAYOUT];
    for y in 0..side {
        for x in 0..side {
            layout[(y / cell) * LAYOUT + x / cell] += gray[y * side + x];
        }
    }
    let mean = layout.iter().sum::<f32>() / layout.len() as f32;
    layout.iter_mut().for_each(|v| *v -= mean);

    let mut edges = vec![0.0f32; 4 * EDGE_BINS];
    for y in 1..side - 1 {
        for x in 1..side - 1 {
            let dx = gray[y * side + x + 1] - gray[y * side + x - 1];
            let dy = gray[(y + 1) * side + x] - gray[(y - 1) * side + x];
            let magnitude = (dx * dx + dy * dy).sqrt();
            if magnitude < 1e-3 {
                continue;
            }
            // Unsigned orientation in [0, π).
            let angle = dy.atan2(dx).rem_euclid(std::f32::consts::PI);
            let bin = ((angle / std::f32::consts::PI * EDGE_BINS as f32) as usize).min(EDGE_BINS - 1);
            let quadrant = (y * 2 / side) * 2 + x * 2 / side;
            edges[quadrant * EDGE_BINS + bin] += magnitude;
        }
    }

    let mut features = Vec::with_capacity(FEATURES);
    for (mut block, weight) in [(colour, COLOUR_WEIGHT), (layout, LAYOUT_WEIGHT), (edges, EDGE_WEIGHT)] {
        l2_normalize(&mut block);
        features.extend(block.into_iter().map(|v| v * weight));
    }
    debug_assert_eq!(features.len(), FEATURES);
    features
}

/// Hue, saturation and value, each in [0, 1].
fn hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let delta = max - min;
    let saturation = if max > 0.0 { delta / max } else { 0.0 };
    let hue = if delta == 0.0 {
        0.0
    } else if max == r {
        ((g - b) / delta).rem_euclid(6.0) / 6.0
    } else if max == g {
        ((b - r) / delta + 2.0) / 6.0
    } else {
        ((r - g) / delta + 4.0) / 6.0
    };
    (hue, saturation, max)
}

#[cfg(test)]
pub(crate) mod tests {
    use image::{ImageFormat, Rgb};

    use super::*;
    use crate::embed::dot;

    /// A PNG of `width × height` whose pixels come from `pixel(x, y)`.
    pub(crate) fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
        let image = RgbImage::from_fn(width, height, |x, y| Rgb(pixel(x, y)));
        let mut bytes = Cursor::new(Vec::new());
        image.write_to(&mut bytes, ImageFormat::Png).unwrap();
        bytes.into_inner()
    }

    /// A warm left-to-right gradient, optionally shifted a little.
    pub(crate) fn sunset(width: u32, height: u32, shift: u8) -> Vec<u8> {
        png(width, height, |x, y| {
            let t = (x * 255 / width.max(1)) as u8;
            [
                230u8.saturating_sub(shift),
                t / 2 + shift,
                (y * 40 / height.max(1)) as u8,
            ]
        })
    }

    /// A blue and green checkerboard.
    pub(crate) fn checkerboard(width: u32, height: u32) -> Vec<u8> {
        png(width, height, |x, y| {
            if (x / 6 + y / 6) % 2 == 0 {
                [20, 40, 220]
            } else {
                [30, 200, 60]
            }
        })
    }

    #[test]
    fn similar_images_are_closer_than_different_ones() {
        let embedder = ImageEmbedder::new(384);
        let a = embedder.embed(&sunset(64, 48, 0)).unwrap();
        let a_variant = embedder.embed(&sunset(90, 60, 12)).unwrap();
        let b = embedder.embed(&checkerboard(64, 48)).unwrap();
        assert_eq!(a.len(), 384);
        assert!((dot(&a, &a) - 1.0).abs() < 1e-4);
        let (similar, different) = (dot(&a, &a_variant), dot(&a, &b));
        assert!(similar > 0.9, "similar {similar}");
        assert!(similar > different + 0.3, "similar {similar}, different {different}");
        assert_eq!(a, embedder.embed(&sunset(64, 48, 0)).unwrap(), "deterministic");
    }

    #[test]
    fn refuses_bytes_that_are_not_an_image() {
        let embedder = ImageEmbedder::new(16);
        for bytes in [&b"hello, world"[..], b"", b"\x89PNG\r\n\x1a\nbroken"] {
            assert!(matches!(embedder.embed(bytes), Err(EmbedError::Invalid(_))));
        }
    }

    #[test]
    fn a_flat_image_still_has_a_vector() {
        let embedder = ImageEmbedder::new(32);
        let gray = embedder.embed(&png(5, 5, |_, _| [128, 128, 128])).unwrap();
        assert!((dot(&gray, &gray) - 1.0).abs() < 1e-4);
    }
}
