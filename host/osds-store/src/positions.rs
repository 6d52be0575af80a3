//! Where each event is, kept on its row for the place filters of the event lists (migration 0014): the latest
//! report's latitude, longitude and depth (and, for a self-sensing event, its magnitude and origin time; an EEW
//! event has those already), with the unit vector of the position on a sphere (`ux`, `uy`, `uz`), so a distance
//! test is arithmetic in SQL (SQLite has no trigonometry), and, on an EEW event, when it last changed. The writers
//! keep them current ([`Position::binds`]); an archive written before them has them filled in once when it is
//! opened ([`fill_in`]).

use crate::db::WriteConn;
use crate::statements::{Statements, Value as Bind};

/// The sphere distances are measured on (km): the IUGG mean radius.
pub const EARTH_RADIUS_KM: f64 = 6371.0;

/// The place of an event, each part `None` when unknown (or not a coordinate at all).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Position {
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    pub origin_ms: Option<i64>,
}

/// The unit vector of a latitude and longitude (degrees) on the sphere.
pub fn unit_vector(latitude: f64, longitude: f64) -> [f64; 3] {
    let (phi, lambda) = (latitude.to_radians(), longitude.to_radians());
    [
        phi.cos() * lambda.cos(),
        phi.cos() * lambda.sin(),
        phi.sin(),
    ]
}

fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite())
}

impl Position {
    /// A position whose latitude and longitude are kept only as a pair of coordinates on the globe.
    pub fn new(
        latitude: Option<f64>,
        longitude: Option<f64>,
        depth_km: Option<f64>,
        magnitude: Option<f64>,
        origin_ms: Option<i64>,
    ) -> Position {
        let (latitude, longitude) = match (finite(latitude), finite(longitude)) {
            (Some(lat), Some(lon))
                if (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon) =>
            {
                (Some(lat), Some(lon))
            }
            _ => (None, None),
        };
        Position {
            latitude,
            longitude,
            depth_km: finite(depth_km),
            magnitude: finite(magnitude),
            origin_ms,
        }
    }

    /// Of a self-sensing report's payload (`event.hypEstimate`, `event.magnitude`); nothing of one that is not
    /// JSON.
    pub fn of_hyp_payload(payload: &[u8]) -> Position {
        let report: serde_json::Value = serde_json::from_slice(payload).unwrap_or_default();
        let event = &report["event"];
        let estimate = &event["hypEstimate"];
        Position::new(
            estimate["latitude"].as_f64(),
            estimate["longitude"].as_f64(),
            estimate["depthKm"].as_f64(),
            event["magnitude"].as_f64(),
            estimate["originAt"].as_i64(),
        )
    }

    /// Of an EEW report version's served JSON (the event row keeps its magnitude and origin time already).
    fn of_served(json: &str) -> Position {
        let report: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        Position::new(
            report["latitude"].as_f64(),
            report["longitude"].as_f64(),
            report["depthKm"].as_f64(),
            None,
            None,
        )
    }

    pub fn unit(&self) -> Option<[f64; 3]> {
        Some(unit_vector(self.latitude?, self.longitude?))
    }

    /// `latitude, longitude, depth_km, ux, uy, uz`, in that order, for a writer's statement.
    pub(crate) fn binds(&self) -> [Bind; 6] {
        let unit = self.unit();
        [
            self.latitude.into(),
            self.longitude.into(),
            self.depth_km.into(),
            unit.map(|u| u[0]).into(),
            unit.map(|u| u[1]).into(),
            unit.map(|u| u[2]).into(),
        ]
    }
}

/// The columns [`Position::binds`] fills, as `SET` assignments taking them when `?` (a bool bound first) holds.
pub(crate) const SET_WHEN: &str = "latitude = CASE WHEN ? THEN ? ELSE latitude END, \
     longitude = CASE WHEN ? THEN ? ELSE longitude END, depth_km = CASE WHEN ? THEN ? ELSE depth_km END, \
     ux = CASE WHEN ? THEN ? ELSE ux END, uy = CASE WHEN ? THEN ? ELSE uy END, uz = CASE WHEN ? THEN ? ELSE uz END";

