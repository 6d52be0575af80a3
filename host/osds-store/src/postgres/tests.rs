//! The PostgreSQL archive against the SQLite one, on throwaway servers.

use super::*;
use crate::test_archive::frames;
use crate::test_postgres::Cluster;
use crate::{DeliveryId, EndReason, OutageReason, Store, UnitKind, UnitRecord, Writer};
use hyp_core::EventStatus;
use sha2::Digest;
use sqlx::{PgConnection, SqlitePool};

/// The writer of ingester `name` on the PostgreSQL archive at `url`.
async fn ingester(url: &str, name: &str) -> anyhow::Result<Writer> {
    let (_, mut writer) = crate::open(url).await?;
    writer.register_ingester(name).await?;
    Ok(writer)
}

/// Frames of every kind a batch holds: new versions (events begun, revised, an origin learnt later), the
/// same versions again (duplicates), an unparsed unit and an ignored one.
fn mixed(session: i64) -> Vec<Incoming> {
    let mut all = frames(session, 1..=40);
    let mut late = frames(session, 41..=46);
    for (i, frame) in late.iter_mut().enumerate() {
        if let UnitKind::Report { report, .. } = &mut frame.units[0].kind {
            report.origin_at = Some(format!("2024-01-0{}T00:00:00Z", i % 3 + 1));
        }
    }
    all.extend(late);
    all.extend(frames(session, 10..=20));
    let unit = |kind| Incoming {
        session_id: session,
        reception: None,
        received_at: "2024-01-02T00:00:00Z".into(),
        frame: b"{\"type\":\"odd\"}".to_vec(),
        marker: crate::Marker::PrimaryPush,
        units: vec![UnitRecord {
            unit_index: 0,
            type_tag: Some("odd".into()),
            kind,
        }],
    };
    all.push(unit(UnitKind::Unparsed {
        source: Some("cq".into()),
        decoder: Some("test@0".into()),
        error_kind: "malformed".into(),
        message: "not a report".into(),
    }));
    all.push(unit(UnitKind::Ignored));
    all.push(unit(UnitKind::Ignored));
    all
}

/// Reads the same columns from both archives, typed alike, and compares them.
macro_rules! same_rows {
    ($sqlite:expr, $pg:expr, $row:ty, $sql:expr) => {{
        let lite: Vec<$row> = sqlx::query_as($sql).fetch_all($sqlite).await.unwrap();
        let pg: Vec<$row> = sqlx::query_as($sql).fetch_all(&mut $pg).await.unwrap();
        assert!(!lite.is_empty(), "no rows: {}", $sql);
        assert_eq!(lite, pg, "{}", $sql);
    }};
}

type Text = Option<String>;

/// The same frames and bookkeeping written into a SQLite archive and a PostgreSQL one, under the same
/// session id.
struct Twins {
    _cluster: Cluster,
    url: String,
    dir: std::path::PathBuf,
    lite: Store,
    pg: Store,
    /// Deliveries archived in each.
    deliveries: i64,
}

