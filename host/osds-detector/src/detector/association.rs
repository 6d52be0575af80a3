//! Association: which event a triggered station belongs to — explained by a located event's predicted P
//! arrival or passing waves (or a recently closed one's), joined to a cluster nearby, or a new cluster — and
//! clusters one event's waves explain merged into it.

use super::*;

impl Prediction<'_> {
    /// Whether the event explains `pick`, a trigger at `station` (the station unobserved for `pick.unseen_ms`
    /// before it) with `level` shaking now: as the onset of the wave it is located with there (with the
    /// pick's distance from it), or as its later shaking.
    pub(super) fn explains(
        &self,
        model: &Model,
        station: &StationPosition,
        pick: &Member,
        level: Option<f64>,
    ) -> Option<(Phase, f64)> {
        let h = self.h;
        // A deep quake far away read by its S onsets: its P wave has long passed, a new pick is its S onset.
        let wave = if self.reading == Reading::FarS {
            Arrival::S
        } else {
            pick.wave(self.reading)
        };
        let unseen = pick.unseen_ms as f64 / 1000.0;
        let pick = pick.pick_ms as f64 / 1000.0;
        let d = distance_km(h.latitude, h.longitude, station.latitude, station.longitude);
        let tp = model.p(d, h.depth_km);
        let ts = model.s(d, h.depth_km);
        let onset = wave.travel(model, d, h.depth_km);
        let (early, late) = arrival_window(wave, onset);
        let off = pick - (h.origin + onset);
        // Far from a solution its arrival times are only as good as its epicentre: a distant quake located
        // loosely from one side predicts its wavefront's arrival across the country tens of seconds off.
        let slack = if d > FAR_STATION_KM {
            h.horizontal_uncertainty_km / FAR_APPARENT_KM_S
        } else {
            0.0
        };
        if (-early - slack..=late + slack).contains(&off) {
            return Some((Phase::Onset, off.abs()));
        }
        // A station unobserved for seconds (lost images, an outage) is picked at the first second it is seen
        // risen: its P wave may have come any time before. That is this event's arrival, too loose in time to
        // locate with (after an outage, the ring of stations the wave reached meanwhile, all picked at once,
        // fits a source far below the event).
        // Its misfit is the least the arrival can be off within the spell.
        if (late + slack..=late + slack + unseen).contains(&off) {
            return Some((Phase::Later, (off - unseen).max(0.0)));
        }
        self.passing(d, tp, ts, pick, level, 1.0)
            .then_some((Phase::Later, (pick - (h.origin + tp)).abs()))
    }

    /// Whether the event's P or S wave (or their codas) may have reached `station` at `pick` (seconds) with
    /// `level` shaking, its arrival up to [`WAVEFRONT_EARLY`] times its window's early side sooner than
    /// predicted (far away the table errs by more, and a solution's depth tens of km off moves every far
    /// arrival), and shaking, if `level` is given, no harder than the event explains there. Needs a magnitude.
    pub(super) fn reaches_loosely(
        &self,
        model: &Model,
        station: &StationPosition,
        pick: f64,
        level: Option<f64>,
    ) -> bool {
        let h = self.h;
        let d = distance_km(h.latitude, h.longitude, station.latitude, station.longitude);
        let (tp, ts) = (model.p(d, h.depth_km), model.s(d, h.depth_km));
        self.magnitude.is_some() && self.passing(d, tp, ts, pick, level, WAVEFRONT_EARLY)
    }

    /// Whether a pick at `station` at `pick` (seconds) with `level` shaking came before the event's P wave
    /// was due there, by no more than [`WAVEFRONT_EARLY`] times its window's early side and what its
    /// epicentre's uncertainty moves the arrival, at a level the event explains: its own P wave, sooner than
    /// its solution predicts (far away the table and the stations' delays err by seconds). A quake that
    /// follows it reaches a station sooner only from much nearer.
    pub(super) fn ahead_of_p(
        &self,
        model: &Model,
        station: &StationPosition,
        pick: f64,
        level: Option<f64>,
    ) -> bool {
        let h = self.h;
        let d = distance_km(h.latitude, h.longitude, station.latitude, station.longitude);
        let tp = model.p(d, h.depth_km);
        let off = pick - (h.origin + tp);
        let early =
            WAVEFRONT_EARLY * p_window(tp).0 + h.horizontal_uncertainty_km / FAR_APPARENT_KM_S;
        (-early..0.0).contains(&off) && self.explains_level(d, level)
    }

    /// Whether `level` shaking `d` km from the epicentre, if known, is within what the event's magnitude, if
    /// known, explains there.
    fn explains_level(&self, d: f64, level: Option<f64>) -> bool {
        match (self.magnitude, level) {
            (Some(m), Some(level)) => !shakes_beyond(self.h, m, d, level),
            _ => true,
        }
    }

    /// Whether the event's waves are passing a station `d` km away (P and S `tp`, `ts` seconds after the
    /// origin) at `pick`: its P wave's coda while the fault still breaks, then its S wave and coda, each
    /// window's early side `early_factor` times its own; and `level`, if known, within what its magnitude, if
    /// known, explains. In between, a station far enough away for the two to part has nothing of this event
    /// that would make it rise.
    fn passing(
        &self,
        d: f64,
        tp: f64,
        ts: f64,
        pick: f64,
        level: Option<f64>,
        early_factor: f64,
    ) -> bool {
        let h = self.h;
        let rupture = self.magnitude.map_or(0.0, rupture_seconds);
        let ((early, late), (early_s, late_s)) = (p_window(tp), s_window(ts));
        let (off_p, off_s) = (pick - (h.origin + tp), pick - (h.origin + ts));
        let in_p_coda = (-early_factor * early..=late + rupture).contains(&off_p);
        let in_s =
            (-early_factor * early_s..=coda_seconds(ts, self.magnitude) + late_s).contains(&off_s);
        // Its P coda for as long as its fault was seen breaking beyond its magnitude's rupture, at no more
        // than a P wave's level: a second quake inside its wavefront shakes its first stations harder.
        let still_breaking = !in_p_coda
            && !in_s
            && self
                .breaking_s
                .is_some_and(|breaking| (late + rupture..=late + breaking).contains(&off_p));
        let wave_level = if still_breaking {
            crate::magnitude::P_TO_S_INTENSITY
        } else {
            0.0
        };
        (in_p_coda || in_s || still_breaking)
            && self.explains_level(d, level.map(|level| level + wave_level))
    }
}