/// Binds [`SET_WHEN`]'s parameters: `when`, then each value.
pub(crate) fn bind_set_when(statements: &mut Statements, when: bool, position: &Position) {
    for value in position.binds() {
        statements.bind(when).bind(value);
    }
}

/// Rows filled in per transaction by [`fill_in`].
const FILL_BATCH: i64 = 2_000;

/// Fills in the positions of an archive written before they were kept (`archive.positions_written` = 0), in
/// batches, logging progress, then records that it is done; an interrupted run goes on from where it was on the
/// next open (an EEW event whose `updated_ms` is set is done).
pub(crate) async fn fill_in<C: WriteConn>(conn: &mut C) -> anyhow::Result<()> {
    let written = conn
        .rows(
            Statements::one("SELECT positions_written FROM archive"),
            |r| r.int("positions_written"),
        )
        .await?;
    if written.first() == Some(&1) {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let events = fill_table(
        conn,
        "SELECT e.id AS id, t.json AS json, r.received_at AS received_at FROM events e \
         JOIN report_texts t ON t.id = e.latest_report_id JOIN reports r ON r.id = e.last_report_id \
         WHERE e.id > ? AND e.updated_ms IS NULL ORDER BY e.id LIMIT ?",
        |row| {
            let mut values = Position::of_served(&row.text("json")).binds().to_vec();
            // The last change: the newest version's reception.
            values.push(osds_time::parse_ms(&row.text("received_at")).into());
            values
        },
        "UPDATE events SET latitude = ?, longitude = ?, depth_km = ?, ux = ?, uy = ?, uz = ?, updated_ms = ? \
         WHERE id = ?",
    )
    .await?;
    let hyp = fill_table(
        conn,
        "SELECT e.id AS id, r.payload AS payload FROM hyp_events e \
         JOIN hyp_reports r ON r.event_id = e.id AND r.number = e.latest_number \
         WHERE e.id > ? ORDER BY e.id LIMIT ?",
        |row| {
            let position = Position::of_hyp_payload(&row.bytes("payload"));
            let mut values = position.binds().to_vec();
            values.extend([position.magnitude.into(), position.origin_ms.into()]);
            values
        },
        "UPDATE hyp_events SET latitude = ?, longitude = ?, depth_km = ?, ux = ?, uy = ?, uz = ?, \
         magnitude = ?, origin_ms = ? WHERE id = ?",
    )
    .await?;
    conn.run(Statements::one("UPDATE archive SET positions_written = 1"))
        .await?;
    if events + hyp > 0 {
        tracing::info!(
            events,
            self_sensing_events = hyp,
            seconds = started.elapsed().as_secs_f64(),
            "filled in the position of every event (once, after an upgrade)"
        );
    }
    Ok(())
}

/// Reads `select` (`id` and what `values` reads, from `id > ?`, `LIMIT ?`) in batches and runs `update` with
/// each row's `values` and then its id. Returns the rows written.
async fn fill_table<C: WriteConn>(
    conn: &mut C,
    select: &str,
    values: impl Fn(&dyn crate::db::Columns) -> Vec<Bind>,
    update: &str,
) -> anyhow::Result<u64> {
    let (mut after, mut done) = (String::new(), 0_u64);
    loop {
        let mut query = Statements::one(select);
        query.bind(after.clone()).bind(FILL_BATCH);
        let rows = conn
            .rows(query, |row| (row.text("id"), values(row)))
            .await?;
        let Some((last, _)) = rows.last() else {
            return Ok(done);
        };
        after = last.clone();
        // One transaction a batch: a commit (and its fsync) per row made a 1M-version archive take a minute.
        // (An error ends the opening, and with it the connection.)
        let mut writes = Statements::one("BEGIN");
        for (id, values) in rows.iter() {
            writes.push(update);
            for value in values {
                writes.bind(value.clone());
            }
            writes.bind(id.as_str());
        }
        writes.push("COMMIT");
        conn.run(writes).await?;
        done += rows.len() as u64;
        if done.is_multiple_of(50_000) {
            tracing::info!(done, "filling in event positions");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_is_a_pair_of_coordinates_on_the_globe_or_none() {
        let p = Position::new(Some(35.0), Some(139.0), Some(10.0), Some(5.0), None);
        assert_eq!((p.latitude, p.longitude), (Some(35.0), Some(139.0)));
        for (lat, lon) in [
            (Some(91.0), Some(0.0)),
            (Some(0.0), Some(181.0)),
            (Some(f64::NAN), Some(0.0)),
            (None, Some(0.0)),
        ] {
            let p = Position::new(lat, lon, Some(f64::INFINITY), None, None);
            assert_eq!((p.latitude, p.longitude, p.depth_km), (None, None, None));
            assert!(p.unit().is_none());
        }
    }

    #[test]
    fn the_unit_vectors_dot_product_is_the_cosine_of_the_angle_between() {
        let tokyo = unit_vector(35.68, 139.69);
        let osaka = unit_vector(34.69, 135.50);
        let cos: f64 = tokyo.iter().zip(osaka).map(|(a, b)| a * b).sum();
        let km = cos.acos() * EARTH_RADIUS_KM;
        assert!((km - 397.0).abs() < 5.0, "{km}");
    }

    #[test]
    fn a_self_sensing_payload_gives_its_hypocentre_magnitude_and_origin() {
        let payload = br#"{"event":{"hypEstimate":{"latitude":37.5,"longitude":137.2,"depthKm":10.0,"originAt":1700000000000},"magnitude":null}}"#;
        let p = Position::of_hyp_payload(payload);
        assert_eq!(p.latitude, Some(37.5));
        assert_eq!(p.depth_km, Some(10.0));
        assert_eq!(p.magnitude, None);
        assert_eq!(p.origin_ms, Some(1_700_000_000_000));
        assert_eq!(
            Position::of_hyp_payload(b"\xff not json"),
            Position::default()
        );
    }

    /// An archive written before positions were kept (their columns empty, `positions_written` 0) has them
    /// filled in from each event's latest version when it is opened, and a circle then finds its events.
    #[tokio::test]
    async fn an_archive_from_before_positions_has_them_filled_in_when_opened() {
        use sqlx::Connection;
        let (store, writer, dir) = crate::test_archive::archive("positions-fill-in", 30).await;
        drop((store, writer));
        let url = format!("sqlite://{}/osds.db", dir.display());
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query(
            "UPDATE events SET latitude = NULL, longitude = NULL, depth_km = NULL, ux = NULL, uy = NULL, \
             uz = NULL, updated_ms = NULL; UPDATE archive SET positions_written = 0",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();

        let (store, _writer) = crate::open(&url).await.unwrap();
        let filter = crate::EventFilter {
            place: crate::PlaceFilter {
                circle: Some(crate::Circle {
                    latitude: 30.0,
                    longitude: 104.5,
                    min_km: 0.0,
                    max_km: 1.0,
                }),
                ..Default::default()
            },
            page: 1,
            limit: 100,
            ..Default::default()
        };
        let horizon = store.high_water().await.unwrap();
        let page = store.events(&filter, horizon).await.unwrap();
        // Each event's latest version is at 30 + n/1000 degrees (n = 2, 5, 8, 11, ...): within 1 km (0.009
        // degrees) of 30.0, the first three.
        assert_eq!(page.total, 3, "{:?}", page.items);
        let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
        let (unplaced, written): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM events WHERE ux IS NULL OR updated_ms IS NULL), positions_written \
             FROM archive",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!((unplaced, written), (0, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
