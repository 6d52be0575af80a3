//! A report version's served `EewReport` JSON text (stored with the version), for the caches and pages that
//! serve it many times; and a `/reports` page written from such items.

use crate::wire::Rendered;
use osds_store::served::SERVED_FORMAT;
use osds_store::{ReportId, ServedReport};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// One report version, rendered.
#[derive(Debug, Clone)]
pub struct ReportItem {
    pub id: ReportId,
    /// Its channel, for the `source` filter.
    pub source: Arc<str>,
    pub json: Arc<str>,
}

impl From<ReportItem> for Rendered {
    fn from(item: ReportItem) -> Rendered {
        Rendered::new(item.id.0, item.source, &item.json)
    }
}

impl From<ServedReport> for Rendered {
    fn from(served: ServedReport) -> Rendered {
        Rendered::from(ReportItem::from(served))
    }
}

impl From<ServedReport> for ReportItem {
    fn from(served: ServedReport) -> ReportItem {
        ReportItem {
            id: served.id,
            source: served.source,
            json: served.json,
        }
    }
}

/// A `/reports` page: report versions with ids after a cursor, the cursor after the last and the horizon.
pub struct ReportPage {
    pub items: Vec<ReportItem>,
    pub next_cursor: i64,
    pub high_water: i64,
    pub archive_id: String,
}

impl ReportPage {
    /// The `ReportPage` body, written from the items' ready text, and its validator. A version never changes
    /// once committed and ids up to the horizon are all committed, so for one URL (cursor, limit, channels) the
    /// body is fixed by the archive, the cursor after the last item, the horizon and the served form: the
    /// validator is derived from those, not from hashing up to ~600 kB on every answer.
    pub fn to_json(&self) -> (String, [u8; 16]) {
        let text_bytes: usize = self.items.iter().map(|item| item.json.len() + 1).sum();
        let mut body = String::with_capacity(text_bytes + 64);
        body.push_str("{\"items\":[");
        for (n, item) in self.items.iter().enumerate() {
            if n > 0 {
                body.push(',');
            }
            body.push_str(&item.json);
        }
        let tail = format!(
            "],\"nextCursor\":{},\"highWater\":{},\"archiveId\":\"{}\"}}",
            self.next_cursor, self.high_water, self.archive_id
        );
        body.push_str(&tail);
        let mut validator = Sha256::new();
        validator.update(SERVED_FORMAT.to_le_bytes());
        validator.update(tail.as_bytes());
        let digest = validator.finalize();
        let mut short = [0; 16];
        short.copy_from_slice(&digest[..16]);
        (body, short)
    }
}
