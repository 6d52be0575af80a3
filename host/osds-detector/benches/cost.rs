//! The detector's cost on a monitor-sized network (≈1,400 stations): per frame, decoding one GIF at every
//! station's pixel and one detector step (trigger, association, location, magnitude, lifecycle) through a
//! synthetic M7.4 earthquake; and one location on its own. Prints percentiles; asserts nothing.
//!
//! `cargo bench -p osds-detector --bench cost` (release). Results are recorded in BENCHMARKS.md.

use osds_detector::detector::{Detector, DetectorConfig, Station};
use osds_detector::geo::distance_km;
use osds_detector::kmoni::{self, Image, SURFACE_INTENSITY};
use osds_detector::locate::{Arrival, Pick, Quiet, locate};
use osds_detector::synthetic::{Faults, Quake, frames, grid_network};
use osds_detector::traveltime::Model;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const SECONDS: u64 = 150;

fn percentiles(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{label:<34} n={:<5} mean {:>9.3} ms  p50 {:>9.3} ms  p99 {:>9.3} ms  max {:>9.3} ms",
        samples.len(),
        mean.as_secs_f64() * 1e3,
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3,
    );
}

fn main() {
    // A grid over central Japan, one station per pixel, about the size of the real network.
    let mut taken = HashSet::new();
    let mut stations = Vec::new();
    let mut pixels = Vec::new();
    for p in grid_network(37.0, 137.5, 590.0, 28.0, |_, _| true) {
        let pixel = kmoni::synthetic_pixel(p.latitude, p.longitude);
        if taken.insert(pixel) {
            pixels.push(pixel);
            stations.push(Station {
                code: format!("B{:04}", stations.len()),
                name: None,
                latitude: p.latitude,
                longitude: p.longitude,
            });
        }
    }
    let positions: Vec<_> = stations
        .iter()
        .map(|s| osds_detector::trigger::StationPosition {
            latitude: s.latitude,
            longitude: s.longitude,
        })
        .collect();
    let quake = Quake {
        latitude: 37.495,
        longitude: 137.270,
        depth_km: 16.0,
        mw: 7.4,
        origin: 20.0,
    };
    let faults = Faults {
        dropout: 0.02,
        ..Faults::default()
    };
    let values = frames(&Model::jma2001(), &[quake], &positions, SECONDS, &faults, 7);
    println!(
        "detector benchmark: {} stations, {SECONDS} frames, Noto-like M7.4 at frame 20",
        stations.len()
    );

    let started = Instant::now();
    let gifs: Vec<Vec<u8>> = values
        .iter()
        .map(|frame| {
            let at: Vec<_> = pixels.iter().copied().zip(frame.iter().copied()).collect();
            kmoni::render(SURFACE_INTENSITY, &at)
        })
        .collect();
    println!(
        "rendered {} GIFs in {:.1} ms (not part of the detector's cost)",
        gifs.len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    let mut decode = Vec::new();
    let mut decoded = Vec::new();
    for gif in &gifs {
        let t = Instant::now();
        let image = Image::decode(gif).expect("a rendered GIF decodes");
        let sampled = image.sample(SURFACE_INTENSITY, &pixels);
        decode.push(t.elapsed());
        decoded.push(sampled);
    }
    percentiles("decode GIF + sample all stations", decode);

    let mut detector = Detector::new(stations.clone(), DetectorConfig::default());
    let (mut quiet, mut event, mut reports) = (Vec::new(), Vec::new(), 0);
    for (n, frame) in decoded.iter().enumerate() {
        let t = Instant::now();
        let out = detector.step(1_700_000_000_000 + n as i64 * 1000, frame);
        let spent = t.elapsed();
        reports += out.len();
        if (n as f64) < quake.origin {
            quiet.push(spent);
        } else {
            event.push(spent);
        }
    }
    percentiles("detector step, before the quake", quiet);
    percentiles("detector step, during the quake", event);
    println!("reports issued: {reports}");

    let model = Model::jma2001();
    for n_picks in [10, 50, 200] {
        let mut near: Vec<_> = stations
            .iter()
            .map(|s| {
                let d = distance_km(quake.latitude, quake.longitude, s.latitude, s.longitude);
                (d, s)
            })
            .collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0));
        let picks: Vec<Pick> = near[..n_picks]
            .iter()
            .map(|(d, s)| Pick {
                arrival: Arrival::P,
                latitude: s.latitude,
                longitude: s.longitude,
                at: model.p(*d, quake.depth_km).floor() + 0.5,
            })
            .collect();
        let now = picks.iter().map(|p| p.at).fold(0.0, f64::max) + 0.5;
        let quiet: Vec<Quiet> = near[n_picks..]
            .iter()
            .filter(|(d, _)| *d < 300.0)
            .map(|(_, s)| Quiet {
                latitude: s.latitude,
                longitude: s.longitude,
            })
            .collect();
        let mut samples = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            let h = locate(&model, &picks, &quiet, now).expect("located");
            samples.push(t.elapsed());
            std::hint::black_box(h);
        }
        percentiles(
            &format!("one location, {n_picks} picks, {} quiet", quiet.len()),
            samples,
        );
    }
}
