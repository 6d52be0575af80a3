//! The archive's counts (`/status` shows them); the store keeps the last ones with the ids they were taken at,
//! and the totals of `/events` filters with the horizon they were counted at.

/// Archive counts and the newest (delivery, reparse, report) ids they were counted at.
pub(crate) type CountedAt = ((i64, i64, i64), ArchiveCounts);

/// Archive counts for `/status`.
#[derive(Debug, Default, Clone)]
pub struct ArchiveCounts {
    pub events: i64,
    pub versions: i64,
    pub deliveries: i64,
    pub raw_payloads: i64,
    /// Deliveries that did not decode and have not been recovered by a later decoder.
    pub unparsed: i64,
    /// Unparsed deliveries a later decoder recovered (`osds reparse`).
    pub recovered: i64,
    pub ignored: i64,
    pub duplicates: i64,
    pub high_water: i64,
}

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

/// The events a filter lists, as rowids in list order, all found at one horizon: a filter is read once per
/// horizon (a text search reads every event's texts, 60-100 ms at 187,500 events; a deep page skipped up to
/// 187,500 index entries) and its pages are slices; a list is exact until a new version moves the horizon,
/// like a total. A list longer than the bound is not kept; its filter is then served page by page.
#[derive(Debug)]
pub(crate) struct EventMatches {
    /// Rowids kept at most, over all lists.
    bound: usize,
    horizon: i64,
    lists: std::collections::HashMap<String, std::sync::Arc<Vec<i64>>>,
    rowids: usize,
    /// Filters whose list at this horizon was too long to keep.
    too_long: std::collections::HashSet<String>,
}

/// Rowids kept over all lists (8 bytes each: 64 MiB).
const EVENT_MATCHES_ROWIDS: usize = 8 << 20;

impl Default for EventMatches {
    fn default() -> Self {
        EventMatches::with_bound(EVENT_MATCHES_ROWIDS)
    }
}

impl EventMatches {
    fn with_bound(bound: usize) -> EventMatches {
        EventMatches {
            bound,
            horizon: 0,
            lists: Default::default(),
            rowids: 0,
            too_long: Default::default(),
        }
    }

    pub(crate) fn get(&self, horizon: i64, key: &str) -> Option<std::sync::Arc<Vec<i64>>> {
        (self.horizon == horizon)
            .then(|| self.lists.get(key).cloned())
            .flatten()
    }

    /// Whether the filter's list at `horizon` was found too long to keep.
    pub(crate) fn too_long(&self, horizon: i64, key: &str) -> bool {
        self.horizon == horizon && self.too_long.contains(key)
    }

    /// Keeps a list found at `horizon` (read before searching), like [`EventTotals::keep`]: one found at an
    /// older horizon than the kept ones is not kept; one longer than the bound is marked too long; the kept
    /// lists are dropped when one more would exceed the bound.
    pub(crate) fn keep(&mut self, horizon: i64, key: String, list: std::sync::Arc<Vec<i64>>) {
        if horizon > self.horizon {
            self.lists.clear();
            self.too_long.clear();
            self.rowids = 0;
            self.horizon = horizon;
        }
        if horizon != self.horizon {
            return;
        }
        if list.len() > self.bound {
            self.too_long.insert(key);
            return;
        }
        if self.rowids + list.len() > self.bound {
            self.lists.clear();
            self.rowids = 0;
        }
        self.rowids += list.len();
        if let Some(old) = self.lists.insert(key, list) {
            self.rowids -= old.len();
        }
    }
}

#[cfg(test)]
mod event_matches_tests {
    use super::EventMatches;
    use std::sync::Arc;

    #[test]
    fn a_match_list_holds_for_its_horizon_only() {
        let mut matches = EventMatches::default();
        matches.keep(10, "q".into(), Arc::new(vec![3, 1, 2]));
        assert_eq!(matches.get(10, "q").as_deref(), Some(&vec![3, 1, 2]));
        assert_eq!(matches.get(11, "q"), None, "a new version may change it");
        matches.keep(11, "q".into(), Arc::new(vec![4, 3, 1, 2]));
        matches.keep(10, "q".into(), Arc::new(vec![3, 1, 2]));
        assert_eq!(matches.get(11, "q").map(|l| l.len()), Some(4));
        assert_eq!(matches.get(10, "q"), None);
    }

    #[test]
    fn lists_stay_under_the_bound_and_a_longer_one_is_marked_not_kept() {
        let mut matches = EventMatches::with_bound(5);
        matches.keep(1, "a".into(), Arc::new(vec![1, 2, 3]));
        matches.keep(1, "long".into(), Arc::new(vec![1, 2, 3, 4, 5, 6]));
        assert!(matches.too_long(1, "long") && matches.get(1, "long").is_none());
        assert!(
            matches.get(1, "a").is_some(),
            "a list too long to keep drops no other"
        );
        // One more that does not fit beside the kept ones: they go, it stays.
        matches.keep(1, "b".into(), Arc::new(vec![4, 5, 6]));
        assert!(matches.get(1, "a").is_none() && matches.get(1, "b").is_some());
        // A new horizon forgets the mark.
        matches.keep(2, "b".into(), Arc::new(vec![4]));
        assert!(!matches.too_long(2, "long"));
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
