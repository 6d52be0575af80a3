//! `osds components new NAME`: a decoder project that builds and passes its tests wherever it is written: the
//! manifest (the SDK by path), a decoder for a channel `SOURCE` in `src/lib.rs`, a fixture frame, native tests
//! of what it reads and a snapshot of the whole report. docs/decoders.md walks through the same files.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};

/// The decoder SDK of the clone this binary was built from, if it is still there.
fn built_in_sdk() -> Option<PathBuf> {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../components/decoder-sdk"
    ))
    .canonicalize()
    .ok()
}

/// Writes the project `name` for the channel `source` into `parent/name`; returns where.
pub fn create(
    name: &str,
    source: &str,
    parent: &Path,
    sdk: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let valid_name = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid_name {
        bail!(
            "`{name}` is not a crate name: lowercase letters, digits, `-` and `_`, starting with a letter"
        );
    }
    let valid_source = source.starts_with(|c: char| c.is_ascii_lowercase())
        && source
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !valid_source {
        bail!(
            "`{source}` is not a source: lowercase letters and digits, starting with a letter (e.g. `cwa`)"
        );
    }
    let sdk = match sdk {
        Some(sdk) => sdk
            .canonicalize()
            .with_context(|| format!("the decoder SDK at {}", sdk.display()))?,
        None => built_in_sdk().context(
            "the decoder SDK of the clone this binary was built from is gone: name one with --sdk \
             (components/decoder-sdk of a clone)",
        )?,
    };
    anyhow::ensure!(
        sdk.join("Cargo.toml").is_file(),
        "{} holds no crate: --sdk names components/decoder-sdk of a clone",
        sdk.display()
    );
    let dir = parent.join(name);
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!(
            "{} exists and is not empty: nothing was written",
            dir.display()
        );
    }
    let sdk_path = sdk.to_str().context("the SDK's path is not UTF-8")?;
    let files = [
        ("Cargo.toml", MANIFEST),
        ("src/lib.rs", LIB),
        ("tests/decode.rs", TESTS),
        ("fixtures/SOURCE/frame.json", FRAME),
        (".gitignore", "/target\n"),
    ];
    for (path, text) in files {
        let path = dir.join(path.replace("SOURCE", source));
        std::fs::create_dir_all(path.parent().expect("a file in a folder"))
            .with_context(|| format!("create {}", dir.display()))?;
        let text = text
            .replace("{name}", name)
            .replace("{crate}", &name.replace('-', "_"))
            .replace("{source}", source)
            .replace("{sdk}", sdk_path);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(dir)
}

const MANIFEST: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

# A project of its own, wherever it is.
[workspace]

[lib]
# cdylib: the component (`cargo build --release --target wasm32-wasip2`); rlib: the tests (`cargo test`).
crate-type = ["cdylib", "rlib"]

[dependencies]
osds-decoder-sdk = { path = "{sdk}" }

[profile.release]
opt-level = "s"
panic = "abort"
"#;

const LIB: &str = r#"//! The decoder of channel `{source}`: frames of type `{source}_eew` from the relay's `/{source}_eew`.

use osds_decoder_sdk::{DecodeError, Decoded, Decoder, Info, Report, fields};

pub struct ChannelDecoder;

impl Decoder for ChannelDecoder {
    fn info() -> Info {
        Info {
            name: "{name}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            source: "{source}".into(),
            claims: vec!["{source}_eew".into()],
            upstream_path: "/{source}_eew".into(),
            query_command: "query_{source}eew".into(),
        }
    }

    fn decode(payload: &[u8]) -> Result<Decoded, DecodeError> {
        let frame = fields::object(payload)?;
        if let Some(control) = fields::control(&frame)? {
            return Ok(Decoded::Control(control));
        }
        let id = fields::required_id(&frame, "ID")?;
        Ok(Decoded::Report(Report {
            event_id: id.clone(),
            upstream_event_id: id,
            revision: fields::required_integer(&frame, "ReportNum")?,
            issued_at: fields::time(&frame, "ReportTime")?,
            origin_at: fields::time(&frame, "OriginTime")?,
            epicenter: fields::text(&frame, "HypoCenter")?,
            latitude: fields::number(&frame, "Latitude")?,
            longitude: fields::number(&frame, "Longitude")?,
            depth_km: fields::number(&frame, "Depth")?,
            magnitude: fields::number(&frame, "Magnitude")?,
            max_intensity: fields::intensity(&frame, "MaxIntensity")?,
            is_final: fields::flag(&frame, &["isFinal"])?,
            is_cancelled: fields::flag(&frame, &["isCancel"])?,
            is_test: false,
        }))
    }
}

osds_decoder_sdk::export_decoder!(ChannelDecoder);
"#;

const TESTS: &str = r##"//! The decoder on its fixture, natively (`cargo test`): what it reads of a frame, a heartbeat, and the whole
//! report against its snapshot (`tests/snapshots/frame.json`, written by the first run; after an intended
//! change, `UPDATE_SNAPSHOTS=1 cargo test` writes it again).

use osds_decoder_sdk::serde_json::{self, Value};
use osds_decoder_sdk::{Decoded, Decoder, Report};
use {crate}::ChannelDecoder;

fn report(frame: &str) -> Report {
    let path = format!("{}/fixtures/{source}/{frame}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    match ChannelDecoder::decode(&bytes) {
        Ok(Decoded::Report(report)) => report,
        other => panic!("{path}: not a report: {other:?}"),
    }
}

#[test]
fn the_fixture_is_read_field_by_field() {
    let report = report("frame.json");
    assert_eq!(report.event_id, "2026.0042");
    assert_eq!(report.revision, 2);
    assert_eq!(report.origin_at.as_deref(), Some("2026-11-23T01:59:58Z"));
    assert_eq!(report.depth_km, None, "null is absent, never 0");
    assert!(report.is_final);
}

#[test]
fn a_heartbeat_is_a_control_frame() {
    let decoded = ChannelDecoder::decode(br#"{"type":"heartbeat","ver":10,"id":"x","timestamp":1}"#);
    assert!(matches!(decoded, Ok(Decoded::Control(_))), "{decoded:?}");
}

#[test]
fn the_report_is_its_snapshot() {
    let actual = serde_json::to_value(report("frame.json")).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/snapshots/frame.json");
    let written = std::fs::read_to_string(path).ok();
    if written.is_none() || std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string_pretty(&actual).unwrap() + "\n").unwrap();
        eprintln!("wrote {path}");
        return;
    }
    let expected: Value = serde_json::from_str(&written.unwrap()).unwrap();
    assert_eq!(actual, expected, "the report is not its snapshot ({path})");
}
"##;

const FRAME: &str = r#"{"type":"{source}_eew","ID":"2026.0042","ReportNum":2,"ReportTime":"2026-11-23 10:00:05","OriginTime":"2026-11-23 09:59:58","HypoCenter":"Demo Bay","Latitude":"24.5","Longitude":121.9,"Depth":null,"Magnitude":5.2,"MaxIntensity":4,"isFinal":true}
"#;
