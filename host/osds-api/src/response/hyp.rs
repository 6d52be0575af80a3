//! The self-sensing family's bodies (`osds_contract::hyp`) built from the store's rows.

use osds_contract::hyp::{HypEventHead, HypEventStation, HypReport, Metrics, Peak, Shaper};
use osds_runtime::ShaperInfo;
use osds_store::{HypEventRow, HypReportRow, HypStationRow};

/// `HypReport`: the stored payload, every field of it preserved, with its `sha256`.
pub fn report(row: &HypReportRow) -> HypReport {
    HypReport::from_payload(&row.payload, row.sha256.clone())
}

/// `HypEventHead`.
pub fn event_head(row: &HypEventRow) -> HypEventHead<'_> {
    HypEventHead {
        id: &row.id,
        first_at: row.first_at,
        updated_at: row.updated_at,
        status: row.status.as_str(),
        region: &row.region,
    }
}

/// `HypEventStation`.
pub fn station(row: &HypStationRow) -> HypEventStation<'_> {
    HypEventStation {
        code: &row.code,
        name: row.name.as_deref(),
        latitude: row.latitude,
        longitude: row.longitude,
        metrics: Metrics(
            row.metrics
                .iter()
                .map(|m| {
                    let peak = Peak {
                        peak: m.peak,
                        source_at: m.source_at,
                        received_at: m.received_at,
                        recovered: m.recovered,
                    };
                    (m.metric.as_str(), peak)
                })
                .collect(),
        ),
    }
}

/// The shaper in service.
pub fn shaper(info: &ShaperInfo) -> Shaper<'_> {
    Shaper {
        name: &info.name,
        version: &info.version,
        sha256: &info.sha256,
    }
}