impl Drop for Twins {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn twins(what: &str) -> Twins {
    let cluster = Cluster::start(what);
    let url = cluster.database("osds").await;
    let mut pg_writer = ingester(&url, "one").await.unwrap();
    let dir = std::env::temp_dir().join(format!(
        "osds-pg-{what}-{}-{}",
        std::process::id(),
        osds_time::now_ms()
    ));
    let (lite, mut lite_writer) = crate::open(&format!("sqlite://{}/osds.db", dir.display()))
        .await
        .unwrap();
    let session = pg_writer.next_session_id();
    assert_eq!(
        session,
        (1 << SESSION_ID_BITS) + 1,
        "the first ingester's first"
    );
    let (path, url_upstream, at) = (
        "/cq_eew",
        "ws://test.invalid/cq_eew",
        "2024-01-01T00:00:00Z",
    );
    pg_writer
        .open_session_with_id(session, path, crate::SocketRole::Primary, url_upstream, at)
        .await
        .unwrap();
    lite_writer
        .open_session_with_id(session, path, crate::SocketRole::Primary, url_upstream, at)
        .await
        .unwrap();
    let batch = mixed(session);
    for (i, chunk) in batch.chunks(7).enumerate() {
        let from_lite = lite_writer.ingest(chunk).await.unwrap();
        let from_pg = pg_writer.ingest(chunk).await.unwrap();
        assert_eq!(from_lite, from_pg, "batch {i}");
    }
    // A later decoder recovers the last ignored unit (the last delivery) as a new version, and the first
    // version's identity from the unparsed one (two before): a duplicate. The other ignored one is left.
    let deliveries: i64 = batch.iter().map(|f| f.units.len() as i64).sum();
    let recovered = |delivery_id: i64, identity: String| {
        let mut report = match &frames(session, 99..=99)[0].units[0].kind {
            UnitKind::Report { report, .. } => report.clone(),
            _ => unreachable!(),
        };
        report.event_id = "cq:recovered".into();
        Recovered {
            delivery_id,
            received_at: "2024-01-02T00:00:00Z".into(),
            source: "cq".into(),
            identity,
            report,
            decoder_name: "later".into(),
            decoder_sha256: "1".repeat(64),
        }
    };
    let items = [
        recovered(deliveries, "recovered".repeat(7)),
        recovered(deliveries - 2, format!("{:064}", 1)),
    ];
    let from_lite = lite_writer.recover(&items).await.unwrap();
    let from_pg = pg_writer.recover(&items).await.unwrap();
    assert_eq!(from_lite, from_pg);
    assert_eq!((from_pg.new_versions.len(), from_pg.duplicates), (1, 1));
    assert_eq!(pg_writer.recover(&items).await.unwrap(), Default::default());
    for (source, reason) in [
        ("cq", OutageReason::ServiceStarted),
        ("fj", OutageReason::ChannelAdded),
    ] {
        lite_writer.outage_begin(source, &reason).await.unwrap();
        pg_writer.outage_begin(source, &reason).await.unwrap();
    }
    lite_writer.outage_end("fj").await.unwrap();
    pg_writer.outage_end("fj").await.unwrap();
    lite_writer.add_counter("heartbeats", 3).await.unwrap();
    pg_writer.add_counter("heartbeats", 3).await.unwrap();
    for input in hyp_reports() {
        assert_eq!(
            lite_writer.append_hyp_report(&input).await.unwrap(),
            pg_writer.append_hyp_report(&input).await.unwrap()
        );
    }
    let skipping = HypReportInput {
        number: 9,
        ..hyp_reports().remove(0)
    };
    assert!(lite_writer.append_hyp_report(&skipping).await.is_err());
    assert!(pg_writer.append_hyp_report(&skipping).await.is_err());
    let recovered = [metric("N.HKDH", "surface:pgaGal", 40.0, true)];
    assert_eq!(
        lite_writer
            .add_hyp_station_metrics("hyp:1", &recovered)
            .await
            .unwrap(),
        pg_writer
            .add_hyp_station_metrics("hyp:1", &recovered)
            .await
            .unwrap()
    );
    assert!(
        pg_writer
            .add_hyp_station_metrics("hyp:none", &recovered)
            .await
            .is_err()
    );
    assert!(lite_writer.set_hyp_hidden("hyp:2", true).await.unwrap());
    assert!(pg_writer.set_hyp_hidden("hyp:2", true).await.unwrap());
    assert!(!pg_writer.set_hyp_hidden("hyp:none", true).await.unwrap());
    let state = serde_json::json!({"running": true, "stations": 3});
    lite_writer
        .set_hyp_state("detector", 1_700_000_000_000, &state)
        .await
        .unwrap();
    pg_writer
        .set_hyp_state("detector", 1_700_000_000_000, &state)
        .await
        .unwrap();
    let wasm = b"\0asm not really".to_vec();
    let sha = hex::encode(sha2::Sha256::digest(&wasm));
    let install = crate::ComponentChange {
        channel: "cq".into(),
        action: crate::ComponentAction::Install,
        sha256: sha.clone(),
        wasm: Some(wasm),
        previous: None,
        changed_at: "2024-01-03T00:00:00Z".into(),
    };
    let rollback = crate::ComponentChange {
        channel: "cq".into(),
        action: crate::ComponentAction::Rollback,
        sha256: sha.clone(),
        wasm: None,
        previous: Some(sha),
        changed_at: "2024-01-03T00:00:00Z".into(),
    };
    for change in [install, rollback] {
        lite_writer.record_component(&change).await.unwrap();
        pg_writer.record_component(&change).await.unwrap();
    }
    let pg = open_store(&url).await.unwrap();
    Twins {
        _cluster: cluster,
        url,
        dir,
        lite,
        pg,
        deliveries,
    }
}

fn metric(station: &str, metric: &str, peak: f64, recovered: bool) -> StationMetric {
    StationMetric {
        station: station.into(),
        name: Some(format!("{station} town")),
        latitude: 43.5,
        longitude: 141.25,
        metric: metric.into(),
        peak,
        source_at: 1_700_000_000_000,
        received_at: 1_700_000_000_500,
        recovered,
    }
}

/// Reports of three hyp events: one that goes public and is revised, one hidden later, one that stays a
/// candidate.
fn hyp_reports() -> Vec<HypReportInput> {
    let report = |event: &str, number: i64, status: EventStatus, at: i64| HypReportInput {
        event_id: event.into(),
        number,
        status,
        first_at: 1_700_000_000_000,
        reported_at: at,
        recorded_at: at + 5,
        region: (number == 1).then(|| "Hokkaido".to_string()),
        payload: format!("{{\"event\":\"{event}\",\"n\":{number},\"algorithm\":\"a\"}}")
            .into_bytes(),
        shaper: "shaper@0".into(),
        solution: format!("{{\"solution\":{number}}}").into_bytes(),
        metrics: vec![
            metric("N.HKDH", "surface:pgaGal", 10.0 * number as f64, false),
            metric("N.SPRH", "underground:intensity", 1.5, false),
        ],
    };
    vec![
        report("hyp:1", 1, EventStatus::Candidate, 1_700_000_001_000),
        report("hyp:1", 2, EventStatus::Preliminary, 1_700_000_002_000),
        report("hyp:2", 1, EventStatus::Preliminary, 1_700_000_001_500),
        report("hyp:1", 3, EventStatus::Finalized, 1_700_000_000_500),
        report("hyp:3", 1, EventStatus::Candidate, 1_700_000_003_000),
    ]
}

#[tokio::test]
async fn archives_what_the_sqlite_writer_archives() {
    let twins = twins("same").await;
    let url = &twins.url;
    let lite: &SqlitePool = twins.lite.db.sqlite().unwrap();
    let mut pg = PgConnection::connect(url).await.unwrap();
    // (Tuples compare up to 12 columns: the wide tables are read in two halves.)
    same_rows!(
        lite,
        pg,
        (i64, String, String, String, i64, String, String, String),
        "SELECT id, event_key, source, identity_sha256, delivery_id, received_at, event_id, upstream_event_id \
         FROM reports ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (
            i64,
            i64,
            Text,
            Text,
            Text,
            Option<f64>,
            String,
            String,
            String
        ),
        "SELECT id, revision, issued_at, origin_at, epicenter, magnitude, report_json, decoder_name, \
         decoder_sha256 FROM reports ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (String, String, String, Text, Option<i64>, i64, String, i64),
        "SELECT id, source, source_event_id, origin_at, origin_ms, sort_ms, month, latest_report_id \
         FROM events ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (
            String,
            i64,
            i64,
            String,
            Text,
            Option<f64>,
            String,
            i64,
            i64
        ),
        "SELECT id, latest_revision, report_count, missing_revisions, epicenter, magnitude, upstream_ids, \
         first_report_id, last_report_id FROM events ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (i64, String, String, i64, Text, Text),
        "SELECT id, received_at, raw_sha256, unit_index, type_tag, source FROM deliveries ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (i64, String, String, Option<i64>, Text, Text, Text, Text),
        "SELECT id, marker, outcome, report_id, event_key, decoder, error_kind, error_message \
         FROM deliveries ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (i64, String, String),
        "SELECT id, source, json FROM report_texts ORDER BY id"
    );
    same_rows!(
        lite,
        pg,
        (String, Vec<u8>, i64, String),
        "SELECT sha256, bytes, size, first_seen_at FROM raw_payloads ORDER BY sha256"
    );
}

