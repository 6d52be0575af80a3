//! Wasm cost: the same decoder called as a component, the way the host calls it (`osds_runtime` runtime,
//! the decoders embedded in the binary, warm instances reused between frames under the memory limit and the
//! epoch deadline), and compiled natively (`wolfx-core`, the library every decoder component wraps), on the same frames.

use crate::harness::{Summary, summarize};
use anyhow::{Context, Result, bail};
use osds_runtime::decoder_set::DecoderSet;
use osds_runtime::decoding::Outcome;
use osds_runtime::{Limits, Runtime};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wolfx_core::Decoded;

/// One upstream frame and the channel whose decoder it goes to.
struct Frame {
    label: String,
    channel: &'static wolfx_core::Channel,
    bytes: Vec<u8>,
}

pub struct WasmCost {
    pub frames: usize,
    pub calls: usize,
    pub native: Summary,
    pub wasm: Summary,
    pub native_mean_ns: f64,
    pub wasm_mean_ns: f64,
    /// A call on an empty payload: instantiation, the call and the error return, with no decoding to speak of.
    pub wasm_empty: Summary,
    pub native_empty: Summary,
    /// Frames whose component result differs from the native one (should be none).
    pub disagreements: Vec<String>,
    pub load_secs: f64,
}

fn channel_for_tag(tag: &str) -> Option<&'static wolfx_core::Channel> {
    wolfx_core::CHANNELS.iter().find(|c| c.type_tag == tag)
}

fn channel_for_source(source: &str) -> Option<&'static wolfx_core::Channel> {
    wolfx_core::CHANNELS.iter().find(|c| c.source == source)
}

/// The decoder fixtures (`tests/fixtures/<source>/*.json`) and the upstream samples (one frame a line).
fn load_frames(fixtures: &Path, samples: Option<&Path>) -> Result<Vec<Frame>> {
    let mut frames = Vec::new();
    for channel in wolfx_core::CHANNELS.iter() {
        let dir = fixtures.join(channel.source);
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("read {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            frames.push(Frame {
                label: format!(
                    "{}/{}",
                    channel.source,
                    path.file_name().unwrap_or_default().to_string_lossy()
                ),
                channel,
                bytes: std::fs::read(&path)?,
            });
        }
    }
    if let Some(samples) = samples {
        let text = std::fs::read_to_string(samples)
            .with_context(|| format!("read {}", samples.display()))?;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let tag = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["type"].as_str().map(str::to_string))
                .unwrap_or_default();
            // Heartbeats go to any decoder; the host uses the first.
            let channel = channel_for_tag(&tag).unwrap_or(&wolfx_core::CHANNELS[0]);
            frames.push(Frame {
                label: format!("samples:{} ({tag})", n + 1),
                channel,
                bytes: line.as_bytes().to_vec(),
            });
        }
    }
    if frames.is_empty() {
        bail!("no frames found in {}", fixtures.display());
    }
    Ok(frames)
}

