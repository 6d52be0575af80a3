//! `osds decode`: decodes upstream frames from files through the loaded components and prints JSON.

use super::limits_args::LimitsArgs;
use osds_runtime::Runtime;
use osds_runtime::decoder_set::DecoderSet;
use osds_runtime::decoding::{self, Fallback, Outcome};
use osds_runtime::units;
use osds_runtime::units::is_control_tag;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use wolfx_core::Control;

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// Decode with the component that claims this upstream `type` instead of the frame's own `type`.
    #[arg(long = "type", value_name = "TAG")]
    pub type_tag: Option<String>,
    /// Load decoder components (`*.wasm`) from this directory instead of the built-in ones.
    #[arg(long, env = "OSDS_COMPONENTS_DIR", value_name = "DIR")]
    pub components_dir: Option<PathBuf>,
    /// Indent the JSON output.
    #[arg(long)]
    pub pretty: bool,
    #[command(flatten)]
    pub limits: LimitsArgs,
    /// Files holding one upstream frame each (exact bytes).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: DecodeArgs) -> anyhow::Result<ExitCode> {
    let runtime = Runtime::new(args.limits.limits())?;
    let decoders = DecoderSet::load(&runtime, args.components_dir.as_deref())?;
    let mut failed = false;
    let mut stdout = std::io::stdout().lock();
    for path in &args.files {
        let output = match std::fs::read(path) {
            Ok(bytes) => {
                let units = units::split(&bytes);
                let mut results: Vec<Value> = units
                    .iter()
                    .map(|unit| decode_unit(&decoders, args.type_tag.as_deref(), unit))
                    .collect();
                failed |= results.iter().any(|r| r.get("error").is_some());
                if results.len() == 1 {
                    results.remove(0)
                } else {
                    json!({ "items": results })
                }
            }
            Err(e) => {
                failed = true;
                json!({ "error": format!("cannot read {}: {e}", path.display()), "kind": "io" })
            }
        };
        let text = if args.pretty {
            serde_json::to_string_pretty(&output)
        } else {
            serde_json::to_string(&output)
        }?;
        writeln!(stdout, "{text}")?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Decodes one unit (the one decode step, `osds_runtime::decoding`) and renders the outcome: the report,
/// `{"control": ...}` or `{"error": ..., "kind": ...}`. `forced_tag` routes it instead of its own `type`; a
/// control frame's tag goes to any decoder (each reads heartbeats and pongs).
pub fn decode_unit(decoders: &DecoderSet, forced_tag: Option<&str>, unit: &units::Unit) -> Value {
    let tag = forced_tag
        .map(str::to_string)
        .or_else(|| unit.type_tag.clone());
    let untyped = tag.is_none();
    let outcome = match tag.as_deref() {
        Some(tag) if is_control_tag(tag) => match decoders.decoders().into_iter().next() {
            Some(decoder) => decoding::decode_with(decoder, &unit.bytes),
            None => decoding::decode_unit(decoders, unit, Fallback::None),
        },
        _ => {
            let routed = units::Unit {
                type_tag: tag,
                bytes: unit.bytes.clone(),
            };
            decoding::decode_unit(decoders, &routed, Fallback::None)
        }
    };
    match outcome {
        Outcome::Report {
            report, decoder, ..
        } => {
            let mut value = json!({ "source": decoder.info().source });
            if let (Value::Object(out), Ok(Value::Object(fields))) =
                (&mut value, serde_json::to_value(&report))
            {
                out.extend(fields);
            }
            value
        }
        Outcome::Control { control, .. } => {
            let (kind, timestamp) = match control {
                Control::Heartbeat(t) => ("heartbeat", t),
                Control::Pong(t) => ("pong", t),
            };
            json!({ "control": { "kind": kind, "timestamp": timestamp } })
        }
        other => {
            let (kind, mut message) = other.failure().expect("not a report");
            if untyped {
                message.push_str(" (pass --type)");
            }
            json!({ "error": message, "kind": kind.as_str() })
        }
    }
}
