//! The archive's counts (`/status` shows them); the store keeps the last ones with the ids they were taken at,
//! and the totals of `/events` filters with the horizon they were counted at.

/// Archive counts and the newest (delivery, reparse, report) ids they were counted at.
pub(crate) type CountedAt = ((i64, i64, i64), ArchiveCounts);

pub use osds_contract::status::ArchiveCounts;

/// Totals of `/events` filters, all counted at one horizon. Events change only with a new report version, which
/// moves the horizon, so a total stays exact until then: paging through a filter counts once.
#[derive(Debug, Default)]
pub(crate) struct EventTotals {
    horizon: i64,
    totals: std::collections::HashMap<String, i64>,
}

/// Filters whose totals are kept at once (a query text is part of the key, so the set is bounded).
const EVENT_TOTALS_KEPT: usize = 4096;

impl EventTotals {
    pub(crate) fn get(&self, horizon: i64, key: &str) -> Option<i64> {
        (self.horizon == horizon)
            .then(|| self.totals.get(key).copied())
            .flatten()
    }

    /// Keeps a total counted at `horizon` (read before counting); one counted at an older horizon than the
    /// kept ones is not kept.
    pub(crate) fn keep(&mut self, horizon: i64, key: String, total: i64) {
        if horizon > self.horizon || self.totals.len() >= EVENT_TOTALS_KEPT {
            self.totals.clear();
            self.horizon = self.horizon.max(horizon);
        }
        if horizon == self.horizon {
            self.totals.insert(key, total);
        }
    }
}

/// One event of a filter's list: its rowid and its place in the list order (`sort_ms` DESC, then
/// `last_report_id` DESC; no two events share a `last_report_id`, so the order is total), and its magnitude
/// for the magnitude orders.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Listed {
    pub(crate) sort_ms: i64,
    pub(crate) last_id: i64,
    pub(crate) rowid: i64,
    pub(crate) magnitude: Option<f64>,
}

/// A filter's list as it stood at `horizon`, and its rowids in each magnitude order, sorted the first time a
/// page in that order is asked for.
#[derive(Debug, Clone)]
pub(crate) struct MatchList {
    pub(crate) horizon: i64,
    pub(crate) events: std::sync::Arc<Vec<Listed>>,
    largest_first: std::sync::Arc<std::sync::OnceLock<Vec<i64>>>,
    smallest_first: std::sync::Arc<std::sync::OnceLock<Vec<i64>>>,
}

impl MatchList {
    pub(crate) fn new(horizon: i64, events: Vec<Listed>) -> MatchList {
        MatchList {
            horizon,
            events: std::sync::Arc::new(events),
            largest_first: Default::default(),
            smallest_first: Default::default(),
        }
    }

    /// The rowids by magnitude, largest (or smallest) first, unknown last; events of one magnitude in list
    /// order (newest first), as `ORDER BY magnitude, sort_ms DESC, last_report_id DESC` gives them.
    pub(crate) fn by_magnitude(&self, largest: bool) -> &[i64] {
        let cell = if largest {
            &self.largest_first
        } else {
            &self.smallest_first
        };
        cell.get_or_init(|| {
            let mut events: Vec<&Listed> = self.events.iter().collect();
            // Stable: the list order stays among equal magnitudes.
            let order = if largest {
                crate::Order::Largest
            } else {
                crate::Order::Smallest
            };
            events.sort_by(|a, b| order.by_magnitude(a.magnitude, b.magnitude));
            events.iter().map(|e| e.rowid).collect()
        })
    }

    /// The list at a newer horizon, given every event a version after `self.horizon` changed (`changed`, each
    /// with whether it matches the filter now): those events leave their old places and the matching ones
    /// take their new ones. Events change only with a new version (its id is their `last_report_id`), so the
    /// others keep their places.
    pub(crate) fn caught_up(&self, horizon: i64, changed: &[(Listed, bool)]) -> MatchList {
        let moved: std::collections::HashSet<i64> =
            changed.iter().map(|(event, _)| event.rowid).collect();
        // The changed events that match, in list order, merged with the others in one pass (an insert each
        // would move the whole list once per changed event).
        let order = |e: &Listed| std::cmp::Reverse((e.sort_ms, e.last_id));
        let mut placed: Vec<Listed> = changed
            .iter()
            .filter(|(_, matches)| *matches)
            .map(|(event, _)| *event)
            .collect();
        placed.sort_by_key(order);
        let mut placed = placed.into_iter().peekable();
        let mut events = Vec::with_capacity(self.events.len() + placed.len());
        for event in self.events.iter().filter(|e| !moved.contains(&e.rowid)) {
            while let Some(before) = placed.next_if(|p| order(p) < order(event)) {
                events.push(before);
            }
            events.push(*event);
        }
        events.extend(placed);
        MatchList::new(horizon, events)
    }
}

