//! Wall-clock times of a fixed UTC offset (Beijing UTC+8, Japan UTC+9; neither keeps daylight saving) to
//! RFC 3339 UTC, without a date library.

const BEIJING_OFFSET_SECONDS: i64 = 8 * 3600;
const JAPAN_OFFSET_SECONDS: i64 = 9 * 3600;

/// `2026-08-28 13:13:56` (Beijing) → `2026-08-28T05:13:56Z`. Also accepts `/` as the date separator and
/// `T` between date and time. `None` when the text is not such a time.
pub fn beijing_to_utc_rfc3339(text: &str) -> Option<String> {
    wall_clock_to_utc_rfc3339(text, BEIJING_OFFSET_SECONDS)
}

/// `2024/08/24 09:33:35` (Japan) → `2024-08-24T00:33:35Z`, as [`beijing_to_utc_rfc3339`] reads it.
pub fn japan_to_utc_rfc3339(text: &str) -> Option<String> {
    wall_clock_to_utc_rfc3339(text, JAPAN_OFFSET_SECONDS)
}

fn wall_clock_to_utc_rfc3339(text: &str, offset_seconds: i64) -> Option<String> {
    let b = text.trim().as_bytes();
    if b.len() != 19
        || !matches!(b[4], b'-' | b'/')
        || b[7] != b[4]
        || !matches!(b[10], b' ' | b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = &b[range];
        digits.iter().all(u8::is_ascii_digit).then(|| {
            digits
                .iter()
                .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let utc = local - offset_seconds;
    let (days, secs) = (utc.div_euclid(86_400), utc.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    Some(format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    ))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}
