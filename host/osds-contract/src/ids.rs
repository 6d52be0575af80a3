//! The API's two numberings, apart: report versions and deliveries.

/// A report version's id: the archive's numbering of versions, and the cursor consumers keep (`id`,
/// `after`, `Last-Event-ID`). Never a delivery's id: the two numberings are apart (the spec's rule), and a
/// report's id cannot be given where a delivery's is asked for (`osds_store::Store::raw` pins it).
/// (The live ring and the page caches count positions in plain numbers: `.0` where they do arithmetic.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
#[serde(transparent)]
pub struct ReportId(pub i64);

/// A reception record's id (`deliveryId`, `/deliveries/{id}/raw`): a numbering of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
#[serde(transparent)]
pub struct DeliveryId(pub i64);

impl std::fmt::Display for ReportId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
