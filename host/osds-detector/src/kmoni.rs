//! The NIED strong-motion monitor images ("kmoni"): layer names, the path of one observation second's image,
//! reading a palette GIF at station pixels (colour → value by the polynomial method; transparent = no data),
//! and rendering synthetic images in the same layout.

use crate::colour::{self, Rgba};
use std::borrow::Cow;
use std::fmt;

/// Width and height of the monitor images.
pub const WIDTH: u16 = 352;
pub const HEIGHT: u16 = 400;

/// The default image server.
pub const DEFAULT_BASE_URL: &str = "http://www.kmoni.bosai.go.jp";

/// Japan Standard Time, in which the images are named.
const JST_OFFSET_MS: i64 = 9 * 3_600_000;

/// What a layer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quantity {
    /// `jma`: realtime seismic intensity.
    Intensity,
    /// `acmap`: peak ground acceleration (gal).
    Pga,
    /// `vcmap`: peak ground velocity (cm/s).
    Pgv,
    /// `dcmap`: peak ground displacement (cm).
    Pgd,
}

/// One image layer: a quantity at the surface (`_s`) or in the borehole (`_b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Layer {
    pub quantity: Quantity,
    pub borehole: bool,
}

/// The layer the detector triggers on.
pub const SURFACE_INTENSITY: Layer = Layer {
    quantity: Quantity::Intensity,
    borehole: false,
};

impl Layer {
    /// Parses `jma_s`, `acmap_b`, ...
    pub fn parse(text: &str) -> Result<Layer, String> {
        let (name, place) = text
            .split_once('_')
            .ok_or_else(|| format!("`{text}` is not a layer like jma_s or acmap_b"))?;
        let quantity = match name {
            "jma" => Quantity::Intensity,
            "acmap" => Quantity::Pga,
            "vcmap" => Quantity::Pgv,
            "dcmap" => Quantity::Pgd,
            _ => return Err(format!("unknown layer `{name}` (jma, acmap, vcmap, dcmap)")),
        };
        let borehole = match place {
            "s" => false,
            "b" => true,
            _ => {
                return Err(format!(
                    "`{text}`: the place is s (surface) or b (borehole)"
                ));
            }
        };
        Ok(Layer { quantity, borehole })
    }

    /// The station metric key of the public API (`surface:pgaGal`, `underground:intensity`, ...).
    pub fn metric(&self) -> String {
        let place = if self.borehole {
            "underground"
        } else {
            "surface"
        };
        let quantity = match self.quantity {
            Quantity::Intensity => "intensity",
            Quantity::Pga => "pgaGal",
            Quantity::Pgv => "pgvCms",
            Quantity::Pgd => "pgdCm",
        };
        format!("{place}:{quantity}")
    }

    /// The value a scale position stands for on this layer.
    pub fn value(&self, p: f64) -> f64 {
        match self.quantity {
            Quantity::Intensity => colour::intensity(p),
            Quantity::Pga => colour::pga_gal(p),
            Quantity::Pgv => colour::pgv(p),
            Quantity::Pgd => colour::pgd(p),
        }
    }

    /// The scale position of a value on this layer (the inverse of [`Layer::value`]).
    pub fn position(&self, value: f64) -> f64 {
        let log = |v: f64, shift: f64| (v.max(1e-9).log10() + shift) / 5.0;
        match self.quantity {
            Quantity::Intensity => (value + 3.0) / 10.0,
            Quantity::Pga => log(value, 2.0),
            Quantity::Pgv => log(value, 3.0),
            Quantity::Pgd => log(value, 4.0),
        }
    }

