//! The solution of an event: its location from its P picks (and the stations that stay silent), its magnitude,
//! and the solution handed to the shaper when something a consumer cares about changed.

use super::*;

impl Detector {
    /// The magnitude an event's members give at hypocentre `h` now; `provisional` also before it can be
    /// reported (see [`crate::magnitude::provisional`]).
    pub(super) fn magnitude_estimate(
        &self,
        event: &Event,
        h: &Hypocentre,
        now_ms: i64,
        provisional: bool,
    ) -> Option<crate::magnitude::Estimate> {
        let now = now_ms as f64 / 1000.0;
        let peaks: Vec<PeakAtStation> = event
            .members
            .iter()
            .map(|m| {
                let p = &self.positions[m.station];
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                PeakAtStation {
                    peak_intensity: m.peak,
                    hypocentral_km: hypocentral_km(d, h.depth_km),
                    wave: Wave::at(
                        now - h.origin,
                        self.config.travel_times.p(d, h.depth_km),
                        self.config.travel_times.s(d, h.depth_km),
                    ),
                }
            })
            .collect();
        if provisional {
            crate::magnitude::provisional(&peaks, h.depth_km)
        } else {
            estimate(&peaks, h.depth_km)
        }
    }

    /// Locates an event from its P picks (all its picks while it is young), the nearest to its previous
    /// solution first. Returns the hypocentre and the members it located with.
    pub(super) fn locate(&self, index: usize, now_ms: i64) -> Option<(Hypocentre, Vec<usize>)> {
        let event = &self.events[index];
        let young = event.p_picks() < MATURE_PICKS || event.last.is_none();
        let mut candidates: Vec<usize> = (0..event.members.len())
            .filter(|&i| young || event.members[i].phase == Phase::P)
            .collect();
        let first = candidates
            .iter()
            .min_by_key(|&&i| event.members[i].pick_ms)
            .map(|&i| self.positions[event.members[i].station])?;
        // A young event is searched around its first station (a lone pick fits anywhere; the search must not
        // wander off with it), a settled one around its previous solution.
        let previous = event.last.as_ref().filter(|_| !young);
        let (center_lat, center_lon) = previous.map_or((first.latitude, first.longitude), |h| {
            (h.latitude, h.longitude)
        });
        let from_center = |i: &usize| {
            let p = &self.positions[event.members[*i].station];
            distance_km(center_lat, center_lon, p.latitude, p.longitude)
        };
        candidates.sort_by(|a, b| from_center(a).total_cmp(&from_center(b)));
        // The nearest picks, and some spread over farther distances: near stations fix the epicentre, the
        // spread of distances fixes the depth (a deep event reaches near stations almost at once).
        if candidates.len() > LOCATE_PICKS {
            let (near, far) = candidates.split_at(LOCATE_NEAR);
            let far: Vec<usize> = far
                .iter()
                .copied()
                .filter(|i| from_center(i) <= SPREAD_KM)
                .collect();
            let take = LOCATE_PICKS - LOCATE_NEAR;
            let mut chosen = near.to_vec();
            if far.len() <= take {
                chosen.extend(far);
            } else {
                chosen.extend((0..take).map(|k| far[k * far.len() / take]));
            }
            candidates = chosen;
        }
        // The P picks (in `candidates`' order: the solution's residuals and `used` follow it), then the S
        // onsets of the same stations.
        let arrivals = |wave: Arrival| {
            candidates.iter().filter_map(move |&i| {
                let m = &event.members[i];
                let at = match wave {
                    Arrival::P => Some(m.pick_ms),
                    Arrival::S => m.s_pick_ms,
                }?;
                Some(Pick {
                    arrival: wave,
                    latitude: self.positions[m.station].latitude,
                    longitude: self.positions[m.station].longitude,
                    at: at as f64 / 1000.0,
                })
            })
        };
        let picks: Vec<Pick> = arrivals(Arrival::P).chain(arrivals(Arrival::S)).collect();
        // Silent stations near the event count against trial points that would have reached them.
        let members: std::collections::HashSet<usize> =
            event.members.iter().map(|m| m.station).collect();
        let quiet: Vec<Quiet> = self
            .positions
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !members.contains(i)
                    && !self.trigger.is_triggered(*i)
                    && !self.trigger.is_faulty(*i)
                    && !self.trigger.is_rising(*i)
                    && self.latest[*i].is_some()
                    && distance_km(p.latitude, p.longitude, center_lat, center_lon)
                        <= SILENT_STATION_KM
            })
            .map(|(_, p)| Quiet {
                latitude: p.latitude,
                longitude: p.longitude,
            })
            .collect();
        let center = previous.map(|h| (h.latitude, h.longitude));
        let h = locate_near(
            &self.config.travel_times,
            &picks,
            &quiet,
            now_ms as f64 / 1000.0,
            center,
        )?;
        Some((h, candidates))
    }

    /// The solution for an event's current state, or `None` when nothing a consumer cares about changed
    /// (unless `force`). It reports the latest location as it is: closing an event never relocates it.
    pub(super) fn solution(&mut self, index: usize, now_ms: i64, force: bool) -> Option<Detection> {
        let event = &self.events[index];
        // A candidate's solution is not converged: it is not reported (its first report is preliminary), and
        // nothing is estimated from it that a later report could carry forward.
        if event.status == EventStatus::Candidate {
            return None;
        }
        let h = event.last.clone()?;
        let now = now_ms as f64 / 1000.0;
        let fresh = self.magnitude_estimate(event, &h, now_ms, false);
        let event = &mut self.events[index];
        let retained = fresh.is_none() && event.magnitude.is_some();
        if let Some(m) = fresh {
            // Rising while well above its first magnitude: its fault is still breaking
            // (`Prediction::breaking_s`).
            let first = *event.first_mw.get_or_insert(m.mw);
            let rising = event.magnitude.is_none_or(|old| m.mw > old.value);
            if rising && m.mw >= first + STILL_BREAKING_RISE {
                event.rose_at_ms = Some(now_ms);
            }
            event.magnitude = Some(Magnitude {
                value: m.mw,
                uncertainty: m.uncertainty,
                stations: m.stations,
                at_ms: now_ms,
                kind: m.kind,
            });
        }
        // Per member: used in the location, and its residual against the predicted P arrival.
        let mut used = vec![false; event.members.len()];
        for (&i, &u) in event.located.iter().zip(&h.used) {
            used[i] = u;
        }
        let picks: Vec<Pick> = event
            .members
            .iter()
            .map(|m| Pick {
                arrival: Arrival::P,
                latitude: self.positions[m.station].latitude,
                longitude: self.positions[m.station].longitude,
                at: m.pick_ms as f64 / 1000.0,
            })
            .collect();
        let residuals = residuals(
            &self.config.travel_times,
            &picks,
            h.latitude,
            h.longitude,
            h.depth_km,
            h.origin,
        );
        let key: ReportKey = (
            event.status,
            used.iter().filter(|u| **u).count(),
            event.magnitude.map(|m| (m.value * 10.0).round() as i64),
            (h.latitude * 10.0).round() as i64,
            (h.longitude * 10.0).round() as i64,
        );
        if !force && event.last_reported == Some(key) {
            return None;
        }
        event.last_reported = Some(key);
        event.reports += 1;
        let (mw, kind, uncertainty, magnitude_stations, magnitude_at) =
            event.magnitude.map_or((None, None, 0.0, 0, now_ms), |m| {
                (
                    Some(m.value),
                    Some(m.kind.to_string()),
                    m.uncertainty,
                    m.stations,
                    m.at_ms,
                )
            });
        let stations: Vec<StationPick> = event
            .members
            .iter()
            .zip(residuals.iter().zip(&used))
            .map(|(m, (residual, used))| {
                let s = &self.stations[m.station];
                let d = distance_km(h.latitude, h.longitude, s.latitude, s.longitude);
                let mut peaks = BTreeMap::new();
                peaks.insert("surface:intensity".to_string(), m.peak);
                StationPick {
                    code: s.code.clone(),
                    name: s.name.clone(),
                    latitude: s.latitude,
                    longitude: s.longitude,
                    distance_km: d,
                    azimuth_degrees: azimuth_degrees(
                        h.latitude,
                        h.longitude,
                        s.latitude,
                        s.longitude,
                    ),
                    pick_at: Some(m.pick_ms),
                    residual_seconds: Some(*residual),
                    used: *used,
                    s_wave_reached: now - h.origin > self.config.travel_times.s(d, h.depth_km),
                    peaks,
                    magnitude: None,
                }
            })
            .collect();
        let s_like = stations.iter().filter(|s| s.s_wave_reached).count() as u32;
        let peaks = event
            .members
            .iter()
            .map(|m| (self.stations[m.station].clone(), m.peak, m.peak_at_ms))
            .collect();
        let solution = Solution {
            event_id: event.id.clone(),
            report_number: event.reports,
            status: event.status,
            first_detected_at: event.first_at_ms,
            reported_at: now_ms,
            recorded_at: now_ms,
            algorithm: self.algorithm.clone(),
            epicenter: format!("{:.2}N {:.2}E", h.latitude, h.longitude),
            region: None,
            epicenter_region: None,
            hypocentre: SolutionHypocentre {
                latitude: h.latitude,
                longitude: h.longitude,
                depth_km: h.depth_km,
                origin_at: (h.origin * 1000.0).round() as i64,
                calculated_at: now_ms,
                score: h.score,
                best_score: h.score,
                depth_fixed: h.depth_fixed,
                quiet_station_count: 0,
                s_like_station_count: s_like,
                horizontal_uncertainty_km: Some(h.horizontal_uncertainty_km),
                depth_uncertainty_km: h.depth_uncertainty_km,
            },
            magnitude: MagnitudeEstimate {
                value: mw,
                kind,
                station_count: magnitude_stations as u32,
                uncertainty,
                calculated_at: magnitude_at,
                retained,
                estimate_location: None,
            },
            selection: None,
            completion: None,
            stations,
            source_frames: None,
        };
        Some(Detection { solution, peaks })
    }
}
