//! Read queries of the archive, returning typed rows (`rows.rs`), by resource: report texts, events,
//! deliveries, status. (The hyp reads are in `hyp.rs`.)

mod deliveries;
mod events;
mod place;
mod reports;
mod status;

pub use deliveries::{ArchivedUnit, DeliveryPage, UnparsedFilter};
#[cfg(test)]
pub(crate) use events::filter_sql;
pub(crate) use events::like_pattern;
pub use events::{EventFilter, EventPage};
pub use place::{Circle, GeoBox, Order, PlaceFilter};
