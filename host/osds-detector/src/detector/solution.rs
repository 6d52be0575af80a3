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

    /// Locates an event from its onsets (all its picks while it is young), the nearest to its previous
    /// solution first, read the way that explains them best of [`Detector::readings_to_try`].
    /// Returns the hypocentre, the members it located with, and that reading.
    pub(super) fn locate(
        &self,
        index: usize,
        now_ms: i64,
    ) -> Option<(Hypocentre, Vec<usize>, Reading)> {
        let event = &self.events[index];
        let young = event.onset_picks() < MATURE_PICKS || event.last.is_none();
        let mut candidates: Vec<usize> = (0..event.members.len())
            .filter(|&i| young || event.members[i].phase == Phase::Onset)
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
        // The picks of `chosen` read as `reading` says (in its order: the solution's residuals and `used`
        // follow it), then a deep event's S onsets on the same stations.
        let picks = |chosen: &[usize], reading: Reading| -> Vec<Pick> {
            let pick = |i: usize, arrival: Arrival, at: i64| Pick {
                arrival,
                latitude: self.positions[event.members[i].station].latitude,
                longitude: self.positions[event.members[i].station].longitude,
                at: at as f64 / 1000.0,
            };
            let onset = chosen.iter().map(|&i| {
                let m = &event.members[i];
                // First read as a deep quake far away, every pick is an S onset.
                let wave = if reading == Reading::FarS && event.reading != Reading::FarS {
                    Arrival::S
                } else {
                    m.wave(reading)
                };
                pick(i, wave, m.pick_ms)
            });
            let s_onsets = chosen.iter().filter_map(|&i| {
                let at = event.members[i]
                    .s_pick_ms
                    .filter(|_| reading == Reading::P)?;
                Some(pick(i, Arrival::S, at))
            });
            onset.chain(s_onsets).collect()
        };
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
        // Read as S onsets, only the stations nearest the source say when its S wave came (see
        // `S_ONSET_SPAN_KM`).
        let nearest = candidates.first().map_or(0.0, from_center);
        let near_s_onsets: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| !event.members[*i].inside || from_center(i) <= nearest + S_ONSET_SPAN_KM)
            .collect();
        // Whether `h` is inside the network of the stations of `chosen`.
        let covers = |h: &Hypocentre, chosen: &[usize]| {
            let stations = chosen.iter().map(|&i| {
                let p = &self.positions[event.members[i].station];
                (p.latitude, p.longitude)
            });
            covered(h, nearest_km(h, stations))
        };
        // Located from its P picks outside the network so far (see `FAR_P_PICKS`).
        let far = event.reading == Reading::P && previous.is_some_and(|h| !covers(h, &candidates));
        let current = event.reading;
        self.readings_to_try(event, &candidates, far)
            .into_iter()
            .filter_map(|reading| {
                let chosen = if reading == Reading::S {
                    &near_s_onsets
                } else {
                    &candidates
                };
                // Stations silent inside another quake's shaking say nothing of when an S wave reached them:
                // it need not rise above that shaking (nor a deep quake's weak P wave far away).
                let quiet: &[Quiet] = if reading == Reading::P { &quiet } else { &[] };
                let h = locate_near(
                    &self.config.travel_times,
                    &picks(chosen, reading),
                    quiet,
                    now_ms as f64 / 1000.0,
                    center,
                )?;
                let fits = match reading {
                    Reading::P => true,
                    // Read as S onsets inside another quake's shaking they must be a quake beside it, and
                    // after it: later than that quake's fault, breaking on, could have reached there (a great
                    // quake's rupture ending 200 km from its epicentre 70 s later sends S waves that fit a
                    // quake there).
                    Reading::S => self.reported_sources(Some(event)).any(|source| {
                        let o = source.h;
                        let apart = distance_km(o.latitude, o.longitude, h.latitude, h.longitude);
                        h.origin > o.origin + apart / RUPTURE_KM_S
                            && in_aftershock_zone(o, source.magnitude, &h)
                    }),
                    // Read as a deep quake's S onsets they must place it inside the network, and its P wave
                    // must have come with some stations' picks (then they locate it too).
                    Reading::FarS => {
                        covers(&h, chosen)
                            && (event.reading == Reading::FarS
                                || self.p_arrivals(event, &h).len() >= FAR_P_PICKS)
                    }
                };
                fits.then(|| (h, reading, chosen.clone()))
            })
            // The way the event was read so far (P at first), unless another sets aside no larger a share of
            // its picks and fits the picks both locate with clearly better (by more than a solution's own
            // tolerance: a few picks fit either) — or, read as a deep quake far away instead of P, as well
            // within that tolerance (read as P, the quake lies where its picks fix no epicentre).
            .reduce(|a, b| {
                // The share of its picks a solution set aside (as outliers).
                let aside = |h: &Hypocentre| {
                    h.used.iter().filter(|u| !**u).count() as f64 / h.used.len().max(1) as f64
                };
                // The rms over the picks both readings locate with (the S one only those near the source).
                let rms = |(h, _, chosen): &(Hypocentre, Reading, Vec<usize>)| {
                    let (n, sum) = chosen
                        .iter()
                        .zip(h.residuals.iter().zip(&h.used))
                        .filter(|(i, (_, used))| **used && near_s_onsets.contains(i))
                        .fold((0usize, 0.0), |(n, sum), (_, (r, _))| (n + 1, sum + r * r));
                    (sum / n.max(1) as f64).sqrt()
                };
                let (kept, other) = if b.1 == current { (b, a) } else { (a, b) };
                let tolerance = crate::locate::UNCERTAINTY_SCORE_S;
                let margin = if other.1 == Reading::FarS && kept.1 == Reading::P {
                    -tolerance
                } else {
                    tolerance
                };
                let better = aside(&other.0) <= aside(&kept.0) && rms(&other) + margin < rms(&kept);
                if better { other } else { kept }
            })
            .map(|(h, reading, chosen)| (h, chosen, reading))
    }

    /// The picks of the stations that picked when the P wave of a source at `h` was due there (within its
    /// window, and any time a station went unobserved before its pick), one per station — but those another
    /// event than `event` took that was reported or located outside the network: they are that quake's
    /// (a distant quake's wavefront, whose P arrivals cross the whole network, or a reported quake's P wave
    /// fit any such source's on dozens of stations).
    pub(super) fn p_arrivals(&self, event: &Event, h: &Hypocentre) -> Vec<RecentPick> {
        let model = &self.config.travel_times;
        let taken: std::collections::HashSet<(usize, i64)> = self
            .events
            .iter()
            .filter(|e| {
                !e.done && !std::ptr::eq(*e, event) && (e.reports > 0 || self.located_outside(e))
            })
            .flat_map(|e| e.members.iter().map(|m| (m.station, m.pick_ms)))
            .collect();
        let mut picks: Vec<RecentPick> = self
            .recent_picks
            .iter()
            .filter(|pick| !taken.contains(&(pick.station, pick.pick_ms)))
            .filter(|pick| {
                let p = &self.positions[pick.station];
                let travel = model.p(
                    distance_km(h.latitude, h.longitude, p.latitude, p.longitude),
                    h.depth_km,
                );
                let off = pick.pick_ms as f64 / 1000.0 - (h.origin + travel);
                is_arrival(Arrival::P, off, travel, pick.unseen_ms as f64 / 1000.0)
            })
            .copied()
            .collect();
        picks.sort_by_key(|pick| (pick.station, pick.pick_ms));
        picks.dedup_by_key(|pick| pick.station);
        picks
    }

    /// The ways an event's picks (its members `candidates`) may be read: as P onsets; as S onsets inside
    /// another quake's shaking when most of them came on stations shaking long before, after a reported
    /// quake's S wave had reached them (there a second quake's weaker P wave does not rise above it; its S
    /// wave does, and read as P it places the quake late and shallow); otherwise as a deep quake far away (see
    /// [`FAR_P_PICKS`]) when the event was located outside the network so far (`far`); and always as they
    /// were read so far.
    pub(super) fn readings_to_try(
        &self,
        event: &Event,
        candidates: &[usize],
        far: bool,
    ) -> Vec<Reading> {
        let inside = candidates
            .iter()
            .filter(|&&i| event.members[i].inside)
            .count();
        match event.reading {
            // Inside another quake's shaking its P wave may not have risen: that quake's S onsets are read
            // there, not a deep quake's far away.
            Reading::P if 2 * inside > candidates.len() => vec![Reading::P, Reading::S],
            Reading::P if far => vec![Reading::P, Reading::FarS],
            Reading::P => vec![Reading::P],
            reading => vec![Reading::P, reading],
        }
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
                arrival: m.wave(event.reading),
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
