//! The event list's query plans, and kept lists against full reads.

mod plan_tests {
    use super::super::*;
    use crate::test_archive::archive;
    use sqlx::Row;

    /// The steps of SQLite's plan for `sql` (its own version, the one built into the binary).
    async fn plan(store: &Store, sql: &str, binds: Vec<Bind>) -> Vec<String> {
        let mut query = Statements::one(&format!("EXPLAIN QUERY PLAN {sql}"));
        for bind in binds {
            query.bind(bind);
        }
        query
            .sqlite_rows(store.db.sqlite().unwrap())
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<String, _>(3))
            .collect()
    }

    #[tokio::test]
    async fn an_event_page_looks_up_its_own_events_only() {
        let (store, _writer, dir) = archive("event-plans", 30).await;
        let db = &store.db;
        let pages: [(String, Vec<Bind>); 4] = [
            (
                offset_page_sql(db, "", Order::Newest),
                vec![100.into(), 200.into()],
            ),
            (
                offset_page_sql(
                    db,
                    "WHERE e.origin_ms >= ? AND e.magnitude >= ?",
                    Order::Newest,
                ),
                vec![0.into(), Some(3.0).into(), 100.into(), 200.into()],
            ),
            (
                offset_page_sql(db, "WHERE e.source = ?", Order::Oldest),
                vec!["cq".into(), 100.into(), 200.into()],
            ),
            (listed_page_sql(db), vec!["[3,1,2]".into()]),
        ];
        for (sql, binds) in pages {
            let steps = plan(&store, &sql, binds).await;
            assert!(
                steps
                    .iter()
                    .any(|s| s == "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)")
                    && !steps.iter().any(|s| s.starts_with("SCAN e USING INDEX")),
                "events are looked up by the page's rowids, never walked: {steps:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_kept_list_is_caught_up_from_the_new_versions_without_walking_events() {
        let (store, _writer, dir) = archive("catch-up-plan", 30).await;
        let sql = changed_events_sql(&store.db, "e.source = ? AND e.magnitude >= ?");
        let steps = plan(
            &store,
            &sql,
            vec!["cq".into(), Some(4.0).into(), 10.into(), 20.into()],
        )
        .await;
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SEARCH reports USING INTEGER PRIMARY KEY"))
                && !steps.iter().any(|s| s.starts_with("SCAN")),
            "versions by id, their events by key: {steps:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

mod listed_events_tests {
    use super::super::*;
    use crate::test_archive::archive;
    use crate::{Incoming, UnitKind, UnitRecord};
    use sqlx::Row;
    use wolfx_core::Report;

    /// A version of `event` ("channel/event id") on its channel; `n` makes it distinct.
    fn version(
        session: i64,
        n: i64,
        event: &str,
        revision: i64,
        origin_at: Option<&str>,
        epicenter: &str,
        magnitude: f64,
    ) -> Incoming {
        let (source, event) = event.split_once('/').unwrap();
        Incoming {
            session_id: session,
            reception: None,
            received_at: format!("2025-06-01T00:{:02}:{:02}Z", n / 60, n % 60),
            frame: format!("{{\"type\":\"{source}_eew\",\"n\":{n}}}").into_bytes(),
            marker: crate::Marker::PrimaryPush,
            units: vec![UnitRecord {
                unit_index: 0,
                type_tag: Some(format!("{source}_eew")),
                kind: UnitKind::Report {
                    source: source.into(),
                    identity: format!("{n:064}"),
                    report: Box::new(Report {
                        event_id: format!("{source}:{event}"),
                        upstream_event_id: event.into(),
                        revision,
                        issued_at: None,
                        origin_at: origin_at.map(str::to_string),
                        epicenter: Some(epicenter.into()),
                        // Spread over the map by `n`, and one without a place.
                        latitude: (n != 4).then_some(28.0 + n as f64 * 0.5),
                        longitude: (n != 4).then_some(100.0 + n as f64),
                        depth_km: (n != 4).then_some(5.0 * n as f64),
                        magnitude: Some(magnitude),
                        max_intensity: None,
                        is_final: false,
                        is_cancelled: false,
                        is_test: false,
                    }),
                    decoder_name: "test".into(),
                    decoder_sha256: "0".repeat(64),
                },
            }],
        }
    }

    fn filters() -> Vec<EventFilter> {
        let place = |place: crate::PlaceFilter| EventFilter {
            place,
            page: 1,
            limit: 1000,
            ..Default::default()
        };
        let filter =
            |source: Option<&str>, q: Option<&str>, min: Option<f64>, from: Option<i64>| {
                EventFilter {
                    source: source.map(str::to_string),
                    from_ms: from,
                    to_ms: None,
                    q: q.map(str::to_string),
                    place: crate::PlaceFilter {
                        min_magnitude: min,
                        ..Default::default()
                    },
                    order: Default::default(),
                    page: 1,
                    limit: 1000,
                }
            };
        vec![
            filter(None, None, None, None),
            filter(Some("sc"), None, Some(4.0), None),
            filter(None, Some("四川"), None, None),
            filter(None, None, Some(5.0), None),
            filter(
                None,
                None,
                None,
                osds_time::parse_ms("2025-01-01T00:00:00Z"),
            ),
            place(crate::PlaceFilter {
                area: Some(crate::GeoBox {
                    min_latitude: 29.0,
                    max_latitude: 32.0,
                    min_longitude: 100.0,
                    max_longitude: 110.0,
                }),
                ..Default::default()
            }),
            place(crate::PlaceFilter {
                circle: Some(crate::Circle {
                    latitude: 30.5,
                    longitude: 105.0,
                    min_km: 50.0,
                    max_km: 450.0,
                }),
                ..Default::default()
            }),
            place(crate::PlaceFilter {
                min_depth_km: Some(10.0),
                max_depth_km: Some(40.0),
                max_magnitude: Some(5.5),
                start_ms: osds_time::parse_ms("2025-05-02T00:00:00Z"),
                end_ms: osds_time::parse_ms("2025-05-05T00:00:00Z"),
                ..Default::default()
            }),
            EventFilter {
                order: Order::Oldest,
                ..filter(Some("sc"), None, None, None)
            },
            EventFilter {
                order: Order::Largest,
                ..filter(None, None, None, None)
            },
            EventFilter {
                order: Order::Smallest,
                ..filter(None, Some("四川"), None, None)
            },
        ]
    }

    /// Great-circle km by the haversine formula: not the filter's own unit vectors.
    fn haversine_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
        let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
        let dp = p2 - p1;
        let dl = (lon2 - lon1).to_radians();
        let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
        2.0 * crate::positions::EARTH_RADIUS_KM * a.sqrt().asin()
    }

    /// What the filter lists, every event read and filtered and ordered here: ids in list order.
    async fn expected(store: &Store, filter: &EventFilter) -> Vec<String> {
        let query = Statements::one(
            "SELECT id, source, origin_ms, magnitude, epicenter, latitude, longitude, depth_km, sort_ms, \
             last_report_id FROM events",
        );
        let rows = query.sqlite_rows(store.db.sqlite().unwrap()).await.unwrap();
        let place = &filter.place;
        let within = |value: Option<f64>, low: Option<f64>, high: Option<f64>| {
            (low.is_none() && high.is_none())
                || value.is_some_and(|v| low.is_none_or(|l| v >= l) && high.is_none_or(|h| v <= h))
        };
        let mut kept: Vec<(String, Option<f64>, i64, i64)> = rows
            .iter()
            .filter(|row| {
                let origin: Option<i64> = row.get("origin_ms");
                let magnitude: Option<f64> = row.get("magnitude");
                let epicenter: Option<String> = row.get("epicenter");
                let (lat, lon): (Option<f64>, Option<f64>) =
                    (row.get("latitude"), row.get("longitude"));
                let depth: Option<f64> = row.get("depth_km");
                let source: String = row.get("source");
                let time_ok = |bound: Option<i64>, after: bool| {
                    bound.is_none_or(|b| origin.is_some_and(|o| if after { o >= b } else { o < b }))
                };
                filter.source.as_ref().is_none_or(|s| *s == source)
                    && time_ok(filter.from_ms, true)
                    && time_ok(filter.to_ms, false)
                    && time_ok(place.start_ms, true)
                    && time_ok(place.end_ms, false)
                    && within(magnitude, place.min_magnitude, place.max_magnitude)
                    && within(depth, place.min_depth_km, place.max_depth_km)
                    && filter.q.as_ref().is_none_or(|q| {
                        epicenter.as_deref().is_some_and(|e| e.contains(q.as_str()))
                    })
                    && place.area.is_none_or(|a| {
                        lat.zip(lon).is_some_and(|(lat, lon)| {
                            (a.min_latitude..=a.max_latitude).contains(&lat)
                                && (a.min_longitude..=a.max_longitude).contains(&lon)
                        })
                    })
                    && place.circle.is_none_or(|c| {
                        lat.zip(lon).is_some_and(|(lat, lon)| {
                            let d = haversine_km(c.latitude, c.longitude, lat, lon);
                            d >= c.min_km && d <= c.max_km
                        })
                    })
            })
            .map(|row| {
                (
                    row.get::<String, _>("id"),
                    row.get::<Option<f64>, _>("magnitude"),
                    row.get::<i64, _>("sort_ms"),
                    row.get::<i64, _>("last_report_id"),
                )
            })
            .collect();
        let newest = |a: &(String, Option<f64>, i64, i64), b: &(String, Option<f64>, i64, i64)| {
            (b.2, b.3).cmp(&(a.2, a.3))
        };
        // Unknown magnitudes last, either way.
        let by_magnitude = |a: Option<f64>, b: Option<f64>, largest: bool| match (a, b) {
            (Some(a), Some(b)) if largest => b.total_cmp(&a),
            (Some(a), Some(b)) => a.total_cmp(&b),
            (a, b) => a.is_none().cmp(&b.is_none()),
        };
        kept.sort_by(|a, b| match filter.order {
            Order::Newest => newest(a, b),
            Order::Oldest => newest(b, a),
            Order::Largest => by_magnitude(a.1, b.1, true).then(newest(a, b)),
            Order::Smallest => by_magnitude(a.1, b.1, false).then(newest(a, b)),
        });
        kept.into_iter().map(|k| k.0).collect()
    }

    async fn check_every_filter(store: &Store, round: &str) {
        let horizon = store.high_water().await.unwrap();
        for filter in filters() {
            let page = store.events(&filter, horizon).await.unwrap();
            let listed: Vec<String> = page.items.iter().map(|e| e.id.clone()).collect();
            let want = expected(store, &filter).await;
            assert_eq!(listed, want, "{round}: {}", filter.count_key());
            assert_eq!(
                page.total,
                want.len() as i64,
                "{round}: {}",
                filter.count_key()
            );
        }
    }

    /// Lists kept by earlier requests and caught up from the versions since are what a full read gives: new
    /// events in their places, events that moved (an origin time learnt later) moved, events that stopped
    /// matching (a lower magnitude, a new epicentre) gone, and others' places kept.
    #[tokio::test]
    async fn kept_lists_caught_up_after_new_versions_list_what_a_full_read_lists() {
        let (store, mut writer, dir) = archive("listed-catch-up", 0).await;
        let session = writer
            .open_session(
                "/all_eew",
                crate::SocketRole::Redundant,
                "ws://test.invalid/all_eew",
            )
            .await
            .unwrap();
        let t = |s: &str| Some(format!("2025-05-0{s}T00:00:00Z"));
        let first = vec![
            version(session, 1, "sc/a", 1, t("1").as_deref(), "四川泸定", 5.5),
            version(session, 2, "sc/b", 1, None, "四川雅安", 4.2),
            version(session, 3, "cq/c", 1, t("3").as_deref(), "重庆荣昌", 3.9),
            version(session, 4, "sc/d", 1, t("2").as_deref(), "四川宜宾", 6.1),
            version(session, 5, "cea/e", 1, t("4").as_deref(), "云南大理", 5.0),
        ];
        writer.ingest(&first).await.unwrap();
        check_every_filter(&store, "first read").await;

        let rounds = [
            // b learns its origin time (it moves), a falls below 5 and 4.0 stays, c is revised in place.
            vec![
                version(session, 6, "sc/b", 2, t("5").as_deref(), "四川雅安", 4.2),
                version(session, 7, "sc/a", 2, t("1").as_deref(), "四川泸定", 4.8),
                version(session, 8, "cq/c", 2, t("3").as_deref(), "重庆荣昌", 4.0),
            ],
            // A new event that sorts in the middle; d's new epicentre is no longer in 四川.
            vec![
                version(session, 9, "sc/f", 1, t("3").as_deref(), "四川甘孜", 5.2),
                version(session, 10, "sc/d", 2, t("2").as_deref(), "云南昭通", 6.0),
            ],
            // An older revision arriving late does not become the latest, but the event changed.
            vec![version(
                session,
                11,
                "sc/f",
                0,
                t("3").as_deref(),
                "四川甘孜",
                3.0,
            )],
        ];
        for (index, round) in rounds.iter().enumerate() {
            writer.ingest(round).await.unwrap();
            check_every_filter(&store, &format!("after round {}", index + 1)).await;
        }

        // The last answers came from caught-up lists, not from reading each list again: a marker kept in one
        // list at the current horizon is still in it after one more version.
        let horizon = store.high_water().await.unwrap();
        let everything = filters().remove(0);
        let key = everything.count_key();
        let mut marked = store.event_matches.lock().unwrap().get(&key).unwrap();
        assert_eq!(marked.horizon, horizon);
        let mut events = marked.events.as_ref().clone();
        events.push(Listed {
            sort_ms: i64::MIN,
            last_id: 0,
            rowid: i64::MAX,
            magnitude: None,
        });
        marked.events = std::sync::Arc::new(events);
        store
            .event_matches
            .lock()
            .unwrap()
            .keep(key.clone(), marked);
        writer
            .ingest(&[version(
                session,
                12,
                "cq/g",
                1,
                t("6").as_deref(),
                "重庆",
                4.4,
            )])
            .await
            .unwrap();
        let horizon = store.high_water().await.unwrap();
        let page = store.events(&everything, horizon).await.unwrap();
        assert_eq!(
            page.total,
            expected(&store, &everything).await.len() as i64 + 1,
            "the list was caught up from the kept one"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