/// Times `rounds` passes over every frame with both decoders, interleaved per frame so that a busy moment
/// of the machine hits both alike.
pub fn run(fixtures: &Path, samples: Option<&Path>, rounds: usize) -> Result<WasmCost> {
    let frames = load_frames(fixtures, samples)?;
    let started = Instant::now();
    let runtime = Runtime::new(Limits::default())?;
    let decoders = DecoderSet::embedded(&runtime)?;
    let load_secs = started.elapsed().as_secs_f64();
    let components: Vec<_> = frames
        .iter()
        .map(|f| {
            decoders
                .for_source(f.channel.source)
                .with_context(|| format!("no embedded decoder for {}", f.channel.source))
        })
        .collect::<Result<_>>()?;

    // Same outcome both ways (a report, a control, or a rejection of the same kind).
    let mut disagreements = Vec::new();
    for (frame, component) in frames.iter().zip(&components) {
        let native = wolfx_core::decode(frame.channel, &frame.bytes);
        // The component through the one decode step, as ingestion calls it.
        let wasm = osds_runtime::decoding::decode_with(component.clone(), &frame.bytes);
        let same = match (&native, &wasm) {
            (Ok(Decoded::Report(a)), Outcome::Report { report, .. }) => **report == *a,
            (Ok(Decoded::Control(a)), Outcome::Control { control, .. }) => control == a,
            (Err(a), Outcome::Failed { kind, .. }) => {
                serde_json::to_value(a.kind).ok() == serde_json::to_value(kind).ok()
            }
            _ => false,
        };
        if !same {
            disagreements.push(frame.label.clone());
        }
    }

    let mut native = Vec::with_capacity(frames.len() * rounds);
    let mut wasm = Vec::with_capacity(frames.len() * rounds);
    let (mut native_empty, mut wasm_empty) = (Vec::new(), Vec::new());
    // Warm-up pass, not counted.
    for (frame, component) in frames.iter().zip(&components) {
        let _ = std::hint::black_box(wolfx_core::decode(frame.channel, &frame.bytes));
        let _ = std::hint::black_box(component.decode(&frame.bytes));
    }
    let empty_channel = channel_for_source("cq").unwrap_or(&wolfx_core::CHANNELS[0]);
    let empty_component = decoders
        .for_source(empty_channel.source)
        .context("no cq decoder")?;
    for _ in 0..rounds {
        for (frame, component) in frames.iter().zip(&components) {
            let at = Instant::now();
            let _ = std::hint::black_box(wolfx_core::decode(
                frame.channel,
                std::hint::black_box(&frame.bytes),
            ));
            native.push(at.elapsed());
            let at = Instant::now();
            let _ = std::hint::black_box(component.decode(std::hint::black_box(&frame.bytes)));
            wasm.push(at.elapsed());
        }
        let at = Instant::now();
        let _ = std::hint::black_box(wolfx_core::decode(empty_channel, std::hint::black_box(b"")));
        native_empty.push(at.elapsed());
        let at = Instant::now();
        let _ = std::hint::black_box(empty_component.decode(std::hint::black_box(b"")));
        wasm_empty.push(at.elapsed());
    }
    let mean_ns = |samples: &[Duration]| {
        samples.iter().map(|d| d.as_nanos() as f64).sum::<f64>() / samples.len().max(1) as f64
    };
    Ok(WasmCost {
        frames: frames.len(),
        calls: native.len(),
        native_mean_ns: mean_ns(&native),
        wasm_mean_ns: mean_ns(&wasm),
        native: summarize(&native).context("no samples")?,
        wasm: summarize(&wasm).context("no samples")?,
        native_empty: summarize(&native_empty).context("no samples")?,
        wasm_empty: summarize(&wasm_empty).context("no samples")?,
        disagreements,
        load_secs,
    })
}

pub fn print(cost: &WasmCost) {
    let ns = |ms: f64| ms * 1_000_000.0;
    println!();
    println!(
        "wasm cost: {} frames x {} rounds = {} calls each way (component load: {:.2} s for the embedded decoders)",
        cost.frames,
        cost.calls / cost.frames.max(1),
        cost.calls,
        cost.load_secs
    );
    println!("{:-<86}", "");
    println!(
        "{:<40} {:>10} {:>10} {:>10} {:>10}",
        "ns per frame", "mean", "p50", "p99", "max"
    );
    for (name, s, mean) in [
        (
            "native (wolfx-core)",
            cost.native,
            Some(cost.native_mean_ns),
        ),
        (
            "wasm component (as the host calls it)",
            cost.wasm,
            Some(cost.wasm_mean_ns),
        ),
        ("native, empty payload", cost.native_empty, None),
        (
            "wasm, empty payload (per-call fixed)",
            cost.wasm_empty,
            None,
        ),
    ] {
        println!(
            "{name:<40} {:>10} {:>10.0} {:>10.0} {:>10.0}",
            mean.map_or("-".to_string(), |m| format!("{m:.0}")),
            ns(s.p50),
            ns(s.p99),
            ns(s.max)
        );
    }
    println!(
        "{:<40} mean {:.1}x, p50 {:.1}x",
        "ratio wasm / native",
        cost.wasm_mean_ns / cost.native_mean_ns,
        cost.wasm.p50 / cost.native.p50
    );
    println!(
        "{:<40} {:.0} ns of the wasm p50 {:.0} ns ({:.0} %)",
        "per-call fixed cost (empty payload)",
        ns(cost.wasm_empty.p50),
        ns(cost.wasm.p50),
        100.0 * cost.wasm_empty.p50 / cost.wasm.p50
    );
    if cost.disagreements.is_empty() {
        println!("{:<40} none", "frames where wasm != native");
    } else {
        println!(
            "{:<40} {}",
            "frames where wasm != native",
            cost.disagreements.join(", ")
        );
    }
    println!("{:-<86}", "");
}
