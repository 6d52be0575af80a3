//! Archives for the store's tests, written through the real writer.

use crate::{Incoming, Store, UnitKind, UnitRecord, Writer, open};
use std::ops::RangeInclusive;
use std::path::PathBuf;
use wolfx_core::Report;

/// A new archive in a temporary folder (`what` names it) with `versions` cq report versions, 500 a commit;
/// its writer and the folder.
pub async fn archive(what: &str, versions: i64) -> (Store, Writer, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "osds-{what}-{}-{}",
        std::process::id(),
        osds_time::now_ms()
    ));
    let (store, mut writer) = open(&format!("sqlite://{}/osds.db", dir.display()))
        .await
        .unwrap();
    let session = cq_session(&mut writer).await;
    for batch in frames(session, 1..=versions).chunks(500) {
        writer.ingest(batch).await.unwrap();
    }
    (store, writer, dir)
}

/// Opens the `/cq_eew` session that [`frames`] are received on.
pub async fn cq_session(writer: &mut Writer) -> i64 {
    writer
        .open_session(
            "/cq_eew",
            crate::SocketRole::Primary,
            "ws://test.invalid/cq_eew",
        )
        .await
        .unwrap()
}

/// One frame per number, each a new cq report version (three revisions per event), received on `session`.
pub fn frames(session: i64, numbers: RangeInclusive<i64>) -> Vec<Incoming> {
    numbers
        .map(|n| {
            let event = n / 3;
            let report = Report {
                event_id: format!("cq:{event}"),
                upstream_event_id: event.to_string(),
                revision: n % 3 + 1,
                issued_at: Some(format!("2024-01-01T00:00:{:02}Z", n % 60)),
                origin_at: None,
                epicenter: Some(format!("epicentre {n}")),
                latitude: Some(30.0 + n as f64 / 1000.0),
                longitude: Some(104.5),
                depth_km: None,
                magnitude: Some(4.0),
                max_intensity: None,
                is_final: false,
                is_cancelled: false,
                is_test: false,
            };
            Incoming {
                session_id: session,
                reception: None,
                received_at: osds_time::now_rfc3339(),
                frame: format!("{{\"type\":\"cq_eew\",\"n\":{n}}}").into_bytes(),
                marker: crate::Marker::PrimaryPush,
                units: vec![UnitRecord {
                    unit_index: 0,
                    type_tag: Some("cq_eew".into()),
                    kind: UnitKind::Report {
                        source: "cq".into(),
                        identity: format!("{n:064}"),
                        report: Box::new(report),
                        decoder_name: "test".into(),
                        decoder_sha256: "0".repeat(64),
                    },
                }],
            }
        })
        .collect()
}