    /// Path of the image of the observation second `at_ms` (Unix ms) under the server's base URL.
    pub fn image_path(&self, at_ms: i64) -> String {
        let jst = chrono::DateTime::from_timestamp_millis(at_ms + JST_OFFSET_MS)
            .unwrap_or_default()
            .naive_utc();
        format!(
            "data/map_img/RealTimeImg/{self}/{}/{}.{self}.gif",
            jst.format("%Y%m%d"),
            jst.format("%Y%m%d%H%M%S")
        )
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.quantity {
            Quantity::Intensity => "jma",
            Quantity::Pga => "acmap",
            Quantity::Pgv => "vcmap",
            Quantity::Pgd => "dcmap",
        };
        write!(f, "{name}_{}", if self.borehole { "b" } else { "s" })
    }
}

/// How long to wait before asking again for an image that is not out yet, `since_first_ask_ms` after it was
/// first asked for: every quarter second for the first second (an image is published within a second or two
/// of its second, and one that is late should not cost a whole second more), then every second (an outage).
/// The live fetcher follows it, and the accuracy benchmark's feed models it.
pub fn retry_in_ms(since_first_ask_ms: i64) -> i64 {
    const QUICK_MS: i64 = 250;
    const QUICK_FOR_MS: i64 = 1_000;
    const SLOW_MS: i64 = 1_000;
    if since_first_ask_ms < QUICK_FOR_MS {
        QUICK_MS
    } else {
        SLOW_MS
    }
}

/// Where the monitor says which second its latest image is of, relative to its base URL: `{"latest_time":
/// "2024/01/01 16:10:22", "request_time": "2024/01/01 16:10:23", ...}`, times in JST.
pub const LATEST_PATH: &str = "webservice/server/pros/latest.json";

/// The observation second (Unix ms) of the monitor's latest image, from its `latest.json`; `None` when the
/// answer has none.
pub fn parse_latest(json: &[u8]) -> Option<i64> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    let text = value.get("latest_time")?.as_str()?;
    let jst = chrono::NaiveDateTime::parse_from_str(text.trim(), "%Y/%m/%d %H:%M:%S").ok()?;
    Some(jst.and_utc().timestamp_millis() - JST_OFFSET_MS)
}

/// A `latest.json` answer as the monitor gives it, for a latest image of `latest_ms` asked for at `now_ms`.
pub fn latest_json(latest_ms: i64, now_ms: i64) -> String {
    let jst = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms + JST_OFFSET_MS)
            .unwrap_or_default()
            .naive_utc()
            .format("%Y/%m/%d %H:%M:%S")
            .to_string()
    };
    serde_json::json!({
        "security": { "realm": "/webservice/server/pros/latest/", "hash": "0" },
        "latest_time": jst(latest_ms),
        "request_time": jst(now_ms),
        "result": { "status": "success", "message": "" },
    })
    .to_string()
}

/// Why an image could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("not a readable GIF: {0}")]
    Gif(#[from] gif::DecodingError),
    #[error("the GIF has no image")]
    Empty,
    #[error("the GIF has no palette")]
    NoPalette,
}

/// One observation second as it arrived: the image of each layer that came, and the layers that did not (a
/// gap is recorded, never filled in).
#[derive(Debug, Clone)]
pub struct Observation {
    /// Observation second (Unix ms, a whole second).
    pub at_ms: i64,
    /// When the images arrived (Unix ms).
    pub received_at: i64,
    /// The GIF of each layer that arrived.
    pub images: Vec<(Layer, Vec<u8>)>,
    /// Layers whose image did not arrive.
    pub missing: Vec<Layer>,
}

impl Observation {
    pub fn image(&self, layer: Layer) -> Option<&[u8]> {
        self.images
            .iter()
            .find(|(l, _)| *l == layer)
            .map(|(_, bytes)| bytes.as_slice())
    }
}

/// A decoded palette image: the first frame's colour indices, where it sits on the canvas, and its palette
/// with transparency resolved.
#[derive(Debug, Clone)]
pub struct Image {
    left: u32,
    top: u32,
    width: u32,
    height: u32,
    indices: Vec<u8>,
    palette: Vec<Rgba>,
}

