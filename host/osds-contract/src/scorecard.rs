//! The self-sensing scorecard against an official agency (JMA), as `/hyp/status` and `/hyp/events/{id}` show it.

use serde::Serialize;

/// The agency's determination of one quake, and how one of our events compares with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub agency: &'static str,
    /// The agency's event identifier.
    pub event_id: String,
    /// `catalogue` (its earthquake list) or `warning` (its last early-warning serial).
    pub determination: &'static str,
    pub origin_at: i64,
    pub latitude: f64,
    pub longitude: f64,
    pub depth_km: Option<f64>,
    pub magnitude: Option<f64>,
    /// When the agency issued its first warning of the quake (Unix ms), if it warned.
    pub first_warning_at: Option<i64>,
    /// Our latest epicentre's distance from the agency's (km).
    pub epicentre_km: f64,
    /// Our depth less the agency's (km).
    pub depth_difference_km: Option<f64>,
    /// Our magnitude less the agency's.
    pub magnitude_difference: Option<f64>,
    /// Seconds our first report came before the agency's first warning (negative: after it).
    pub lead_seconds: Option<f64>,
}

/// The totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub agency: &'static str,
    /// The reference decoder reading the agency's frames: `name@sha256`.
    pub reference: String,
    /// Quakes both we and the agency reported (matched within 100 km and 30 s).
    pub matched: usize,
    /// Our public events the agency has not reported (after a grace period): possibly false.
    pub ours_unmatched: usize,
    /// The agency's quakes inside our network that we did not report (after a grace period).
    pub agency_missed: usize,
    pub median_epicentre_km: Option<f64>,
    pub median_depth_difference_km: Option<f64>,
    pub median_magnitude_difference: Option<f64>,
    pub median_lead_seconds: Option<f64>,
    /// A few of each, newest first, to look at.
    pub unmatched_event_ids: Vec<String>,
    pub missed_agency_event_ids: Vec<String>,
    /// The agency's determinations read so far, and the frames it could not read.
    pub determinations: usize,
    pub undecodable_frames: usize,
    pub updated_at: Option<i64>,
}