/// Whether a station `d` km from an event's epicentre shakes at `level`, more than an event of `mw` there can
/// explain.
pub(super) fn shakes_beyond(h: &Hypocentre, mw: f64, d: f64, level: f64) -> bool {
    level > predicted_intensity(mw, h.depth_km, hypocentral_km(d, h.depth_km)) + level_margin(d)
}

impl Aftermath {
    pub(super) fn prediction(&self) -> Prediction<'_> {
        Prediction {
            h: &self.h,
            magnitude: self.magnitude,
            breaking_s: None,
            reading: Reading::P,
        }
    }
}

impl Detector {
    pub(super) fn prediction(event: &Event) -> Option<Prediction<'_>> {
        event.last.as_ref().map(|h| Prediction {
            h,
            magnitude: event.magnitude.map(|m| m.value),
            breaking_s: None,
            reading: event.reading,
        })
    }

    /// Whether a recently closed event's waves explain a trigger.
    pub(super) fn in_aftermath(&self, pick: &Member) -> bool {
        let here = &self.positions[pick.station];
        let level = self.latest[pick.station];
        self.aftermaths.iter().any(|a| {
            a.prediction()
                .explains(&self.config.travel_times, here, pick, level)
                .is_some()
        })
    }

    pub(super) fn member(
        &self,
        station: usize,
        pick_ms: i64,
        unseen_ms: i64,
        phase: Phase,
        now_ms: i64,
    ) -> Member {
        // The bottom of the scale when the triggering frame has no reading for it (a dropout).
        let level = self.latest[station].unwrap_or(-3.0);
        Member {
            station,
            pick_ms,
            unseen_ms,
            phase,
            peak: level,
            peak_at_ms: now_ms,
            expires_ms: now_ms + membership_ms(level),
            active: true,
            s_pick_ms: None,
            far_s: false,
            // The reported sources are gathered only for a station already shaking (most triggers are not).
            inside: self.shaking_before(station, pick_ms) && {
                let sources: Vec<Prediction> = self.reported_sources(None).collect();
                self.after_s_of_any(station, pick_ms, &sources)
            },
        }
    }

    /// A re-trigger on a P member of an open event located deep, as long after its P pick as the event's
    /// S-P time there (within [`S_ONSET_SHARE`]), is its S onset: recorded, the station a member again. One
    /// that fits only because the station went unobserved for `unseen_ms` before it (the onset may have come
    /// any time then) is the event's too, but too loose in time to locate with: not recorded.
    fn s_onset(&mut self, station: usize, pick_ms: i64, unseen_ms: i64, now_ms: i64) -> bool {
        let here = self.positions[station];
        let model = &self.config.travel_times;
        let found = self.events.iter().enumerate().find_map(|(i, e)| {
            let h = e
                .last
                .as_ref()
                .filter(|h| !e.done && h.depth_km >= DEEP_KM && e.reading == Reading::P)?;
            let k = e.members.iter().position(|m| {
                m.station == station && m.phase == Phase::Onset && m.s_pick_ms.is_none()
            })?;
            let d = distance_km(h.latitude, h.longitude, here.latitude, here.longitude);
            let predicted = model.s(d, h.depth_km) - model.p(d, h.depth_km);
            let observed = (pick_ms - e.members[k].pick_ms) as f64 / 1000.0;
            let unseen = unseen_ms as f64 / 1000.0;
            let (low, high) = (
                predicted * (1.0 - S_ONSET_SHARE),
                predicted * (1.0 + S_ONSET_SHARE),
            );
            let exact = (low..=high).contains(&observed);
            (exact || (observed > high && observed - unseen <= high)).then_some((i, k, exact))
        });
        let Some((i, k, exact)) = found else {
            return false;
        };
        let level = self.latest[station].unwrap_or(-3.0);
        let member = &mut self.events[i].members[k];
        if exact {
            member.s_pick_ms = Some(pick_ms);
        }
        member.active = true;
        member.peak = member.peak.max(level);
        member.expires_ms = member.expires_ms.max(now_ms + membership_ms(member.peak));
        true
    }

    /// Which event the trigger of `station` picked at `pick_ms` (unobserved for `unseen_ms` before it)
    /// belongs to.
    pub(super) fn associate(&mut self, station: usize, pick_ms: i64, unseen_ms: i64, now_ms: i64) {
        let here = self.positions[station];
        let level = self.latest[station];
        // 0. A deep event's S onset on one of its P stations.
        if self.s_onset(station, pick_ms, unseen_ms, now_ms) {
            return;
        }
        let mut member = self.member(station, pick_ms, unseen_ms, Phase::Onset, now_ms);
        // 1. An open, located event that explains it: a P arrival before a later phase, the closest fit first.
        let explained = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.done && e.onset_picks() >= 3 && self.explains_others(e))
            .filter_map(|(i, e)| {
                let (phase, off) = Self::prediction(e)?.explains(
                    &self.config.travel_times,
                    &here,
                    &member,
                    level,
                )?;
                Some((i, phase, off))
            })
            .min_by(|a, b| {
                (a.1 != Phase::Onset, a.2)
                    .partial_cmp(&(b.1 != Phase::Onset, b.2))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        if let Some((i, phase, _)) = explained {
            member.phase = phase;
            let event = &mut self.events[i];
            member.far_s = event.reading == Reading::FarS && phase == Phase::Onset;
            let near = event.last.as_ref().is_none_or(|h| {
                distance_km(h.latitude, h.longitude, here.latitude, here.longitude)
                    <= NEW_STATION_KM
            });
            if event.join(member) && near {
                event.last_new_station_ms = now_ms;
            }
            return;
        }
        // 2. The waves of an event that just ended.
        if self.in_aftermath(&member) {
            self.trigger.reset(station);
            return;
        }
        // 3. A cluster next to it whose location is not settled.
        let nearest = self
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.done && (e.last.is_none() || e.onset_picks() < MATURE_PICKS))
            .filter_map(|(i, e)| {
                e.active()
                    .map(|m| {
                        let p = &self.positions[m.station];
                        distance_km(here.latitude, here.longitude, p.latitude, p.longitude)
                    })
                    .reduce(f64::min)
                    .map(|d| (i, d))
            })
            .filter(|(_, d)| *d <= CLUSTER_KM)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match nearest {
            Some((i, _)) => {
                if self.events[i].join(member) {
                    self.events[i].last_new_station_ms = now_ms;
                }
            }
            None => {
                // 4. Something new.
                let stamp = chrono::DateTime::from_timestamp_millis(pick_ms)
                    .map(|t| t.format("%Y%m%dT%H%M%S").to_string())
                    .unwrap_or_default();
                let sequence = self.next_sequence;
                self.next_sequence += 1;
                self.events.push(Event::new(
                    format!("hyp:{stamp}:{sequence}"),
                    member,
                    now_ms,
                ));
            }
        }
    }

    /// How many of `event`'s members `prediction` explains, and the phase of each.
    pub(super) fn explained_members(
        &self,
        event: &Event,
        prediction: &Prediction,
    ) -> Vec<Option<Phase>> {
        event
            .members
            .iter()
            .map(|m| {
                prediction
                    .explains(
                        &self.config.travel_times,
                        &self.positions[m.station],
                        m,
                        Some(m.peak),
                    )
                    .map(|(phase, _)| phase)
            })
            .collect()
    }

    /// A cluster never reported is absorbed by an older event that explains most of its stations, by one next
    /// to it while either is unlocated, or by one that located the same quake; one that a closed event's waves
    /// explain is dropped. A reported event is never absorbed.
    pub(super) fn merge_events(&mut self, now_ms: i64) {
        for j in 0..self.events.len() {
            if self.events[j].done || self.events[j].reports > 0 {
                continue;
            }
            let young = &self.events[j];
            let majority = |phases: &[Option<Phase>]| {
                phases.iter().filter(|p| p.is_some()).count() * 2 > phases.len()
            };
            let mut absorb: Option<(usize, Vec<Option<Phase>>)> = None;
            for i in 0..self.events.len() {
                let old = &self.events[i];
                if i == j || old.done || (old.reports == 0 && i > j) {
                    continue;
                }
                if let Some(prediction) = Self::prediction(old)
                    .filter(|_| old.onset_picks() >= 3 && self.explains_others(old))
                {
                    let phases = self.explained_members(young, &prediction);
                    if majority(&phases) {
                        absorb = Some((i, phases));
                        break;
                    }
                }
                let settled = old.last.is_some() && old.onset_picks() >= MATURE_PICKS;
                let together = match (&old.last, &young.last) {
                    (Some(x), Some(y)) => {
                        distance_km(x.latitude, x.longitude, y.latitude, y.longitude)
                            <= SAME_QUAKE_KM
                            && (x.origin - y.origin).abs() <= SAME_QUAKE_S
                    }
                    // Next to a settled event's stations is not enough: its travel times must explain it.
                    _ => {
                        !settled
                            && old.active().any(|m| {
                                young.active().any(|n| {
                                    let (p, q) =
                                        (&self.positions[m.station], &self.positions[n.station]);
                                    distance_km(p.latitude, p.longitude, q.latitude, q.longitude)
                                        <= CLUSTER_KM
                                })
                            })
                    }
                };
                if together {
                    absorb = Some((i, vec![Some(Phase::Onset); young.members.len()]));
                    break;
                }
            }
            if let Some((i, phases)) = absorb {
                let mut members = std::mem::take(&mut self.events[j].members);
                for (member, phase) in members.iter_mut().zip(phases) {
                    member.phase = phase.unwrap_or(Phase::Later);
                }
                for member in members {
                    self.events[i].join(member);
                }
                self.events[i].last_new_station_ms = now_ms;
                self.events[j].done = true;
                continue;
            }
            let young = &self.events[j];
            let echo = self
                .aftermaths
                .iter()
                .any(|a| majority(&self.explained_members(young, &a.prediction())));
            if echo {
                self.close(j, now_ms, None);
            }
        }
        self.events.retain(|e| !e.done);
    }

    /// Young clusters whose picks together fit one deep source are that deep quake's P wave: it reaches the
    /// surface over hundreds of km within seconds and weakly, so its picks fall into clusters too far apart
    /// to join by distance and too few each to be located deep (`locate::depth_cap`). They become the oldest
    /// one, located there. Clusters that do not fit are left alone.
    pub(super) fn join_deep_front(&mut self, now_ms: i64) {
        let mut clusters: Vec<usize> = (0..self.events.len())
            .filter(|&i| {
                let e = &self.events[i];
                !e.done
                    && e.reports == 0
                    && e.onset_picks() < MATURE_PICKS
                    && e.members.iter().all(|m| m.phase == Phase::Onset)
                    // A P wave reaches quiet stations: rises on stations shaking long before them are
                    // another quake's later waves.
                    && !e.members.iter().any(|m| self.shaking_before(m.station, m.pick_ms))
            })
            .collect();
        // Only a new pick can change the answer.
        if !clusters
            .iter()
            .any(|&i| self.events[i].last_new_station_ms == now_ms)
        {
            return;
        }
        loop {
            // Each pick, and the cluster it comes from.
            let (owners, picks): (Vec<usize>, Vec<Pick>) = clusters
                .iter()
                .flat_map(|&i| self.events[i].members.iter().map(move |m| (i, m)))
                .map(|(i, m)| {
                    let p = &self.positions[m.station];
                    let pick = Pick {
                        arrival: Arrival::P,
                        latitude: p.latitude,
                        longitude: p.longitude,
                        at: m.pick_ms as f64 / 1000.0,
                    };
                    (i, pick)
                })
                .unzip();
            if clusters.len() < DEEP_FRONT_CLUSTERS || picks.len() < MATURE_PICKS {
                return;
            }
            let Some(h) = self.locate_front(&picks, now_ms) else {
                return;
            };
            let where_picked = || picks.iter().map(|p| (p.latitude, p.longitude));
            // Not deeper than the slabs' deep quakes, and a pick within its depth of the epicentre (what
            // publication asks): a great quake's first clusters across the network fit a source 650-700 km
            // below the ocean far away.
            let nearest = nearest_km(&h, where_picked());
            // Below a reported quake, they are its own far arrivals, later than its tables say.
            let below_reported = self.reported_sources(None).any(|source| {
                let o = source.h;
                distance_km(o.latitude, o.longitude, h.latitude, h.longitude) <= SAME_QUAKE_KM
            });
            if !(DEEP_KM..=DEEP_FRONT_MAX_KM).contains(&h.depth_km)
                || h.at_edge
                || nearest > COVERAGE_KM.max(h.depth_km)
                || below_reported
            {
                return;
            }
            let fitting: Vec<usize> = clusters
                .iter()
                .copied()
                .filter(|&i| {
                    let (all, close) = owners
                        .iter()
                        .zip(&h.residuals)
                        .filter(|(j, _)| **j == i)
                        .fold((0, 0), |(all, close), (_, r)| {
                            (
                                all + 1,
                                close + usize::from(r.abs() <= DEEP_FRONT_RESIDUAL_S),
                            )
                        });
                    2 * close > all
                })
                .collect();
            if fitting.len() < clusters.len() {
                clusters = fitting;
                continue;
            }
            if h.rms_seconds > self.rms_allowed(&h, where_picked()) {
                return;
            }
            let (&oldest, rest) = clusters.split_first().expect("several clusters");
            for &j in rest {
                for member in std::mem::take(&mut self.events[j].members) {
                    self.events[oldest].join(member);
                }
                self.events[j].done = true;
            }
            let event = &mut self.events[oldest];
            event.last_new_station_ms = now_ms;
            // Located again around this solution at once (the picks moved it beyond a young event's search).
            event.located = (0..event.members.len()).collect();
            event.located_arrivals = 0;
            event.last = Some(h);
            self.events.retain(|e| !e.done);
            return;
        }
    }

    /// Locates a deep front's picks, the search moved on while its best point lies on the search's edge (seen
    /// from one side, the source may lie a few degrees beyond the first station).
    fn locate_front(&self, picks: &[Pick], now_ms: i64) -> Option<Hypocentre> {
        let first = picks.iter().min_by(|a, b| a.at.total_cmp(&b.at))?;
        let mut center = (first.latitude, first.longitude);
        let mut h = None;
        for _ in 0..DEEP_FRONT_STEPS {
            let found = locate_near(
                &self.config.travel_times,
                picks,
                &[],
                now_ms as f64 / 1000.0,
                Some(center),
            )?;
            let edge = found.at_edge;
            center = (found.latitude, found.longitude);
            h = Some(found);
            if !edge {
                break;
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hypocentre(latitude: f64, longitude: f64, depth_km: f64) -> Hypocentre {
        Hypocentre {
            latitude,
            longitude,
            depth_km,
            origin: 0.0,
            score: 0.0,
            residuals: Vec::new(),
            used: Vec::new(),
            rms_seconds: 0.1,
            depth_fixed: false,
            depth_cap: 700.0,
            at_edge: false,
            horizontal_uncertainty_km: 5.0,
            depth_uncertainty_km: Some(5.0),
        }
    }

    fn onset(station: usize, pick_ms: i64) -> Member {
        Member {
            station,
            pick_ms,
            unseen_ms: 0,
            phase: Phase::Onset,
            peak: 0.0,
            peak_at_ms: pick_ms,
            expires_ms: pick_ms + 60_000,
            active: true,
            s_pick_ms: None,
            far_s: false,
            inside: false,
        }
    }

    /// A deep event's re-trigger on one of its P stations is its S onset when it came about the S-P time after
    /// the P pick; located with only when it is known to have come then, not when the station was unobserved
    /// long enough before it that the onset may have come any time in the spell.
    #[test]
    fn a_deep_events_s_onset_after_an_unobserved_spell_is_its_own_but_not_located_with() {
        let station = Station {
            code: "X".to_string(),
            name: None,
            latitude: 36.5,
            longitude: 135.0,
        };
        let model = Model::jma2001();
        let h = hypocentre(36.0, 135.0, 400.0);
        let d = distance_km(36.0, 135.0, 36.5, 135.0);
        let p_ms = (model.p(d, 400.0) * 1000.0).round() as i64;
        let s_minus_p = model.s(d, 400.0) - model.p(d, 400.0);
        let past_window_ms = ((1.0 + S_ONSET_SHARE) * s_minus_p * 1000.0).round() as i64 + 3_000;
        let s_onset = |after_p_ms: i64, unseen_ms: i64| {
            let mut detector = Detector::new(vec![station.clone()], DetectorConfig::default());
            detector.events.push(Event {
                last: Some(h.clone()),
                located: vec![0],
                located_arrivals: 1,
                ..Event::new("hyp:test:0".to_string(), onset(0, p_ms), p_ms)
            });
            let pick_ms = p_ms + after_p_ms;
            let taken = detector.s_onset(0, pick_ms, unseen_ms, pick_ms + 500);
            (taken, detector.events[0].members[0].s_pick_ms)
        };
        let at_s_minus_p = (s_minus_p * 1000.0).round() as i64;
        assert_eq!(s_onset(at_s_minus_p, 0), (true, Some(p_ms + at_s_minus_p)));
        assert_eq!(s_onset(past_window_ms, 0), (false, None));
        assert_eq!(s_onset(past_window_ms, 5_000), (true, None));
    }

    /// A pick after an unobserved spell may have come at the predicted arrival: it fits no worse than an
    /// exact pick, and no better, however long the spell (a longer one must not rank its event first).
    #[test]
    fn a_pick_after_an_unobserved_spell_fits_no_better_than_an_exact_one() {
        let model = Model::jma2001();
        let h = hypocentre(36.0, 140.0, 10.0);
        let prediction = Prediction {
            h: &h,
            magnitude: Some(6.0),
            breaking_s: None,
            reading: Reading::P,
        };
        let station = StationPosition {
            latitude: 36.5,
            longitude: 140.0,
        };
        let tp = model.p(distance_km(36.0, 140.0, 36.5, 140.0), 10.0);
        let (_, late) = p_window(tp);
        let pick = |off: f64, unseen_ms: i64| Member {
            unseen_ms,
            ..onset(0, ((tp + off) * 1000.0).round() as i64)
        };
        let fit = |off: f64, unseen_ms: i64| {
            prediction.explains(&model, &station, &pick(off, unseen_ms), None)
        };
        assert!(matches!(fit(0.0, 0), Some((Phase::Onset, off)) if off < 0.001));
        for unseen_ms in [6_000, 10_000, 30_000] {
            assert_eq!(
                fit(late + 2.0, unseen_ms),
                Some((Phase::Later, 0.0)),
                "{unseen_ms} ms unseen"
            );
        }
    }
}
