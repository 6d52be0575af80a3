//! Frames as the ingest pipeline hands them to the writer, for the benchmarks that write archives through the
//! host's writer: decoded by the built-in components through the one decode step (`osds_runtime::decoding`),
//! so a generated archive holds what ingestion would have stored.

use anyhow::{Result, bail};
use osds_runtime::decoder_set::DecoderSet;
use osds_runtime::decoding::{self, Fallback, Outcome};
use osds_runtime::{Limits, Runtime, units};
use osds_store::{Incoming, UnitKind, UnitRecord};

/// The built-in decoders, as `osds serve` starts with them.
pub fn embedded_decoders() -> Result<DecoderSet> {
    DecoderSet::embedded(&Runtime::new(Limits::default())?)
}

/// `text`, a frame of one report received on `session`, decoded into what the archive stores.
pub fn decoded_incoming(decoders: &DecoderSet, session: i64, text: String) -> Result<Incoming> {
    let unit = units::split(text.as_bytes())
        .into_iter()
        .next()
        .expect("a frame is at least one unit");
    let type_tag = unit.type_tag.clone();
    let kind = match decoding::decode_unit(decoders, &unit, Fallback::None) {
        Outcome::Report {
            report,
            identity,
            decoder,
        } => {
            let info = decoder.info();
            UnitKind::Report {
                source: info.source.clone(),
                identity,
                report,
                decoder_name: info.name.clone(),
                decoder_sha256: info.sha256.clone(),
            }
        }
        other => bail!(
            "generated frame does not decode: {:?}\n{text}",
            other.failure()
        ),
    };
    Ok(Incoming {
        session_id: session,
        reception: None,
        received_at: osds_time::now_rfc3339(),
        frame: text.into_bytes(),
        marker: osds_store::Marker::PrimaryPush,
        units: vec![UnitRecord {
            unit_index: 0,
            type_tag,
            kind,
        }],
    })
}