impl Image {
    /// Reads the first image of a GIF; canvas outside it, and transparent pixels, have no data.
    pub fn decode(bytes: &[u8]) -> Result<Image, ImageError> {
        let mut options = gif::DecodeOptions::new();
        options.set_color_output(gif::ColorOutput::Indexed);
        // A monitor image is 140 kB of indices; anything far larger is not one.
        options.set_memory_limit(gif::MemoryLimit::Bytes(
            std::num::NonZeroU64::new(8 << 20).expect("non-zero"),
        ));
        let mut decoder = options.read_info(bytes)?;
        let global = decoder.global_palette().map(<[u8]>::to_vec);
        let frame = decoder.read_next_frame()?.ok_or(ImageError::Empty)?;
        let table = frame
            .palette
            .clone()
            .or(global)
            .ok_or(ImageError::NoPalette)?;
        let no_data = Rgba {
            r: 0,
            g: 0,
            b: 0,
            a: 0,
        };
        let mut palette: Vec<Rgba> = table
            .chunks_exact(3)
            .map(|c| Rgba {
                r: c[0],
                g: c[1],
                b: c[2],
                a: 255,
            })
            .collect();
        // An index past the table is no data too.
        palette.resize(256, no_data);
        if let Some(t) = frame.transparent {
            palette[usize::from(t)] = no_data;
        }
        Ok(Image {
            left: u32::from(frame.left),
            top: u32::from(frame.top),
            width: u32::from(frame.width),
            height: u32::from(frame.height),
            indices: frame.buffer.to_vec(),
            palette,
        })
    }

    /// The scale position at a canvas pixel, or `None` off the image or on a transparent pixel.
    pub fn position_at(&self, x: u32, y: u32) -> Option<f64> {
        let (x, y) = (x.checked_sub(self.left)?, y.checked_sub(self.top)?);
        if x >= self.width || y >= self.height {
            return None;
        }
        let index = *self.indices.get((y * self.width + x) as usize)?;
        colour::position(self.palette[usize::from(index)])
    }

    /// The layer's values at the given pixels (`None`: no data).
    pub fn sample(&self, layer: Layer, pixels: &[(u32, u32)]) -> Vec<Option<f64>> {
        pixels
            .iter()
            .map(|&(x, y)| self.position_at(x, y).map(|p| layer.value(p)))
            .collect()
    }
}

/// Pixel of a synthetic station at `latitude`, `longitude` on the monitor images: a plain equirectangular fit
/// of the images' extent (about 128–146°E, 30–46°N), for synthetic station tables.
pub fn synthetic_pixel(latitude: f64, longitude: f64) -> (u32, u32) {
    let x = ((longitude - 128.0) * 19.5)
        .round()
        .clamp(0.0, f64::from(WIDTH - 1));
    let y = ((46.2 - latitude) * 25.0)
        .round()
        .clamp(0.0, f64::from(HEIGHT - 1));
    (x as u32, y as u32)
}

/// Steps of the rendered scale: intensity −3.0 … 7.0 in 0.1 (101 colours), then one transparent entry.
const STEPS: usize = 101;

/// The rendered scale's palette (RGB triples), found once: each colour is a search along the scale.
fn scale_palette() -> &'static [u8] {
    static PALETTE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PALETTE.get_or_init(|| {
        let mut palette = Vec::with_capacity((STEPS + 1) * 3);
        for step in 0..STEPS {
            let c = colour::render(-3.0 + step as f64 / 10.0);
            palette.extend_from_slice(&[c.r, c.g, c.b]);
        }
        palette.extend_from_slice(&[255, 255, 255]);
        palette
    })
}

