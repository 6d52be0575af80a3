//! From one received frame to what the archive stores: split, route by `type`, decode in the channel's
//! component, and compute each report's version identity.

use osds_runtime::decoder_set::SharedDecoders;
use osds_runtime::decoding::{self, Fallback, Outcome};
use osds_runtime::units;
use osds_store::{Incoming, UnitKind, UnitRecord};

/// Where and when a frame came.
pub struct Received {
    pub session_id: i64,
    /// The frame's number on its session (see `Incoming::reception`).
    pub reception: i64,
    pub received_at: String,
    /// How it came.
    pub marker: osds_store::Marker,
}

/// Routes and decodes every unit of `frame`. `own_type` is the channel of the socket it came on, used for a
/// frame whose `type` cannot be read (garbage on `/sc_eew` is the sc decoder's to reject and is kept as
/// unparsed sc data); on `/all_eew` such a frame has no channel.
///
/// Decodes on the calling thread, for up to the decoders' time budget: the connection's own (see
/// `Ingester::connect`), which has nothing else to do meanwhile.
pub fn prepare(
    decoders: &SharedDecoders,
    frame: Vec<u8>,
    units: Vec<units::Unit>,
    own_type: Option<&str>,
    received: Received,
) -> Incoming {
    let Received {
        session_id,
        reception,
        received_at,
        marker,
    } = received;
    let decoders = decoders.load_full();
    let records = units
        .into_iter()
        .enumerate()
        .filter(|(_, unit)| !unit.is_control())
        .map(|(index, unit)| UnitRecord {
            unit_index: index as i64,
            kind: decode_unit(&decoders, &unit, own_type),
            type_tag: unit.type_tag,
        })
        .collect();
    Incoming {
        session_id,
        reception: Some(reception),
        received_at,
        frame,
        marker,
        units: records,
    }
}

/// What the archive stores of a unit: the one decode step's outcome (`osds_runtime::decoding`).
fn decode_unit(
    decoders: &osds_runtime::DecoderSet,
    unit: &units::Unit,
    own_type: Option<&str>,
) -> UnitKind {
    let fallback = own_type.map_or(Fallback::None, Fallback::Tag);
    let outcome = decoding::decode_unit(decoders, unit, fallback);
    let named = |info: &osds_runtime::DecoderInfo| format!("{}@{}", info.name, info.sha256);
    match outcome {
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
        Outcome::Unclaimed { .. } => UnitKind::Ignored,
        other => {
            let (kind, message) = other.failure().expect("not a report");
            UnitKind::Unparsed {
                source: other.decoder().map(|info| info.source.clone()),
                decoder: other.decoder().map(named),
                error_kind: kind.as_str().into(),
                message,
            }
        }
    }
}
