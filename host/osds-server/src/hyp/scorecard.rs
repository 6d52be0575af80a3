//! The live scorecard against JMA: every self-sensing event set against the Japan Meteorological Agency's own
//! determination of the same quake. JMA's warnings (`jma_eew`) and earthquake list (`jma_eqlist`) reach the
//! archive on `/all_eew` as ignored deliveries (they are not one of the four EEW channels, and stay out of the
//! EEW API); the reference decoder component reads them, in the same sandbox as the channel decoders and
//! swapped like them. Each quake's determination is its catalogue entry when the list has one, else its last
//! warning serial (cancelled, drill and assumed-hypocentre warnings say nothing about where a quake was). An
//! event and a quake match, as ShakeAlert counts alerts, within 100 km and 30 s of origin. A public event older
//! than the grace period that matches none is counted as possibly false; a JMA quake of M 3 or more inside the
//! network (within 150 km of a station) that no event matched, as missed.

use osds_api::scorecard::{Comparison, Scorecard, SharedScorecard, Summary};
use osds_detector::geo::distance_km;
use osds_runtime::SharedReference;
use osds_runtime::units;
use osds_store::{HypFilter, Store, UnparsedFilter};
use osds_time::now_ms;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use wolfx_core::jma::{Determination, Kind};

/// An event and a quake this close, with origins this close, are one quake.
pub const MATCH_KM: f64 = 100.0;
pub const MATCH_S: f64 = 30.0;
/// Neither side is counted as unmatched before this long after the quake: the other may still report it.
const GRACE_MS: i64 = 10 * 60_000;
/// How far back the scorecard looks for JMA's frames (by when they arrived) and for our events (by when they
/// were first detected); our events around an older quake of JMA's are looked up by its origin.
const LOOKBACK_MS: i64 = 30 * 86_400_000;
/// How often it is recomputed.
const REFRESH: Duration = Duration::from_secs(10);
/// JMA quakes smaller than this, or farther than this from every station, are not ours to miss.
const MISSABLE_MW: f64 = 3.0;
const COVERAGE_KM: f64 = 150.0;
/// Ids listed in the summary, of each kind.
const LISTED: usize = 10;

/// One quake as JMA determined it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quake {
    pub event_id: String,
    pub determination: &'static str,
    pub origin_ms: i64,
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    pub first_warning_ms: Option<i64>,
}

/// One of our public events as the scorecard reads it: its latest solution and its first report's time.
#[derive(Debug, Clone, PartialEq)]
pub struct Ours {
    pub id: String,
    pub origin_ms: i64,
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: f64,
    pub magnitude: Option<f64>,
    pub first_reported_ms: i64,
}

fn ms(rfc3339: &Option<String>) -> Option<i64> {
    osds_time::parse_ms(rfc3339.as_deref()?)
}

/// JMA's quakes from its determinations, grouped by its event id; a list entry and a warning of one quake
/// under two ids (within 10 s and 50 km) are one quake, its list entry.
pub fn quakes(determinations: &BTreeMap<String, Vec<Determination>>) -> Vec<Quake> {
    let mut quakes: Vec<Quake> = Vec::new();
    for quake in by_event_id(determinations) {
        let same = quakes.iter_mut().find(|q| {
            (q.origin_ms - quake.origin_ms).abs() <= 10_000
                && distance_km(q.latitude, q.longitude, quake.latitude, quake.longitude) <= 50.0
        });
        match same {
            Some(known) => {
                let first_warning_ms = known
                    .first_warning_ms
                    .into_iter()
                    .chain(quake.first_warning_ms)
                    .min();
                if quake.determination == "catalogue" && known.determination != "catalogue" {
                    *known = quake;
                }
                known.first_warning_ms = first_warning_ms;
            }
            None => quakes.push(quake),
        }
    }
    quakes
}

