//! The event lifecycle: an event's picks and members, its status (`candidate` → `preliminary` → `tracking` →
//! `finalized`, `retracted`, or `interrupted`), when it may be published and when it is over.

use super::association::shakes_beyond;
use super::*;

impl Event {
    /// A new candidate named `id`, its one member `first` come at `now_ms`.
    pub(super) fn new(id: String, first: Member, now_ms: i64) -> Event {
        Event {
            id,
            first_at_ms: now_ms,
            members: vec![first],
            status: EventStatus::Candidate,
            reports: 0,
            frames: 0,
            last_new_station_ms: now_ms,
            positions: Vec::new(),
            stable_since_ms: None,
            magnitude: None,
            last: None,
            located: Vec::new(),
            located_arrivals: 0,
            last_reported: None,
            p_window_mw: None,
            beyond_chance: false,
            reading: Reading::P,
            first_mw: None,
            rose_at_ms: None,
            done: false,
        }
    }

    /// Adds a member; a station that was one already is merged into it instead (active again if the newcomer
    /// is, its first pick standing). Whether the station is new to the event.
    pub(super) fn join(&mut self, member: Member) -> bool {
        match self
            .members
            .iter_mut()
            .find(|m| m.station == member.station)
        {
            Some(known) => {
                known.active |= member.active;
                known.peak = known.peak.max(member.peak);
                known.expires_ms = known.expires_ms.max(member.expires_ms);
                false
            }
            None => {
                self.members.push(member);
                true
            }
        }
    }

    pub(super) fn onset_picks(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.phase == Phase::Onset)
            .count()
    }

    /// Onsets and a deep event's S onsets on their stations: what a location is made of.
    pub(super) fn arrivals(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.phase == Phase::Onset)
            .map(|m| 1 + usize::from(m.s_pick_ms.is_some()))
            .sum()
    }

    pub(super) fn active(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.active)
    }
}

impl Detector {
    pub(super) fn interrupt_all(&mut self, last_ms: i64) -> Vec<Detection> {
        let mut out = Vec::new();
        for index in 0..self.events.len() {
            if self.events[index].done {
                continue;
            }
            // An event nobody saw (never reported, or never public) just ends; a reported one is closed as
            // interrupted.
            let event = &self.events[index];
            let closing = (event.reports > 0 && event.status != EventStatus::Candidate)
                .then_some(EventStatus::Interrupted);
            out.extend(self.close(index, last_ms, closing));
        }
        out
    }

    /// Ends an event with a last report in `status` (when it was ever public), and frees its stations. A
    /// located event's waves go on explaining triggers for a while.
    pub(super) fn close(
        &mut self,
        index: usize,
        now_ms: i64,
        status: Option<EventStatus>,
    ) -> Option<Detection> {
        let detection = status.and_then(|status| {
            self.events[index].status = status;
            self.solution(index, now_ms, true)
        });
        let event = &mut self.events[index];
        event.done = true;
        if let Some(h) = &event.last
            && event.reports > 0
            && event.status != EventStatus::Retracted
        {
            self.aftermaths.push(Aftermath {
                h: h.clone(),
                magnitude: event.magnitude.map(|m| m.value),
                until_ms: now_ms + AFTERMATH_MS,
            });
        }
        for member in std::mem::take(&mut self.events[index].members) {
            if member.active {
                self.trigger.reset(member.station);
            }
        }
        detection
    }