/// Every read written for both databases answers alike on the twins.
#[tokio::test]
async fn reads_answer_alike() {
    let twins = twins("reads").await;
    let (lite, pg) = (&twins.lite, &twins.pg);
    let horizon = lite.high_water().await.unwrap();
    assert_eq!(horizon, 47, "46 versions and a recovered one");
    assert_eq!(pg.high_water().await.unwrap(), horizon);
    let alike = |what: &str, a: String, b: String| assert_eq!(a, b, "{what}");
    macro_rules! both {
        ($what:expr, $read:ident ( $($arg:expr),* )) => {{
            let a = lite.$read($($arg),*).await.unwrap();
            let b = pg.$read($($arg),*).await.unwrap();
            alike($what, format!("{a:?}"), format!("{b:?}"));
            a
        }};
    }
    let all = both!("all texts", served_between(0, horizon, 1000));
    assert_eq!(all.len(), 47);
    both!("a slice", served_between(5, 20, 7));
    both!("a channel", source_served_between("cq", 0, horizon, 1000));
    both!(
        "another channel",
        source_served_between("fj", 0, horizon, 1000)
    );
    both!("no event", event("0"));
    assert!(!both!("no event exists", event_exists("0")));
    let events: Vec<String> = sqlx::query_scalar("SELECT id FROM events ORDER BY id")
        .fetch_all(lite.db.sqlite().unwrap())
        .await
        .unwrap();
    assert!(events.len() > 10);
    for id in &events {
        assert!(both!("an event exists", event_exists(id)));
        both!("an event", event(id));
        let a = lite.deliveries(id, DeliveryId(0), 100).await.unwrap();
        let mut b = pg.deliveries(id, DeliveryId(0), 100).await.unwrap();
        // Alike but for the ingester, which only an archive several share names.
        for delivery in &mut b.items {
            assert_eq!(delivery.ingester.take().as_deref(), Some("one"));
        }
        assert!(a.items.iter().all(|d| d.ingester.is_none()));
        alike(
            "deliveries",
            format!("{:?}", a.items),
            format!("{:?}", b.items),
        );
        assert_eq!(a.next_cursor, b.next_cursor);
    }
    for delivery in 0..=twins.deliveries + 1 {
        both!("raw bytes", raw(DeliveryId(delivery)));
    }
    both!("latest event", latest_event("cq"));
    both!("months", months(None));
    both!("months of a channel", months(Some("cq")));
    both!("months of another", months(Some("fj")));
    both!("counts", archive_counts());
    both!("counts again (kept)", archive_counts());
    both!("a counter", counter("heartbeats"));
    both!("no counter", counter("pongs"));
    both!("last receptions", last_receptions());
    both!(
        "canary payloads",
        canary_payloads("cq", &["odd".to_string()], 50)
    );
    both!("canary, no claims", canary_payloads("cq", &[], 50));
    for q in [None, Some("hyp:1".to_string()), Some("%".to_string())] {
        let filter = crate::HypFilter {
            q,
            from_ms: 0,
            to_ms: None,
            place: Default::default(),
            order: Default::default(),
            page: 1,
            limit: 10,
        };
        both!("hyp events", hyp_events(&filter));
    }
    let window = crate::HypFilter {
        from_ms: 1_700_000_000_000,
        to_ms: Some(1_700_000_000_001),
        page: 1,
        limit: 1,
        q: None,
        place: Default::default(),
        order: Default::default(),
    };
    both!("hyp events in a window", hyp_events(&window));
    for id in ["hyp:1", "hyp:2", "hyp:3", "hyp:none"] {
        both!("a hyp event", hyp_event(id));
        both!("hyp reports", hyp_reports(id));
        both!("a hyp report", hyp_report(id, 2));
        both!("hyp stations", hyp_stations(id));
        both!("a latest solution", hyp_latest_solution(id));
    }
    assert_eq!(both!("hyp counts", hyp_counts()), (3, 1, 5));
    both!("detector state", hyp_state("detector"));
    both!("no recorder state", hyp_state("recorder"));
    both!("latest algorithm", hyp_latest_algorithm());
    both!("recent solutions", hyp_recent_solutions(3));
    both!("open solutions", hyp_open_solutions());
    let installed = both!("installed components", installed_components());
    assert_eq!(installed.len(), 1);
    both!("a component file", component_file(&installed[0].sha256));
    both!("no component file", component_file("0"));
    let filter =
        |source: Option<&str>, q: Option<&str>, min: Option<f64>, page: i64| crate::EventFilter {
            source: source.map(str::to_string),
            from_ms: None,
            to_ms: None,
            q: q.map(str::to_string),
            place: crate::PlaceFilter {
                min_magnitude: min,
                ..Default::default()
            },
            order: Default::default(),
            page,
            limit: 5,
        };
    let mut filters = vec![
        filter(None, None, None, 1),
        filter(None, None, None, 3),
        filter(None, None, None, 99),
        filter(Some("cq"), None, Some(4.0), 2),
        filter(Some("fj"), None, None, 1),
        filter(None, None, Some(5.0), 1),
        filter(None, Some("epicentre 4"), None, 1),
        filter(None, Some("100%_"), None, 1),
    ];
    filters.push(crate::EventFilter {
        from_ms: osds_time::parse_ms("2024-01-02T00:00:00Z"),
        to_ms: osds_time::parse_ms("2024-01-03T12:00:00Z"),
        ..filter(None, None, None, 1)
    });
    // The place filters and orders (issue 43) read the same on both: a box, a circle, depth and magnitude
    // bounds, and every order.
    let place = |place: crate::PlaceFilter, order: crate::Order| crate::EventFilter {
        place,
        order,
        ..filter(None, None, None, 1)
    };
    filters.extend([
        place(
            crate::PlaceFilter {
                area: Some(crate::GeoBox {
                    min_latitude: 30.0,
                    max_latitude: 30.01,
                    min_longitude: 100.0,
                    max_longitude: 110.0,
                }),
                ..Default::default()
            },
            crate::Order::Oldest,
        ),
        place(
            crate::PlaceFilter {
                circle: Some(crate::Circle {
                    latitude: 30.0,
                    longitude: 104.5,
                    min_km: 0.5,
                    max_km: 2.0,
                }),
                max_magnitude: Some(6.0),
                ..Default::default()
            },
            crate::Order::Largest,
        ),
        place(Default::default(), crate::Order::Largest),
        place(Default::default(), crate::Order::Smallest),
        place(
            crate::PlaceFilter {
                min_depth_km: Some(0.0),
                ..Default::default()
            },
            crate::Order::Newest,
        ),
        place(
            crate::PlaceFilter {
                updated_after_ms: Some(0),
                ..Default::default()
            },
            crate::Order::Smallest,
        ),
    ]);
    for filter in &filters {
        let listed = |page: crate::EventPage| (format!("{:?}", page.items), page.total);
        let a = listed(lite.events(filter, horizon).await.unwrap());
        let b = listed(pg.events(filter, horizon).await.unwrap());
        assert_eq!(a, b, "{filter:?}");
        let (matches, binds) = crate::read::filter_sql(filter);
        let by_offset = listed(
            pg.offset_events(filter, horizon, &matches, &binds)
                .await
                .unwrap(),
        );
        assert_eq!(by_offset, b, "by offset: {filter:?}");
    }
    for (tags, source, since) in [
        (vec![], None, None),
        (vec!["odd".to_string()], None, None),
        (vec!["odd".to_string()], Some("fj".to_string()), None),
        (
            vec![],
            Some("cq".to_string()),
            Some("2030-01-01T00:00:00Z".to_string()),
        ),
    ] {
        let filter = crate::UnparsedFilter {
            ignored_tags: tags,
            source,
            since,
            until: None,
        };
        both!("unparsed deliveries", unparsed_deliveries(&filter, 0, 10));
        both!("unparsed count", count_unparsed(&filter));
    }
    let odd = crate::UnparsedFilter {
        ignored_tags: vec!["odd".to_string()],
        ..Default::default()
    };
    let left = pg.unparsed_deliveries(&odd, 0, 10).await.unwrap();
    assert_eq!(
        left.iter().map(|u| u.delivery_id).collect::<Vec<_>>(),
        [twins.deliveries - 1]
    );
    // Sessions and outages carry the time they were written: the rest must agree.
    let sessions = |rows: Vec<crate::SessionRow>| {
        rows.into_iter()
            .map(|r| (r.id, r.path, r.role, r.ended_at))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        sessions(lite.recent_sessions(10).await.unwrap()),
        sessions(pg.recent_sessions(10).await.unwrap())
    );
    let outages = |rows: Vec<crate::OutageRow>| {
        rows.into_iter()
            .map(|r| (r.source, r.reason, r.ended_at.is_some()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        outages(lite.outages(10).await.unwrap()),
        outages(pg.outages(10).await.unwrap())
    );
    assert_eq!(
        outages(lite.open_outages().await.unwrap()),
        outages(pg.open_outages().await.unwrap())
    );
}

/// Each ingester hands out session ids of its own range without asking the database, continues it after
/// a restart, and runs once per name; closing stale sessions leaves another ingester's alone.
#[tokio::test]
async fn commands_open_an_existing_archive_only() {
    let cluster = Cluster::start("existing");
    let url = cluster.database("osds").await;
    let empty = crate::open_existing(&url).await.err().expect("no archive");
    assert!(
        format!("{empty:#}").contains("holds no osds archive"),
        "{empty:#}"
    );
    drop(crate::open(&url).await.unwrap());
    assert!(crate::open_existing(&url).await.is_ok());
}

#[tokio::test]
async fn a_channel_is_out_only_while_no_running_ingester_has_it() {
    let cluster = Cluster::start("outages");
    let url = cluster.database("osds").await;
    let mut a = ingester(&url, "a").await.unwrap();
    let mut b = ingester(&url, "b").await.unwrap();
    let store = open_store(&url).await.unwrap();
    let open = |outages: Vec<crate::OutageRow>| -> Vec<String> {
        outages.into_iter().map(|o| o.source).collect()
    };
    a.outage_end("cq").await.unwrap();
    b.outage_end("cq").await.unwrap();
    a.outage_begin("cq", &lost("/cq_eew")).await.unwrap();
    assert!(
        open(store.open_outages().await.unwrap()).is_empty(),
        "b still has cq"
    );
    b.outage_begin("cq", &lost("/all_eew")).await.unwrap();
    assert_eq!(open(store.open_outages().await.unwrap()), ["cq"]);
    a.outage_end("cq").await.unwrap();
    assert!(open(store.open_outages().await.unwrap()).is_empty());
}

#[tokio::test]
async fn one_process_of_all_runs_the_detector() {
    let cluster = Cluster::start("detector");
    let url = cluster.database("osds").await;
    let (_, mut first) = crate::open(&url).await.unwrap();
    let (_, mut second) = crate::open(&url).await.unwrap();
    first.claim_detector().await.unwrap();
    let refused = second
        .claim_detector()
        .await
        .expect_err("a second detector");
    assert!(
        format!("{refused:#}").contains("a hyp detector already runs"),
        "{refused:#}"
    );
    first.close().await.unwrap();
    // The lock goes with the first writer's connection (as the server ends that backend).
    let mut attempts = 0;
    while let Err(e) = second.claim_detector().await {
        attempts += 1;
        assert!(attempts < 400, "the lock was never released: {e:#}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn ingesters_name_their_sessions() {
    let cluster = Cluster::start("names");
    let url = cluster.database("osds").await;
    let mut a = ingester(&url, "a").await.unwrap();
    let mut b = ingester(&url, "b").await.unwrap();
    let a1 = a
        .open_session("/cq_eew", crate::SocketRole::Primary, "ws://a")
        .await
        .unwrap();
    let b1 = b
        .open_session("/cq_eew", crate::SocketRole::Primary, "ws://b")
        .await
        .unwrap();
    let a2 = a
        .open_session("/all_eew", crate::SocketRole::Redundant, "ws://a")
        .await
        .unwrap();
    assert_eq!([a1, a2, b1], [(1 << 40) + 1, (1 << 40) + 2, (2 << 40) + 1]);

    let twice = ingester(&url, "a").await.err().expect("a second `a`");
    assert!(twice.to_string().contains("already running"), "{twice}");
    drop(a);
    let mut a = ingester(&url, "a").await.unwrap();
    a.close_stale_sessions(None, &[]).await.unwrap();
    assert_eq!(a.next_session_id(), (1 << 40) + 3);

    let mut conn = PgConnection::connect(&url).await.unwrap();
    let open: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, ingester FROM sessions WHERE ended_at IS NULL ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(open, [(b1, "b".to_string())]);
}

/// The ingest path's bookkeeping (`records.rs`) runs on PostgreSQL as on SQLite.
#[tokio::test]
async fn bookkeeping_writes_run_on_postgres() {
    let cluster = Cluster::start("records");
    let url = cluster.database("osds").await;
    let mut writer = ingester(&url, "one").await.unwrap();
    let session = writer
        .open_session("/cq_eew", crate::SocketRole::Primary, "ws://x")
        .await
        .unwrap();
    writer.session_connected(session).await.unwrap();
    writer
        .session_ended(session, crate::EndReason::ClosedByUpstream)
        .await
        .unwrap();
    writer.outage_begin("cq", &lost("/cq_eew")).await.unwrap();
    writer
        .outage_begin("cq", &OutageReason::ServiceStopped)
        .await
        .unwrap();
    writer.outage_end("cq").await.unwrap();
    writer
        .outage_begin("cq", &OutageReason::ServiceStarted)
        .await
        .unwrap();
    writer.add_counter("heartbeats", 2).await.unwrap();
    writer.add_counter("heartbeats", 3).await.unwrap();
    writer
        .refused_frame(session, "2024-01-01T00:00:00Z", 9 << 20, 8 << 20)
        .await
        .unwrap();

    let mut conn = PgConnection::connect(&url).await.unwrap();
    let (connected, reason): (bool, Option<String>) =
        sqlx::query_as("SELECT connected_at IS NOT NULL, end_reason FROM sessions WHERE id = $1")
            .bind(session)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(connected);
    assert_eq!(reason.as_deref(), Some("closed_by_upstream"));
    let outages: Vec<(String, bool)> =
        sqlx::query_as("SELECT reason, ended_at IS NULL FROM outages ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        outages,
        [
            ("/cq_eew: closed_by_upstream".to_string(), false),
            ("service started; not yet connected".to_string(), true)
        ]
    );
    let heartbeats: i64 =
        sqlx::query_scalar("SELECT value FROM counters WHERE name = 'heartbeats'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(heartbeats, 5);
    let refused: (i64, i64) = sqlx::query_as("SELECT size_bytes, limit_bytes FROM refused_frames")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(refused, (9 << 20, 8 << 20));
}

/// A commit wakes a follower in another process with its horizon; one whose connection was lost reads
/// what it missed once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_wake_followers_elsewhere() {
    let cluster = Cluster::start("notify");
    let url = cluster.database("osds").await;
    let mut writer = ingester(&url, "a").await.unwrap();
    let session = writer
        .open_session("/cq_eew", crate::SocketRole::Primary, "ws://a")
        .await
        .unwrap();
    let mut horizon = watch_horizon(&url).await.unwrap();
    assert_eq!(*horizon.borrow(), 0);
    // (A guard against a hang, not a measurement: the horizon arrives in milliseconds.)
    let guard = std::time::Duration::from_secs(60);
    let mut reach = async |want: i64| {
        tokio::time::timeout(guard, horizon.wait_for(|h| *h == want))
            .await
            .expect("the horizon reached the follower")
            .unwrap();
    };
    writer.ingest(&frames(session, 1..=5)).await.unwrap();
    reach(5).await;

    let mut admin = PgConnection::connect(&url).await.unwrap();
    let cut: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(super::horizon::FOLLOWER_NAME)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(cut, [true], "the follower's connection was cut");
    writer.ingest(&frames(session, 6..=9)).await.unwrap();
    reach(9).await;
    writer.ingest(&frames(session, 10..=10)).await.unwrap();
    reach(10).await;
}

/// Two ingesters archive overlapping streams into one database at once while a consumer follows the
/// cursor: it sees every id once, in order, never one below a horizon it has passed; every version is
/// archived once and every reception is kept, named by its ingester.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ingesters_share_one_gap_free_cursor() {
    let cluster = Cluster::start("two");
    let url = cluster.database("osds").await;
    // The schema, before the consumer reads (the ingesters then find it in place).
    drop(ingester(&url, "setup").await.unwrap());
    let ingester = |name: &'static str, numbers: std::ops::RangeInclusive<i64>| {
        let url = url.clone();
        tokio::spawn(async move {
            let mut writer = ingester(&url, name).await.unwrap();
            let session = crate::test_archive::cq_session(&mut writer).await;
            for batch in frames(session, numbers).chunks(5) {
                writer.ingest(batch).await.unwrap();
            }
        })
    };
    let a = ingester("a", 1..=300);
    let b = ingester("b", 101..=400);

    let mut reader = PgConnection::connect(&url).await.unwrap();
    let mut cursor = 0_i64;
    let mut reads = 0;
    loop {
        // (An ingester that failed has finished too: its panic is raised below.)
        let done = a.is_finished() && b.is_finished();
        let horizon: i64 = sqlx::query_scalar(&format!("SELECT {HORIZON}"))
            .fetch_one(&mut reader)
            .await
            .unwrap();
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM reports WHERE id > $1 AND id <= $2 ORDER BY id")
                .bind(cursor)
                .bind(horizon)
                .fetch_all(&mut reader)
                .await
                .unwrap();
        assert_eq!(
            ids,
            (cursor + 1..=horizon).collect::<Vec<_>>(),
            "after {cursor}"
        );
        cursor = horizon;
        reads += 1;
        if done {
            break;
        }
    }
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(cursor, 400, "every version once ({reads} reads)");

    let identities: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT identity_sha256) FROM reports")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert_eq!(identities, 400);
    let receptions: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT s.ingester, d.outcome, COUNT(*) FROM deliveries d JOIN sessions s ON s.id = d.session_id \
         GROUP BY s.ingester, d.outcome ORDER BY 1, 2",
    )
    .fetch_all(&mut reader)
    .await
    .unwrap();
    let per_ingester: i64 = receptions.iter().map(|(_, _, n)| n).sum();
    assert_eq!(per_ingester, 600, "{receptions:?}");
    let duplicates: i64 = receptions
        .iter()
        .filter(|(_, outcome, _)| outcome == "duplicate")
        .map(|(_, _, n)| n)
        .sum();
    assert_eq!(duplicates, 200, "{receptions:?}");
}