fn by_event_id(determinations: &BTreeMap<String, Vec<Determination>>) -> Vec<Quake> {
    determinations
        .iter()
        .filter_map(|(event_id, all)| {
            let real: Vec<&Determination> = all.iter().filter(|d| !d.is_test).collect();
            // A cancelled warning was no quake; an assumed hypocentre is no location.
            if real.iter().any(|d| d.is_cancelled) {
                return None;
            }
            let first_warning_ms = real
                .iter()
                .filter(|d| d.kind == Kind::Warning)
                .filter_map(|d| ms(&d.issued_at))
                .min();
            let located = |d: &&&Determination| {
                !d.is_assumed && d.latitude.is_some() && d.longitude.is_some()
            };
            let chosen = real
                .iter()
                .filter(located)
                .find(|d| d.kind == Kind::Catalogue)
                .or_else(|| {
                    real.iter()
                        .filter(located)
                        .filter(|d| d.kind == Kind::Warning)
                        .max_by_key(|d| d.serial)
                })?;
            Some(Quake {
                event_id: event_id.clone(),
                determination: match chosen.kind {
                    Kind::Catalogue => "catalogue",
                    Kind::Warning => "warning",
                },
                origin_ms: ms(&chosen.origin_at)?,
                latitude: chosen.latitude?,
                longitude: chosen.longitude?,
                depth_km: chosen.depth_km,
                magnitude: chosen.magnitude,
                first_warning_ms,
            })
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Matches our events with JMA's quakes, one to one, nearest first, and sums up. `stations` bounds the
/// quakes we could have missed; `now` the grace period.
pub fn score(
    ours: &[Ours],
    quakes: &[Quake],
    stations: &[(f64, f64)],
    now: i64,
    reference: String,
) -> Scorecard {
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (i, o) in ours.iter().enumerate() {
        for (j, q) in quakes.iter().enumerate() {
            let km = distance_km(o.latitude, o.longitude, q.latitude, q.longitude);
            let seconds = (o.origin_ms - q.origin_ms).abs() as f64 / 1000.0;
            if km <= MATCH_KM && seconds <= MATCH_S {
                pairs.push((km + seconds, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut our_taken, mut quake_taken) = (vec![false; ours.len()], vec![false; quakes.len()]);
    let mut comparisons = std::collections::HashMap::new();
    for (_, i, j) in pairs {
        if our_taken[i] || quake_taken[j] {
            continue;
        }
        (our_taken[i], quake_taken[j]) = (true, true);
        let (o, q) = (&ours[i], &quakes[j]);
        comparisons.insert(
            o.id.clone(),
            Comparison {
                agency: wolfx_core::jma::AGENCY,
                event_id: q.event_id.clone(),
                determination: q.determination,
                origin_at: q.origin_ms,
                latitude: q.latitude,
                longitude: q.longitude,
                depth_km: q.depth_km,
                magnitude: q.magnitude,
                first_warning_at: q.first_warning_ms,
                epicentre_km: distance_km(o.latitude, o.longitude, q.latitude, q.longitude),
                depth_difference_km: q.depth_km.map(|d| o.depth_km - d),
                magnitude_difference: o.magnitude.zip(q.magnitude).map(|(a, b)| a - b),
                lead_seconds: q
                    .first_warning_ms
                    .map(|w| (w - o.first_reported_ms) as f64 / 1000.0),
            },
        );
    }
    let mut unmatched: Vec<&Ours> = ours
        .iter()
        .zip(&our_taken)
        .filter(|(o, taken)| !**taken && now - o.origin_ms >= GRACE_MS)
        .map(|(o, _)| o)
        .collect();
    unmatched.sort_by_key(|o| std::cmp::Reverse(o.origin_ms));
    let mut missed: Vec<&Quake> = quakes
        .iter()
        .zip(&quake_taken)
        .filter(|(q, taken)| {
            !**taken
                && now - q.origin_ms >= GRACE_MS
                && q.magnitude.is_some_and(|m| m >= MISSABLE_MW)
                && stations.iter().any(|&(lat, lon)| {
                    distance_km(lat, lon, q.latitude, q.longitude) <= COVERAGE_KM
                })
        })
        .map(|(q, _)| q)
        .collect();
    missed.sort_by_key(|q| std::cmp::Reverse(q.origin_ms));
    let all: Vec<&Comparison> = comparisons.values().collect();
    let summary = Summary {
        agency: wolfx_core::jma::AGENCY,
        reference,
        matched: comparisons.len(),
        ours_unmatched: unmatched.len(),
        agency_missed: missed.len(),
        median_epicentre_km: median(all.iter().map(|c| c.epicentre_km).collect()),
        median_depth_difference_km: median(
            all.iter().filter_map(|c| c.depth_difference_km).collect(),
        ),
        median_magnitude_difference: median(
            all.iter().filter_map(|c| c.magnitude_difference).collect(),
        ),
        median_lead_seconds: median(all.iter().filter_map(|c| c.lead_seconds).collect()),
        unmatched_event_ids: unmatched
            .iter()
            .take(LISTED)
            .map(|o| o.id.clone())
            .collect(),
        missed_agency_event_ids: missed
            .iter()
            .take(LISTED)
            .map(|q| q.event_id.clone())
            .collect(),
        determinations: 0,
        undecodable_frames: 0,
        updated_at: Some(now),
    };
    Scorecard {
        comparisons,
        summary,
    }
}

/// Our event as a stored report shows it: its latest report's solution, and when its first was published.
fn ours(id: &str, first: &Value, latest: &Value) -> Option<Ours> {
    let h = &latest["event"]["hypEstimate"];
    Some(Ours {
        id: id.to_string(),
        origin_ms: h["originAt"].as_i64()?,
        latitude: h["latitude"].as_f64()?,
        longitude: h["longitude"].as_f64()?,
        depth_km: h["depthKm"].as_f64()?,
        magnitude: latest["event"]["magnitude"].as_f64(),
        first_reported_ms: first["reportedAt"].as_i64()?,
    })
}

/// Keeps the scorecard: reads JMA's new frames from the archive as they come, our events, and swaps in the
/// result every few seconds.
pub struct ScorecardTask {
    store: Store,
    reference: SharedReference,
    scorecard: SharedScorecard,
    stations: Vec<(f64, f64)>,
    determinations: BTreeMap<String, Vec<Determination>>,
    /// The last delivery read, and with which reference decoder (a new one reads everything again).
    after: i64,
    read_with: Option<String>,
    undecodable: usize,
}

impl ScorecardTask {
    pub fn new(
        store: Store,
        reference: SharedReference,
        scorecard: SharedScorecard,
        stations: Vec<(f64, f64)>,
    ) -> ScorecardTask {
        ScorecardTask {
            store,
            reference,
            scorecard,
            stations,
            determinations: BTreeMap::new(),
            after: 0,
            read_with: None,
            undecodable: 0,
        }
    }

    /// Recomputes every few seconds until `shutdown` turns true.
    pub async fn run(mut self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            if let Err(error) = self.refresh().await {
                tracing::warn!(error = %format!("{error:#}"), "hyp scorecard: not updated");
            }
            tokio::select! {
                _ = tokio::time::sleep(REFRESH) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    async fn read_determinations(&mut self, now: i64) -> anyhow::Result<()> {
        let reference = self.reference.load_full();
        let identity = format!("{}@{}", reference.info().name, reference.info().sha256);
        if self.read_with.as_ref() != Some(&identity) {
            // Another reader: what it makes of every frame may differ.
            self.determinations.clear();
            self.after = 0;
            self.undecodable = 0;
            self.read_with = Some(identity);
        }
        let filter = UnparsedFilter {
            ignored_tags: reference.info().claims.clone(),
            source: Some(reference.info().agency.clone()),
            since: Some(osds_time::rfc3339_ms(now - LOOKBACK_MS)),
            until: None,
        };
        loop {
            let page = self
                .store
                .unparsed_deliveries(&filter, self.after, 500)
                .await?;
            let Some(last) = page.last() else { break };
            self.after = last.delivery_id;
            for archived in &page {
                let Some(unit) = units::split(&archived.frame)
                    .into_iter()
                    .nth(archived.unit_index as usize)
                else {
                    continue;
                };
                match reference.decode(&unit.bytes) {
                    Ok(found) => {
                        for d in found {
                            self.determinations
                                .entry(d.event_id.clone())
                                .or_default()
                                .push(d);
                        }
                    }
                    Err(error) => {
                        self.undecodable += 1;
                        tracing::debug!(delivery = archived.delivery_id, %error, "hyp scorecard: a JMA frame could not be read");
                    }
                }
            }
        }
        Ok(())
    }

    /// Our public events first detected in `from_ms..to_ms`.
    async fn read_ours(&self, from_ms: i64, to_ms: Option<i64>) -> anyhow::Result<Vec<Ours>> {
        let mut all = Vec::new();
        for page in 1.. {
            let filter = HypFilter {
                q: None,
                from_ms,
                to_ms,
                place: Default::default(),
                order: Default::default(),
                page,
                limit: 100,
            };
            let (rows, total) = self.store.hyp_events(&filter).await?;
            for row in &rows {
                let first = self.store.hyp_report(&row.id, 1).await?;
                let latest = self.store.hyp_report(&row.id, row.latest_number).await?;
                let parsed = |r: Option<osds_store::HypReportRow>| {
                    r.and_then(|r| serde_json::from_slice::<Value>(&r.payload).ok())
                };
                if let (Some(first), Some(latest)) = (parsed(first), parsed(latest))
                    && let Some(event) = ours(&row.id, &first, &latest)
                {
                    all.push(event);
                }
            }
            if rows.is_empty() || page * 100 >= total {
                break;
            }
        }
        Ok(all)
    }

    async fn refresh(&mut self) -> anyhow::Result<()> {
        let now = now_ms();
        self.read_determinations(now).await?;
        let quakes = quakes(&self.determinations);
        // Our recent events, and those first detected around each of JMA's quakes (however old the quake).
        let mut ours = self.read_ours(now - LOOKBACK_MS, None).await?;
        for quake in &quakes {
            for event in self
                .read_ours(quake.origin_ms - 60_000, Some(quake.origin_ms + 600_000))
                .await?
            {
                if !ours.iter().any(|o| o.id == event.id) {
                    ours.push(event);
                }
            }
        }
        let reference = self.read_with.clone().unwrap_or_default();
        let mut scorecard = score(&ours, &quakes, &self.stations, now, reference);
        scorecard.summary.determinations = self.determinations.values().map(Vec::len).sum();
        scorecard.summary.undecodable_frames = self.undecodable;
        let s = &scorecard.summary;
        metrics::gauge!("osds_hyp_scorecard_matched").set(s.matched as f64);
        metrics::gauge!("osds_hyp_scorecard_ours_unmatched").set(s.ours_unmatched as f64);
        metrics::gauge!("osds_hyp_scorecard_agency_missed").set(s.agency_missed as f64);
        if let Some(km) = s.median_epicentre_km {
            metrics::gauge!("osds_hyp_scorecard_median_epicentre_km").set(km);
        }
        self.scorecard.store(std::sync::Arc::new(scorecard));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(id: &str, serial: i64, lat: f64, issued: &str, origin: &str) -> Determination {
        Determination {
            kind: Kind::Warning,
            event_id: id.into(),
            serial: Some(serial),
            issued_at: Some(issued.into()),
            origin_at: Some(origin.into()),
            place: None,
            latitude: Some(lat),
            longitude: Some(135.0),
            depth_km: Some(10.0),
            magnitude: Some(5.0),
            is_final: false,
            is_cancelled: false,
            is_test: false,
            is_assumed: false,
        }
    }

    fn determinations(all: Vec<Determination>) -> BTreeMap<String, Vec<Determination>> {
        let mut map: BTreeMap<String, Vec<Determination>> = BTreeMap::new();
        for d in all {
            map.entry(d.event_id.clone()).or_default().push(d);
        }
        map
    }

    const ORIGIN: &str = "2026-11-26T00:00:00Z";
    const ORIGIN_MS: i64 = 1_795_651_200_000;

    #[test]
    fn a_quake_is_its_last_located_warning_or_its_catalogue_entry_and_cancelled_ones_are_none() {
        let mut catalogue = warning("B", 0, 36.0, ORIGIN, ORIGIN);
        catalogue.kind = Kind::Catalogue;
        catalogue.serial = None;
        let mut cancelled = warning("C", 2, 37.0, "2026-11-26T00:00:20Z", ORIGIN);
        cancelled.is_cancelled = true;
        let mut assumed = warning("A", 3, 99.0, "2026-11-26T00:00:15Z", ORIGIN);
        assumed.is_assumed = true;
        let quakes = quakes(&determinations(vec![
            warning("A", 1, 35.0, "2026-11-26T00:00:08Z", ORIGIN),
            warning("A", 2, 35.1, "2026-11-26T00:00:10Z", ORIGIN),
            assumed,
            warning("B", 1, 35.9, "2026-11-26T00:00:09Z", ORIGIN),
            catalogue,
            warning("C", 1, 37.0, "2026-11-26T00:00:10Z", ORIGIN),
            cancelled,
        ]));
        assert_eq!(quakes.len(), 2);
        assert_eq!(quakes[0].latitude, 35.1, "the last located serial");
        assert_eq!(quakes[0].first_warning_ms, Some(ORIGIN_MS + 8_000));
        assert_eq!(quakes[1].determination, "catalogue");
        assert_eq!(quakes[1].latitude, 36.0);
    }

    #[test]
    fn events_and_quakes_match_within_100_km_and_30_s_and_the_rest_is_counted() {
        let quake = |id: &str, lat: f64, dt: i64, m: f64| Quake {
            event_id: id.into(),
            determination: "warning",
            origin_ms: ORIGIN_MS + dt,
            latitude: lat,
            longitude: 135.0,
            depth_km: Some(10.0),
            magnitude: Some(m),
            first_warning_ms: Some(ORIGIN_MS + dt + 8_000),
        };
        let event = |id: &str, lat: f64, dt: i64| Ours {
            id: id.into(),
            origin_ms: ORIGIN_MS + dt,
            latitude: lat,
            longitude: 135.0,
            depth_km: 15.0,
            magnitude: Some(5.2),
            first_reported_ms: ORIGIN_MS + dt + 6_000,
        };
        let quakes = [
            quake("near", 35.05, 1_000, 5.0),
            quake("missed", 33.0, 0, 4.0),
            quake("small", 34.0, 0, 2.5),
            quake("far-away", 20.0, 0, 6.0),
        ];
        let ours = [event("ours-1", 35.0, 0), event("ours-false", 38.0, 0)];
        let stations = [(35.0, 135.0), (33.1, 135.0), (34.0, 135.0)];
        let now = ORIGIN_MS + 3_600_000;
        let card = score(&ours, &quakes, &stations, now, "jma-reference@x".into());
        let c = &card.comparisons["ours-1"];
        assert_eq!(c.event_id, "near");
        assert!((c.epicentre_km - 5.6).abs() < 0.2, "{c:?}");
        assert_eq!(c.depth_difference_km, Some(5.0));
        assert!((c.magnitude_difference.unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(
            c.lead_seconds,
            Some(3.0),
            "we reported 3 s before JMA's first warning"
        );
        let s = &card.summary;
        assert_eq!((s.matched, s.ours_unmatched, s.agency_missed), (1, 1, 1));
        assert_eq!(s.unmatched_event_ids, ["ours-false"]);
        assert_eq!(
            s.missed_agency_event_ids,
            ["missed"],
            "not the small one nor the far one"
        );
        // Within the grace period nothing is counted as unmatched or missed yet.
        let early = score(&ours, &quakes, &stations, ORIGIN_MS + 60_000, String::new());
        assert_eq!(
            (early.summary.ours_unmatched, early.summary.agency_missed),
            (0, 0)
        );
    }
}