    pub(super) fn update(&mut self, index: usize, now_ms: i64) -> Option<Detection> {
        // Peaks grow; memberships expire by the peak reached (the pick stays evidence).
        let latest = &self.latest;
        let event = &mut self.events[index];
        event.frames += 1;
        let mut expired = Vec::new();
        let mut released = Vec::new();
        let shaking = event.last.as_ref().zip(
            event
                .magnitude
                .filter(|m| m.kind == crate::magnitude::KIND_S),
        );
        for member in event.members.iter_mut().filter(|m| m.active) {
            if let Some(v) = latest[member.station]
                && v > member.peak
            {
                member.peak = v;
                member.peak_at_ms = now_ms;
                member.expires_ms = now_ms + membership_ms(v);
                // Far from the event, shaking well beyond what it can cause there is another quake's.
                if let Some((h, m)) = shaking {
                    let p = &self.positions[member.station];
                    let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                    if d > RELEASE_KM && shakes_beyond(h, m.value, d, v) {
                        member.active = false;
                        released.push(member.station);
                        continue;
                    }
                }
            }
            // Its S wave has yet to come (a deep or distant event's come long after its P): it stays.
            let s_due = event.last.as_ref().map_or(i64::MIN, |h| {
                s_due_ms(
                    &self.config.travel_times,
                    h,
                    &self.positions[member.station],
                )
            });
            if member.expires_ms.max(s_due) <= now_ms {
                member.active = false;
                expired.push(member.station);
            }
        }
        // An expired or released station may trigger again at once: what it shows next is offered to the
        // events first, so the same event's shaking rejoins it and another quake's starts its own.
        for station in expired.into_iter().chain(released) {
            self.trigger.release(station);
        }
        let event = &self.events[index];
        if event.active().next().is_none() {
            // Collapsed before it was confirmed: retracted; after tracking: its shaking is over.
            let closing = match event.status {
                EventStatus::Preliminary => Some(EventStatus::Retracted),
                EventStatus::Tracking => Some(EventStatus::Finalized),
                _ => None,
            };
            return self.close(index, now_ms, closing);
        }
        let stations = event.active().count();
        let mut status = event.status;
        // A new location when onsets or a deep event's S onsets came (later phases do not move it), or while
        // silent stations
        // still count.
        let relocate = event.arrivals() != event.located_arrivals
            || event.onset_picks() < crate::locate::NON_ARRIVAL_PICKS;
        if relocate && let Some((h, located, reading)) = self.locate(index, now_ms) {
            if reading == Reading::FarS && self.events[index].reading != Reading::FarS {
                self.read_far(index, &h, now_ms);
            }
            let event = &mut self.events[index];
            event.reading = reading;
            event.located_arrivals = event.arrivals();
            event
                .positions
                .push((now_ms, h.latitude, h.longitude, h.depth_km));
            event.last = Some(h);
            event.located = located;
            self.classify(index);
        }
        if status == EventStatus::Candidate {
            let event = &self.events[index];
            let p_window = event
                .last
                .as_ref()
                .and_then(|h| self.magnitude_estimate(event, h, now_ms, false))
                .filter(|m| m.kind == crate::magnitude::KIND_P);
            if let Some(m) = p_window {
                self.events[index].p_window_mw = Some(m.mw);
            }
            let event = &self.events[index];
            let beyond_chance = event.last.as_ref().is_some_and(|h| {
                let used = h.used.iter().filter(|used| **used).count();
                crate::chance::beyond_chance(used, self.chance_picks(event, h, now_ms))
            });
            self.events[index].beyond_chance = beyond_chance;
        }
        if status == EventStatus::Candidate && self.publishable(index, now_ms) {
            status = EventStatus::Preliminary;
        }
        let event = &mut self.events[index];
        if let Some(h) = &event.last {
            // Within 10 km; a deep event, relocated by each S onset, within half its own uncertainty.
            let within = if h.depth_km >= DEEP_KM {
                (h.horizontal_uncertainty_km / 2.0).max(10.0)
            } else {
                10.0
            };
            let steady = event
                .positions
                .iter()
                .rev()
                .take_while(|(t, ..)| now_ms - t <= 5_000)
                .all(|(_, lat, lon, _)| distance_km(*lat, *lon, h.latitude, h.longitude) <= within);
            if steady {
                event.stable_since_ms.get_or_insert(now_ms);
            } else {
                event.stable_since_ms = None;
            }
            let stable_for = event.stable_since_ms.map_or(0, |since| now_ms - since);
            // Only an event already published as preliminary is tracked: a candidate that was steady while
            // it waited is first published preliminary all the same, as the lifecycle promises.
            if event.status == EventStatus::Preliminary && stations >= 8 && stable_for >= 5_000 {
                status = EventStatus::Tracking;
            }
            // Decayed: every station a unit below its peak, or back near the floor of the scale.
            let decayed = event.active().all(|m| {
                self.latest[m.station].is_none_or(|v| v <= (m.peak - 1.0).max(DECAYED_LEVEL))
            });
            // A deep event's S wave, long after its P, locates it again with its S onsets: it is not over
            // before that wave has crossed its stations.
            let s_passed = h.depth_km < DEEP_KM
                || event.active().all(|m| {
                    s_due_ms(&self.config.travel_times, h, &self.positions[m.station]) <= now_ms
                });
            if status == EventStatus::Tracking
                && now_ms - event.last_new_station_ms >= self.config.finalize_after_ms
                && decayed
                && s_passed
            {
                return self.close(index, now_ms, Some(EventStatus::Finalized));
            }
        }
        self.events[index].status = status;
        self.solution(index, now_ms, false)
    }