/// The outage of a channel whose last socket, `path`, was closed by the relay.
fn lost(path: &str) -> OutageReason {
    OutageReason::SocketLost {
        path: path.into(),
        reason: Some(EndReason::ClosedByUpstream),
    }
}

/// `/status`'s list: ingesters that run, and those seen within the window; one gone for two days is left out.
#[tokio::test]
async fn only_running_and_recently_seen_ingesters_are_listed() {
    let cluster = Cluster::start("seen");
    let url = cluster.database("osds").await;
    for stopped in ["gone", "lately"] {
        let mut writer = ingester(&url, stopped).await.unwrap();
        writer.mark_alive().await.unwrap();
        writer.close().await.unwrap();
    }
    let _running = ingester(&url, "running").await.unwrap();
    let store = open_store(&url).await.unwrap();
    let two_days_ago = osds_time::rfc3339_ms(osds_time::now_ms() - 48 * 3_600_000);
    let mut conn = PgConnection::connect(&url).await.unwrap();
    for table in [
        "UPDATE liveness SET alive_at = $1 WHERE ingester = 'gone'",
        "UPDATE ingesters SET first_seen_at = $1 WHERE name IN ('gone', 'running')",
    ] {
        sqlx::query(table)
            .bind(&two_days_ago)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let a_day_ago = osds_time::rfc3339_ms(osds_time::now_ms() - 24 * 3_600_000);
    let listed: Vec<(String, bool)> = store
        .ingesters(&a_day_ago)
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.name, i.running))
        .collect();
    assert_eq!(
        listed,
        [("lately".to_string(), false), ("running".to_string(), true)]
    );
    let everyone = store.ingesters("0000").await.unwrap();
    assert_eq!(everyone.len(), 3);
}
