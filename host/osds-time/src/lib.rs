//! Time at the edges: RFC 3339 UTC strings for EEW times, Beijing (UTC+8) for date filters and month buckets.

use chrono::{DateTime, FixedOffset, NaiveDate, SecondsFormat, TimeZone, Utc};

const BEIJING_OFFSET_SECONDS: i32 = 8 * 3600;

pub fn beijing() -> FixedOffset {
    FixedOffset::east_opt(BEIJING_OFFSET_SECONDS).expect("UTC+8 is a valid offset")
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-22T16:40:00.123Z`.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// RFC 3339 UTC with milliseconds of a Unix-ms instant (the epoch for one out of range).
pub fn rfc3339_ms(ms: i64) -> String {
    rfc3339(DateTime::from_timestamp_millis(ms).unwrap_or_default())
}

/// The current Unix time in milliseconds.
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn now_rfc3339() -> String {
    rfc3339(Utc::now())
}

/// Unix ms of an RFC 3339 time.
pub fn parse_ms(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// `YYYY-MM` of a Unix-ms instant in Beijing time.
pub fn beijing_month(ms: i64) -> String {
    match beijing().timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%Y-%m").to_string(),
        None => "0000-00".into(),
    }
}

/// Unix ms of 00:00 Beijing time on `date`.
pub fn beijing_day_start_ms(date: NaiveDate) -> i64 {
    let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
    midnight.and_utc().timestamp_millis() - i64::from(BEIJING_OFFSET_SECONDS) * 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beijing_day_and_month_edges() {
        let day = NaiveDate::from_ymd_opt(2026, 1, 2).unwrap();
        assert_eq!(
            beijing_day_start_ms(day),
            parse_ms("2026-01-01T16:00:00Z").unwrap()
        );
        assert_eq!(
            beijing_month(parse_ms("2026-01-31T15:59:59Z").unwrap()),
            "2026-01"
        );
        assert_eq!(
            beijing_month(parse_ms("2026-01-31T16:00:00Z").unwrap()),
            "2026-02"
        );
    }
}