    /// The latest solution and magnitude of every open event that was reported (but `except`), with how long
    /// its fault has been seen breaking, and of every recent aftermath: the quakes whose waves are about.
    pub(super) fn reported_sources<'a>(
        &'a self,
        except: Option<&'a Event>,
    ) -> impl Iterator<Item = Prediction<'a>> + 'a {
        self.events
            .iter()
            .filter(move |e| {
                !e.done && e.reports > 0 && except.is_none_or(|x| !std::ptr::eq(*e, x))
            })
            .filter_map(|e| {
                let h = e.last.as_ref()?;
                // Its magnitude rose once the S wave of what broke reached its nearest station (asked only of
                // an event whose magnitude did rise: this runs for every candidate every frame).
                let breaking_s = e.rose_at_ms.map(|at| {
                    let stations = e.members.iter().map(|m| {
                        let p = &self.positions[m.station];
                        (p.latitude, p.longitude)
                    });
                    let nearest_s = self
                        .config
                        .travel_times
                        .s(nearest_km(h, stations), h.depth_km);
                    (at as f64 / 1000.0 - h.origin - nearest_s).max(0.0)
                });
                Some(Prediction {
                    h,
                    magnitude: e.magnitude.map(|m| m.value),
                    breaking_s,
                    reading: e.reading,
                })
            })
            .chain(self.aftermaths.iter().map(Aftermath::prediction))
    }

    /// The rms a solution located from picks at `stations` may have to be published: the model errs more on
    /// long paths (a deep or distant quake's picks), so it grows with their mean P travel time.
    pub(super) fn rms_allowed(
        &self,
        h: &Hypocentre,
        stations: impl ExactSizeIterator<Item = (f64, f64)>,
    ) -> f64 {
        let n = stations.len().max(1) as f64;
        let travel: f64 = stations
            .map(|(lat, lon)| {
                let d = distance_km(h.latitude, h.longitude, lat, lon);
                self.config.travel_times.p(d, h.depth_km)
            })
            .sum();
        PUBLISH_RMS_S + RMS_PER_TRAVEL * travel / n
    }

    /// Whether a candidate's latest solution may be published: located from at least three picks over two
    /// frames (or [`FIRST_FRAME_PICKS`] with moveout in one) that agree within [`PUBLISH_RMS_S`], not at the
    /// depth cap of so few picks, converged (two successive locations agree within their uncertainty) or
    /// shallow from five picks, and
    /// plausible to the whole neighbourhood ([`crate::consistency`]).
    pub(super) fn publishable(&self, index: usize, now_ms: i64) -> bool {
        let event = &self.events[index];
        let Some(h) = &event.last else {
            return false;
        };
        // The members the latest location used as picks.
        let used_members: Vec<&Member> = event
            .located
            .iter()
            .zip(&h.used)
            .filter(|(_, used)| **used)
            .map(|(&i, _)| &event.members[i])
            .collect();
        let used = used_members.len();
        let used_stations: Vec<&StationPosition> = used_members
            .iter()
            .map(|m| &self.positions[m.station])
            .collect();
        let nearest_pick = nearest_km(h, used_stations.iter().map(|p| (p.latitude, p.longitude)));
        // Seen from one side, a few picks fit a wide arc of epicentres: more are needed.
        let gap = azimuth_gap(
            used_stations
                .iter()
                .map(|p| azimuth_degrees(h.latitude, h.longitude, p.latitude, p.longitude)),
        );
        let needed = match gap {
            g if g <= 180.0 => 3,
            g if g <= 270.0 => 5,
            _ => 7,
        };
        // Seen from one side and from afar, the picks fit a wide arc of epicentres: the solution must have
        // stopped moving (a distant quake's wavefront drags it outward with every new pick).
        let one_sided = gap > 270.0 && nearest_pick > ONE_SIDED_KM;
        // The grid has converged when the last two locations agree (three, seen from one side): within 10 km and
        // a tenth of the depth, or within half of what the misfit surface says the latest is known to (a deep
        // quake's depth is loosely held by picks far from it, and steps between equally good depths). Seen
        // from one side, only the fixed tolerances: a distant wavefront's wide surface would excuse its drift.
        let (across_km, down_km) = if one_sided {
            (10.0, 0.0)
        } else {
            (
                (h.horizontal_uncertainty_km / 2.0).max(10.0),
                h.depth_uncertainty_km.unwrap_or(0.0) / 2.0,
            )
        };
        let agreeing = if one_sided { 3 } else { 2 };
        let converged = event.positions.len() >= agreeing
            && event.positions[event.positions.len() - agreeing..]
                .windows(2)
                .all(|pair| {
                    let ((_, lat0, lon0, depth0), (_, lat1, lon1, depth1)) = (pair[0], pair[1]);
                    distance_km(lat0, lon0, lat1, lon1) <= across_km
                        && (depth0 - depth1).abs() <= (0.1 * depth1).max(20.0).max(down_km)
                });
        // Picks all within a second or so (no moveout) fit a source deep below them as well as a burst on a
        // few neighbouring stations: the stations around them must have had time to show which it is.
        let picked: Vec<i64> = used_members.iter().map(|m| m.pick_ms).collect();
        let (first_pick, last_pick) = (
            picked.iter().copied().min().unwrap_or(now_ms),
            picked.iter().copied().max().unwrap_or(now_ms),
        );
        // Many stations picked over two frames are more than a burst on a few neighbours: a quake whose P
        // reaches them almost together (from below, 80 km or more deep) need not wait for more moveout.
        let waited = last_pick - first_pick >= NO_MOVEOUT_MS
            || now_ms - last_pick >= NO_MOVEOUT_WAIT_MS
            || (used >= WIDE_PICKS && last_pick - first_pick >= FRAME_MS);
        // Seen in one frame only, a few picks wait for the next to confirm them; many that show moveout need not
        // (one more than the gap asks for: five from one side placed an offshore M7.1 100 km off).
        let confirmed = event.frames >= 2
            || (used >= FIRST_FRAME_PICKS.max(needed + 1)
                && last_pick - first_pick >= NO_MOVEOUT_MS);
        let basics = waited
            && used >= needed
            && confirmed
            && h.rms_seconds
                <= self.rms_allowed(h, used_stations.iter().map(|p| (p.latitude, p.longitude)))
            // A depth at the cap of few picks is the cap talking, not the picks.
            && (h.depth_fixed || h.depth_km < h.depth_cap - 0.5)
            && (converged || (!one_sided && used >= 5 && h.depth_km <= SHALLOW_KM))
            // Outside the network the picks fix no epicentre: on the search's edge, as good anywhere along a
            // trough as far as the uncertainty is looked for, or far from every pick.
            && !h.at_edge
            && !h.unbounded()
            && covered(h, nearest_pick);
        if !basics {
            return false;
        }
        // Later waves are no new quake. A distant great quake's S and surface waves, minutes after its P,
        // re-trigger stations that have been shaking ever since, and no located event explains that shaking.
        // Inside a reported quake's shaking, after its S wave has passed, a new rise is its coda or its
        // aftershock's S wave (whose P does not rise above that shaking), and an aftershock located from such
        // onsets is placed late, so its S wave sweeping the stations 100 km and more away looks like quakes of
        // their own. So most picks on stations shaking long before them, alone or after a reported quake's S
        // wave there, make no new quake, unless beside that quake's source (an aftershock, seen by its S).
        // Before the S wave, a rise is what that quake cannot explain: a second quake inside its wavefront.
        let sources: Vec<Prediction> = self.reported_sources(Some(event)).collect();
        let later_waves = used_members
            .iter()
            .filter(|m| {
                self.shaking_before(m.station, m.pick_ms)
                    && (sources.is_empty() || self.after_s_of_any(m.station, m.pick_ms, &sources))
            })
            .count();
        if 2 * later_waves > used {
            let beside = sources
                .iter()
                .any(|source| in_aftershock_zone(source.h, source.magnitude, h));
            if !beside {
                return false;
            }
        }
        // How many used picks pass `test` (the pick's station, its time in seconds and its peak).
        let passing = |test: &dyn Fn(&StationPosition, f64, f64) -> bool| {
            used_members
                .iter()
                .filter(|m| {
                    test(
                        &self.positions[m.station],
                        m.pick_ms as f64 / 1000.0,
                        m.peak,
                    )
                })
                .count()
        };
        let model = &self.config.travel_times;
        // A reported quake's own waves, arriving far away sooner than its solution predicts, fit a quake of
        // their own on the stations they reach first. A pick about when that quake's P or S wave was due
        // there, shaking no harder than it explains, is its wavefront — unless beside its source (an
        // aftershock); a pick just before its P wave was due is its P wave wherever it places the candidate (a
        // magnitude read high widens the aftershock zone over stations its P wave is reaching). Half the picks
        // or more its wavefront are no quake of their own: the rest, on their own, are not yet one either
        // (chance picks on a noisy network, joined by a far quake's P wave, fit a quake where neither half did).
        let wavefront = sources.iter().any(|source| {
            let beside = in_aftershock_zone(source.h, source.magnitude, h);
            2 * passing(&|station, pick, peak| {
                source.ahead_of_p(model, station, pick, Some(peak))
                    || (!beside && source.reaches_loosely(model, station, pick, Some(peak)))
            }) >= used
        });
        if wavefront {
            return false;
        }
        // Too small to tell from a burst on a few stations, and below what the service publishes. (A deep
        // solution needs picks spread wide instead, see `depth_cap`, and its weak shaking may give no
        // magnitude for a while.)
        let estimate = self.magnitude_estimate(event, h, now_ms, true);
        let magnitude = estimate.as_ref().map(|m| m.mw);
        if h.depth_km <= SHALLOW_KM && magnitude.is_none_or(|m| m < MIN_PUBLISHED_MW) {
            return false;
        }
        // Stations along a great rupture, far from its epicentre, shake beyond what its point source explains
        // there as the fault breaks on; read as a P wave's, that shaking makes a magnitude at the scale's top.
        // Beside a reported quake, a candidate at the top, most of whose picks came while that quake's waves
        // were passing, is that quake's rupture. (A larger quake soon after a smaller one beside it is not held
        // back: its magnitude is a measurement.)
        let at_top = magnitude.is_some_and(crate::magnitude::at_top);
        let its_rupture = at_top
            && sources.iter().any(|source| {
                in_aftershock_zone(source.h, source.magnitude, h)
                    && 2 * passing(&|station, pick, _| {
                        source.reaches_loosely(model, station, pick, None)
                    }) > used
            });
        if its_rupture {
            return false;
        }
        // On a noisy network, chance picks fit a source deep below it or a cluster open for long (judged in
        // `update`, just before).
        if !event.beyond_chance {
            return false;
        }
        let mut claimed = vec![false; self.stations.len()];
        for other in self.events.iter().filter(|e| !e.done) {
            // A candidate located outside the network, never published, explains nothing here: its stations
            // are a distant quake's, and they say what the candidate's waves would do to them.
            let outside = other.reports == 0 && self.located_outside(other);
            let located = other.last.is_some() && other.onset_picks() >= 3 && !outside;
            if std::ptr::eq(other, event) || located {
                for m in &other.members {
                    claimed[m.station] = true;
                }
            }
        }
        let members: Vec<(usize, f64)> = event.active().map(|m| (m.station, m.peak)).collect();
        let candidate = crate::consistency::Candidate {
            latitude: h.latitude,
            longitude: h.longitude,
            depth_km: h.depth_km,
            origin: h.origin,
            magnitude,
            members: &members,
            picks: used,
        };
        let around = crate::consistency::Neighbourhood {
            stations: &self.positions,
            levels: &self.levels,
            claimed: &claimed,
            faulty: self.trigger.faulty(),
            model: &self.config.travel_times,
            window: p_window,
            margin: level_margin,
        };
        // Picks nearly all in one frame fit a burst on a few neighbouring stations as well as a quake below
        // them: such a cluster waits until the stations as near its source as its own are due to show it.
        let simultaneous = used_members
            .iter()
            .filter(|m| m.pick_ms == first_pick)
            .count() as f64
            >= SIMULTANEOUS * used as f64;
        let now = now_ms as f64 / 1000.0;
        if simultaneous && now < crate::consistency::as_near_due(&candidate, &around) {
            return false;
        }
        // A young cluster with no station but its own around it (an island group far from the rest of the
        // network): nothing tells a quake below them from a distant quake's S wave crossing them, its level
        // read as a P wave's (1.5 units too high); its own S wave does. It waits for its S-window magnitude,
        // which must bear out the P-window one.
        let isolated = used < MATURE_PICKS && {
            let own: Vec<usize> = event.members.iter().map(|m| m.station).collect();
            crate::consistency::isolated(&candidate, &own, &self.positions)
        };
        if isolated {
            let borne_out = estimate.is_some_and(|m| {
                m.kind == crate::magnitude::KIND_S
                    && event.p_window_mw.is_none_or(|p| m.mw >= p - S_BEARS_OUT)
            });
            if !borne_out {
                return false;
            }
        }
        crate::consistency::check(&candidate, &around, now).plausible()
    }

    /// How many picks chance alone gives a solution `h` of `event` by `now_ms` (see [`crate::chance`]): the
    /// network's background rate of picks, but the event's own stations', times the seconds each observed
    /// station's P arrival window has been open.
    fn chance_picks(&self, event: &Event, h: &Hypocentre, now_ms: i64) -> f64 {
        let own: std::collections::HashSet<usize> =
            event.members.iter().map(|m| m.station).collect();
        let observed = self.latest.iter().filter(|v| v.is_some()).count();
        let rate = self.background.rate(observed, |s| own.contains(&s));
        let now = now_ms as f64 / 1000.0;
        let open_seconds: f64 = self
            .positions
            .iter()
            .zip(&self.latest)
            .filter(|(_, v)| v.is_some())
            .map(|(p, _)| {
                let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
                let tp = self.config.travel_times.p(d, h.depth_km);
                let (early, late) = p_window(tp);
                let opens = h.origin + tp - early;
                (now.min(h.origin + tp + late) - opens).max(0.0)
            })
            .sum();
        rate * open_seconds
    }

    /// Whether `event`'s solution may explain other picks and clusters: a reported event's does, and a
    /// candidate's when it is located from picks beyond chance, 150 km deep or less, or outside the network.
    /// On a noisy network chance picks fit a source 700 km deep under the network, whose P wave reaches every
    /// station within seconds; open for a minute, such a candidate took in a real quake's picks for half a
    /// minute, and with them the quake. A shallow candidate's arrivals cover only a region: held to chance too,
    /// the candidate of a great distant quake's wavefront (whose picks count in the background, as no reported
    /// quake is about) let that wavefront make an event of its own. One outside the network holds a distant
    /// quake's wavefront, as the rules for such wavefronts expect.
    pub(super) fn explains_others(&self, event: &Event) -> bool {
        event.reports > 0
            || event.beyond_chance
            || event
                .last
                .as_ref()
                .is_some_and(|h| h.depth_km <= SHALLOW_KM)
            || self.located_outside(event)
    }

    /// An event read as a deep quake far away (at `h`) for the first time: the stations that picked with its
    /// P wave join it with their P onsets (located with from then on; which of its picks are P onsets and
    /// which S, `classify` says).
    fn read_far(&mut self, index: usize, h: &Hypocentre, now_ms: i64) {
        for pick in self.p_arrivals(&self.events[index], h) {
            let member = self.member(
                pick.station,
                pick.pick_ms,
                pick.unseen_ms,
                Phase::Onset,
                now_ms,
            );
            self.events[index].join(member);
        }
    }

    /// Whether an event is located outside the network: every one of its stations farther than
    /// [`OUTSIDE_KM`] from its epicentre (a distant quake's wavefront, crossing the network).
    pub(super) fn located_outside(&self, event: &Event) -> bool {
        event.last.as_ref().is_some_and(|o| {
            event.members.iter().all(|m| {
                let p = &self.positions[m.station];
                distance_km(o.latitude, o.longitude, p.latitude, p.longitude) > OUTSIDE_KM
            })
        })
    }

    /// Whether `station` stood above its quiet level long before a pick at `pick_ms`: shaking already.
    pub(super) fn shaking_before(&self, station: usize, pick_ms: i64) -> bool {
        self.levels
            .rising_since(station)
            .is_some_and(|since| since < pick_ms - SHAKING_BEFORE_MS)
    }

    /// Whether a pick at `station` at `pick_ms` came after one of `sources`' S waves reached it.
    pub(super) fn after_s_of_any(
        &self,
        station: usize,
        pick_ms: i64,
        sources: &[Prediction],
    ) -> bool {
        let p = &self.positions[station];
        sources.iter().any(|source| {
            let o = source.h;
            let d = distance_km(o.latitude, o.longitude, p.latitude, p.longitude);
            let ts = self.config.travel_times.s(d, o.depth_km);
            pick_ms as f64 / 1000.0 >= o.origin + ts - s_window(ts).0
        })
    }

    /// Labels every member an onset (of the wave the event is located with there) or a later phase by the
    /// latest location (a young event's stay onsets).
    pub(super) fn classify(&mut self, index: usize) {
        let positions = &self.positions;
        let event = &mut self.events[index];
        let Some(h) = &event.last else { return };
        if event.members.len() < MATURE_PICKS {
            return;
        }
        // S onsets count only near the source (see `S_ONSET_SPAN_KM`).
        let nearest = nearest_km(
            h,
            event.members.iter().map(|m| {
                let p = &positions[m.station];
                (p.latitude, p.longitude)
            }),
        );
        let model = &self.config.travel_times;
        for member in &mut event.members {
            let p = &positions[member.station];
            let d = distance_km(h.latitude, h.longitude, p.latitude, p.longitude);
            // A deep quake far away: a pick is its P onset when it came with its P wave, else its S onset
            // (whichever way it joined, merged from another cluster included).
            if event.reading == Reading::FarS {
                let travel = model.p(d, h.depth_km);
                let off = member.pick_ms as f64 / 1000.0 - (h.origin + travel);
                member.far_s =
                    !is_arrival(Arrival::P, off, travel, member.unseen_ms as f64 / 1000.0);
            }
            let wave = member.wave(event.reading);
            let travel = wave.travel(model, d, h.depth_km);
            let off = member.pick_ms as f64 / 1000.0 - (h.origin + travel);
            let near = wave == Arrival::P || d <= nearest + S_ONSET_SPAN_KM;
            // An onset is timed: a pick after an unobserved spell is the arrival, too loose to locate with.
            member.phase = if near && is_arrival(wave, off, travel, 0.0) {
                Phase::Onset
            } else {
                Phase::Later
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{Faults, Quake, frames, grid_network, stations_at};

    /// Five picks that show moveout in the first frame a cluster is seen are a quake's, not a burst's: it is
    /// published from that frame, not a frame (or two) later. An M5.0 10 km under a 20 km grid: its first
    /// frame has five picks spread over 2 s.
    #[test]
    fn five_picks_with_moveout_publish_from_their_first_frame() {
        let positions = grid_network(35.0, 135.0, 150.0, 20.0, |_, _| true);
        let stations = stations_at(&positions);
        let quake = Quake::at(35.0, 135.0, 10.0, 5.0, 5.0);
        let frames = frames(
            &Model::jma2001(),
            &[quake],
            &positions,
            40,
            &Faults::default(),
            3,
        );
        let mut detector = Detector::new(stations, DetectorConfig::default());
        let first = frames.iter().enumerate().find_map(|(n, frame)| {
            let published = detector.step(1_600_000_000_000 + n as i64 * 1000, frame);
            (!published.is_empty()).then(|| {
                let event = detector.events.iter().find(|e| e.reports > 0).unwrap();
                let h = event.last.as_ref().unwrap();
                let picks: Vec<i64> = event
                    .located
                    .iter()
                    .zip(&h.used)
                    .filter(|(_, used)| **used)
                    .map(|(&i, _)| event.members[i].pick_ms)
                    .collect();
                let spread = picks.iter().max().unwrap() - picks.iter().min().unwrap();
                (event.frames, picks.len(), spread)
            })
        });
        let (frames_seen, picks, spread) = first.expect("the quake is published");
        assert_eq!(
            (frames_seen, picks),
            (1, 5),
            "published after {frames_seen} frames from {picks} picks"
        );
        assert!(spread >= NO_MOVEOUT_MS, "picks spread over {spread} ms");
    }
}
