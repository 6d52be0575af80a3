//! The monitor images' colour scale: palette RGB → HSV → a scale position p by the published polynomials,
//! then realtime intensity, PGA, PGV and PGD. A transparent pixel is no data (`None`), never 0.

/// A palette entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgba {
    pub r: u8,
    pub g: u8,
    pub b: u8,
    pub a: u8,
}

/// Hue in [0, 1), saturation and value in [0, 1].
fn hsv(c: Rgba) -> (f64, f64, f64) {
    let (r, g, b) = (
        f64::from(c.r) / 255.0,
        f64::from(c.g) / 255.0,
        f64::from(c.b) / 255.0,
    );
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let delta = max - min;
    let s = if max == 0.0 { 0.0 } else { delta / max };
    let h = if delta == 0.0 {
        0.0
    } else if max == r {
        ((g - b) / delta).rem_euclid(6.0) / 6.0
    } else if max == g {
        ((b - r) / delta + 2.0) / 6.0
    } else {
        ((r - g) / delta + 4.0) / 6.0
    };
    (h.rem_euclid(1.0), s, max)
}

/// The scale position p ≥ 0 of a colour, or `None` for a transparent pixel.
pub fn position(c: Rgba) -> Option<f64> {
    if c.a != 255 {
        return None;
    }
    let (h, s, v) = hsv(c);
    let p = if v <= 0.1 || s <= 0.75 {
        0.0
    } else if h > 0.1476 {
        280.31 * h.powi(6) - 916.05 * h.powi(5) + 1142.6 * h.powi(4) - 709.95 * h.powi(3)
            + 234.65 * h.powi(2)
            - 40.27 * h
            + 3.2217
    } else if h > 0.001 {
        151.4 * h.powi(4) - 49.32 * h.powi(3) + 6.753 * h.powi(2) - 2.481 * h + 0.9033
    } else {
        -0.005171 * v.powi(2) - 0.3282 * v + 1.2236
    };
    Some(p.max(0.0))
}

/// Realtime intensity of a scale position.
pub fn intensity(p: f64) -> f64 {
    10.0 * p - 3.0
}

/// Peak ground acceleration (gal) of a scale position.
pub fn pga_gal(p: f64) -> f64 {
    10f64.powf(5.0 * p - 2.0)
}

/// Peak ground velocity (cm/s) of a scale position.
pub fn pgv(p: f64) -> f64 {
    10f64.powf(5.0 * p - 3.0)
}

/// Peak ground displacement (cm) of a scale position.
pub fn pgd(p: f64) -> f64 {
    10f64.powf(5.0 * p - 4.0)
}

/// The colour of full saturation and value whose decoded intensity is nearest `target` (−3…7): how synthetic
/// images are rendered, so the decoder is checked against its own inverse.
pub fn render(target: f64) -> Rgba {
    let target = target.clamp(-3.0, 7.0);
    let mut best = (
        f64::INFINITY,
        Rgba {
            r: 0,
            g: 0,
            b: 205,
            a: 255,
        },
    );
    // Hue from blue (0.67) down to red (0); past pure red the scale goes on by darkening (value), as the
    // polynomial for h ≤ 0.001 reads it.
    let hues = (0..=6700).map(|step| (0.67 - f64::from(step) * 0.0001, 1.0));
    let darker_reds = (0..=890).map(|step| (0.0, 1.0 - f64::from(step) * 0.001));
    for (h, v) in hues.chain(darker_reds) {
        let c = from_hsv(h, 1.0, v);
        if let Some(p) = position(c) {
            let error = (intensity(p) - target).abs();
            if error < best.0 {
                best = (error, c);
            }
        }
    }
    best.1
}

fn from_hsv(h: f64, s: f64, v: f64) -> Rgba {
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - f * s), v * (1.0 - (1.0 - f) * s));
    let (r, g, b) = match (i as i64).rem_euclid(6) {
        0 => (v, t, p),
        1 => (q, v, p),
        2 => (p, v, t),
        3 => (p, q, v),
        4 => (t, p, v),
        _ => (v, p, q),
    };
    let byte = |x: f64| (x * 255.0).round().clamp(0.0, 255.0) as u8;
    Rgba {
        r: byte(r),
        g: byte(g),
        b: byte(b),
        a: 255,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(r: u8, g: u8, b: u8) -> Rgba {
        Rgba { r, g, b, a: 255 }
    }

    #[test]
    fn published_anchor_colours_decode_to_their_intensities() {
        // Points of the published 101-step table.
        for (colour, expected) in [
            (rgb(0, 0, 205), -3.0),
            (rgb(63, 250, 54), 0.0),
            (rgb(255, 255, 0), 2.0),
            (rgb(245, 0, 0), 6.0),
            (rgb(170, 0, 0), 7.0),
        ] {
            let i = intensity(position(colour).unwrap());
            assert!(
                (i - expected).abs() <= 0.15,
                "{colour:?}: {i} vs {expected}"
            );
        }
    }

    #[test]
    fn transparent_is_no_data_not_zero() {
        assert_eq!(
            position(Rgba {
                r: 255,
                g: 0,
                b: 0,
                a: 0
            }),
            None
        );
    }

    #[test]
    fn rendering_and_decoding_agree_to_a_tenth() {
        for tenth in -25..=65 {
            let target = f64::from(tenth) / 10.0;
            let decoded = intensity(position(render(target)).unwrap());
            assert!(
                (decoded - target).abs() <= 0.06,
                "{target}: decoded {decoded}"
            );
        }
    }

    #[test]
    fn values_follow_the_scale_position() {
        assert!((pga_gal(0.6) - 10.0).abs() < 1e-9);
        assert!((pgv(0.6) - 1.0).abs() < 1e-9);
        assert!((pgd(0.6) - 0.1).abs() < 1e-9);
        assert!((intensity(0.3) - 0.0).abs() < 1e-12);
    }
}
