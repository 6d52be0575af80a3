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