/// The events each filter lists, in list order: a filter is read in full once (a text search reads every
/// event's texts, 60-100 ms at 187,500 events; a deep page skipped up to 187,500 index entries) and its pages
/// are slices. A list is exact for its horizon; after new versions it is caught up from the events they
/// changed ([`MatchList::caught_up`]) instead of read again. A list longer than the bound is not kept; its
/// filter is then served page by page.
#[derive(Debug)]
pub(crate) struct EventMatches {
    /// Events kept at most, over all lists.
    bound: usize,
    lists: std::collections::HashMap<String, MatchList>,
    events: usize,
    /// Filters whose list was too long to keep, with the horizon it was found at.
    too_long: std::collections::HashMap<String, i64>,
    /// The update under way of each filter's list, with the horizon it brings the list to: requests that find
    /// the list out of date together wait for one update, and all go on the moment it is done (`None`: the
    /// list is too long to keep).
    updates: std::collections::HashMap<String, (i64, Update)>,
}

/// One update of a filter's list (see [`EventMatches::update`]).
pub(crate) type Update = std::sync::Arc<tokio::sync::OnceCell<Option<MatchList>>>;

/// Events kept over all lists (24 bytes each: 96 MiB).
const EVENT_MATCHES_EVENTS: usize = 4 << 20;

impl Default for EventMatches {
    fn default() -> Self {
        EventMatches::with_bound(EVENT_MATCHES_EVENTS)
    }
}

impl EventMatches {
    fn with_bound(bound: usize) -> EventMatches {
        EventMatches {
            bound,
            lists: Default::default(),
            events: 0,
            too_long: Default::default(),
            updates: Default::default(),
        }
    }

    /// The update that brings the filter's list to `horizon` or later, and the horizon it brings it to: the
    /// one under way when it goes that far, else a new one (which the caller runs, or waits for another
    /// caller to run). Whoever runs it brings the list to its horizon, not the runner's own.
    pub(crate) fn update(&mut self, key: &str, horizon: i64) -> (i64, Update) {
        if let Some((to, update)) = self.updates.get(key)
            && *to >= horizon
        {
            return (*to, update.clone());
        }
        if self.updates.len() >= EVENT_TOTALS_KEPT {
            // Forgetting updates under way only lets two requests do one's work.
            self.updates.clear();
        }
        let update = Update::default();
        self.updates
            .insert(key.to_string(), (horizon, update.clone()));
        (horizon, update)
    }

    /// The filter's kept list, whatever its horizon.
    pub(crate) fn get(&self, key: &str) -> Option<MatchList> {
        self.lists.get(key).cloned()
    }

    /// Whether the filter's list at `horizon` was found too long to keep.
    pub(crate) fn too_long(&self, horizon: i64, key: &str) -> bool {
        self.too_long.get(key) == Some(&horizon)
    }

    /// Keeps a filter's list unless a list at a newer horizon is kept for it already (requests that read or
    /// caught up at once finish in any order). One longer than the bound is marked too long for its horizon;
    /// the other lists are dropped when one more would exceed the bound.
    pub(crate) fn keep(&mut self, key: String, list: MatchList) {
        if self
            .lists
            .get(&key)
            .is_some_and(|kept| kept.horizon > list.horizon)
        {
            return;
        }
        if let Some(old) = self.lists.remove(&key) {
            self.events -= old.events.len();
        }
        if list.events.len() > self.bound {
            self.too_long.insert(key, list.horizon);
            return;
        }
        self.too_long.remove(&key);
        if self.events + list.events.len() > self.bound {
            self.lists.clear();
            self.events = 0;
        }
        self.events += list.events.len();
        self.lists.insert(key, list);
    }
}

#[cfg(test)]
mod event_matches_tests {
    use super::{EventMatches, Listed, MatchList};
    use std::sync::Arc;

    fn event(sort_ms: i64, last_id: i64, rowid: i64) -> Listed {
        Listed {
            sort_ms,
            last_id,
            rowid,
            magnitude: None,
        }
    }

