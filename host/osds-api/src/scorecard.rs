//! The self-sensing scorecard against an official agency (JMA), as the API shows it: per event, how its
//! solution compares with the agency's determination of the same quake; overall, how many quakes matched, how
//! many of our events the agency never reported (possibly false), how many of its quakes we missed, and the
//! median differences. The service builds it (`osds_server::hyp::scorecard`) and swaps it in as a whole; the
//! API only reads it, so it does not depend on how it is made.

use std::collections::HashMap;
use std::sync::Arc;

/// The scorecard in use.
pub type SharedScorecard = Arc<arc_swap::ArcSwap<Scorecard>>;

pub use osds_contract::scorecard::{Comparison, Summary};

/// Everything the API shows of the scorecard.
#[derive(Debug, Clone, Default)]
pub struct Scorecard {
    /// By our event id.
    pub comparisons: HashMap<String, Comparison>,
    pub summary: Summary,
}
