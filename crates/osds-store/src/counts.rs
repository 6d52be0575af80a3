//! The archive's counts (`/status` shows them); the store keeps the last ones with the ids they were taken at.

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