    fn list(horizon: i64, events: Vec<Listed>) -> MatchList {
        MatchList::new(horizon, events)
    }

    fn rowids(list: &MatchList) -> Vec<i64> {
        list.events.iter().map(|e| e.rowid).collect()
    }

    #[test]
    fn a_list_caught_up_moves_changed_events_drops_those_that_stopped_matching_and_adds_new_ones() {
        // Rowids 1..=4 in list order at horizon 10.
        let at_10 = list(
            10,
            vec![
                event(400, 9, 4),
                event(300, 7, 3),
                event(300, 5, 2),
                event(100, 10, 1),
            ],
        );
        let at_13 = at_10.caught_up(
            13,
            &[
                // Rowid 1 got a version and an earlier-known origin that now sorts it first.
                (event(500, 11, 1), true),
                // Rowid 3 got a version and no longer matches (its magnitude fell, say).
                (event(300, 12, 3), false),
                // Rowid 5 is new: after 4, and before 2 (the same time, a newer version).
                (event(300, 13, 5), true),
            ],
        );
        assert_eq!(at_13.horizon, 13);
        assert_eq!(rowids(&at_13), vec![1, 4, 5, 2]);
        assert_eq!(
            rowids(&at_10),
            vec![4, 3, 2, 1],
            "the older list is unchanged"
        );
    }

    #[test]
    fn a_list_from_an_older_horizon_does_not_replace_a_newer_one() {
        let mut matches = EventMatches::default();
        matches.keep("q".into(), list(11, vec![event(1, 11, 4)]));
        matches.keep("q".into(), list(10, vec![]));
        let kept = matches.get("q").unwrap();
        assert_eq!((kept.horizon, rowids(&kept)), (11, vec![4]));
        matches.keep("q".into(), list(12, vec![]));
        assert_eq!(matches.get("q").unwrap().horizon, 12);
    }

    #[test]
    fn requests_share_an_update_that_goes_as_far_as_they_need() {
        let mut matches = EventMatches::default();
        let (to, first) = matches.update("q", 10);
        let (again, same) = matches.update("q", 10);
        assert!(to == 10 && again == 10 && Arc::ptr_eq(&first, &same));
        let (to, newer) = matches.update("q", 12);
        assert!(to == 12 && !Arc::ptr_eq(&first, &newer));
        // A request that read an older horizon waits for the newer update, which goes further than it needs.
        let (to, shared) = matches.update("q", 11);
        assert!(to == 12 && Arc::ptr_eq(&newer, &shared));
        assert!(!Arc::ptr_eq(&matches.update("other", 11).1, &newer));
    }

    #[test]
    fn lists_stay_under_the_bound_and_a_longer_one_is_marked_not_kept() {
        let three = |h| list(h, (1..=3).map(|r| event(0, r, r)).collect());
        let mut matches = EventMatches::with_bound(5);
        matches.keep("a".into(), three(1));
        matches.keep(
            "long".into(),
            list(1, (1..=6).map(|r| event(0, r, r)).collect()),
        );
        assert!(matches.too_long(1, "long") && matches.get("long").is_none());
        assert!(
            matches.get("a").is_some(),
            "a list too long to keep drops no other"
        );
        // One more that does not fit beside the kept ones: they go, it stays.
        matches.keep("b".into(), three(1));
        assert!(matches.get("a").is_none() && matches.get("b").is_some());
        // The mark is for its horizon; a list short enough later replaces it.
        assert!(!matches.too_long(2, "long"));
        matches.keep("long".into(), list(2, vec![event(0, 1, 1)]));
        assert!(!matches.too_long(1, "long") && matches.get("long").is_some());
    }
}

#[cfg(test)]
mod event_totals_tests {
    use super::EventTotals;

    #[test]
    fn a_total_holds_for_its_horizon_only_and_a_late_older_count_is_not_kept() {
        let mut totals = EventTotals::default();
        totals.keep(10, "sc".into(), 5);
        assert_eq!(totals.get(10, "sc"), Some(5));
        assert_eq!(totals.get(11, "sc"), None, "a new version may change it");
        totals.keep(11, "sc".into(), 6);
        assert_eq!(totals.get(11, "sc"), Some(6));
        // Counted before the horizon moved, finished after: not kept over the newer one.
        totals.keep(10, "sc".into(), 5);
        assert_eq!(totals.get(11, "sc"), Some(6));
        assert_eq!(totals.get(10, "sc"), None);
    }
}