/// Renders a monitor-layout GIF of `layer` with each station's value at its pixel (`None`: left transparent),
/// quantised to the 0.1-intensity steps of the scale.
pub fn render(layer: Layer, stations: &[((u32, u32), Option<f64>)]) -> Vec<u8> {
    let palette = scale_palette();
    let transparent = STEPS as u8;
    let mut indices = vec![transparent; usize::from(WIDTH) * usize::from(HEIGHT)];
    for &((x, y), value) in stations {
        if x >= u32::from(WIDTH) || y >= u32::from(HEIGHT) {
            continue;
        }
        if let Some(value) = value {
            let intensity = colour::intensity(layer.position(value)).clamp(-3.0, 7.0);
            let step = ((intensity + 3.0) * 10.0).round() as u8;
            indices[(y * u32::from(WIDTH) + x) as usize] = step;
        }
    }
    let mut out = Vec::new();
    {
        let mut encoder =
            gif::Encoder::new(&mut out, WIDTH, HEIGHT, palette).expect("writing to memory");
        let frame = gif::Frame {
            width: WIDTH,
            height: HEIGHT,
            transparent: Some(transparent),
            buffer: Cow::Borrowed(&indices),
            ..gif::Frame::default()
        };
        encoder.write_frame(&frame).expect("writing to memory");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_parse_and_name_their_metric() {
        let layer = Layer::parse("acmap_s").unwrap();
        assert_eq!(layer.metric(), "surface:pgaGal");
        assert_eq!(layer.to_string(), "acmap_s");
        assert_eq!(
            Layer::parse("jma_b").unwrap().metric(),
            "underground:intensity"
        );
        assert!(Layer::parse("jma").is_err());
        assert!(Layer::parse("foo_s").is_err());
        assert!(Layer::parse("jma_x").is_err());
    }

    #[test]
    fn image_path_is_named_in_jst() {
        // 2024-01-01 16:10:22 JST = 07:10:22 UTC.
        let at = chrono::DateTime::parse_from_rfc3339("2024-01-01T07:10:22Z")
            .unwrap()
            .timestamp_millis();
        assert_eq!(
            SURFACE_INTENSITY.image_path(at),
            "data/map_img/RealTimeImg/jma_s/20240101/20240101161022.jma_s.gif"
        );
    }

    #[test]
    fn rendered_images_decode_to_the_values_within_a_step() {
        let stations = [
            ((10, 20), Some(-3.0)),
            ((100, 200), Some(0.0)),
            ((200, 300), Some(4.3)),
            ((351, 399), Some(7.0)),
            ((50, 50), None),
        ];
        let image = Image::decode(&render(SURFACE_INTENSITY, &stations)).unwrap();
        let pixels: Vec<_> = stations.iter().map(|s| s.0).collect();
        let values = image.sample(SURFACE_INTENSITY, &pixels);
        for ((_, expected), got) in stations.iter().zip(&values) {
            match (expected, got) {
                (Some(e), Some(g)) => assert!((e - g).abs() <= 0.1, "{e} decoded as {g}"),
                (None, None) => {}
                _ => panic!("{expected:?} decoded as {got:?}"),
            }
        }
        // The background is transparent: no data, never 0.
        assert_eq!(image.position_at(0, 0), None);
        assert_eq!(image.position_at(400, 0), None);
    }

    #[test]
    fn pga_layer_round_trips_through_the_scale() {
        let layer = Layer::parse("acmap_s").unwrap();
        let image = Image::decode(&render(layer, &[((5, 5), Some(250.0))])).unwrap();
        let pga = image.sample(layer, &[(5, 5)])[0].unwrap();
        // One 0.1 intensity step is 10^0.05 ≈ 12 % in acceleration.
        assert!((pga / 250.0 - 1.0).abs() < 0.13, "{pga}");
    }

    #[test]
    fn the_latest_image_time_reads_back_in_jst() {
        let at = 1_704_093_022_000; // 2024-01-01 16:10:22 JST
        let json = latest_json(at, at + 1_000);
        assert!(
            json.contains("\"latest_time\":\"2024/01/01 16:10:22\""),
            "{json}"
        );
        assert_eq!(parse_latest(json.as_bytes()), Some(at));
        assert_eq!(parse_latest(b"{\"latest_time\":\"soon\"}"), None);
        assert_eq!(parse_latest(b"<html>"), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Image::decode(b"not a gif").is_err());
        assert!(Image::decode(&[]).is_err());
    }
}
