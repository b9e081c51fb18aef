//! Cities the demo knows (with their standard UTC offsets) and civil time formatting.

use std::fmt;

/// A city and its standard-time UTC offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct City {
    /// Display name.
    pub name: &'static str,
    /// Offset from UTC in minutes (standard time).
    pub utc_offset_minutes: i32,
}

const fn city(name: &'static str, utc_offset_minutes: i32) -> City {
    City { name, utc_offset_minutes }
}

/// Major cities, longest multi-word names first within a region so "New York" wins over "York".
pub const CITIES: &[City] = &[
    city("Shanghai", 480),
    city("Beijing", 480),
    city("Hong Kong", 480),
    city("Shenzhen", 480),
    city("Guangzhou", 480),
    city("Taipei", 480),
    city("Singapore", 480),
    city("Tokyo", 540),
    city("Osaka", 540),
    city("Seoul", 540),
    city("Bangkok", 420),
    city("Jakarta", 420),
    city("Hanoi", 420),
    city("Manila", 480),
    city("Mumbai", 330),
    city("Delhi", 330),
    city("Bangalore", 330),
    city("Dubai", 240),
    city("Istanbul", 180),
    city("Moscow", 180),
    city("Cairo", 120),
    city("Nairobi", 180),
    city("Lagos", 60),
    city("Johannesburg", 120),
    city("Cape Town", 120),
    city("Athens", 120),
    city("Helsinki", 120),
    city("Berlin", 60),
    city("Paris", 60),
    city("Madrid", 60),
    city("Barcelona", 60),
    city("Rome", 60),
    city("Milan", 60),
    city("Vienna", 60),
    city("Zurich", 60),
    city("Amsterdam", 60),
    city("Brussels", 60),
    city("Copenhagen", 60),
    city("Stockholm", 60),
    city("Oslo", 60),
    city("Warsaw", 60),
    city("Prague", 60),
    city("London", 0),
    city("Dublin", 0),
    city("Lisbon", 0),
    city("Reykjavik", 0),
    city("New York", -300),
    city("Boston", -300),
    city("Toronto", -300),
    city("Montreal", -300),
    city("Washington", -300),
    city("Miami", -300),
    city("Chicago", -360),
    city("Mexico City", -360),
    city("Denver", -420),
    city("Los Angeles", -480),
    city("San Francisco", -480),
    city("Seattle", -480),
    city("Vancouver", -480),
    city("Honolulu", -600),
    city("Sao Paulo", -180),
    city("Buenos Aires", -180),
    city("Lima", -300),
    city("Bogota", -300),
    city("Sydney", 600),
    city("Melbourne", 600),
    city("Brisbane", 600),
    city("Perth", 480),
    city("Auckland", 720),
];

/// The known city with this name (case-insensitive).
pub fn find(name: &str) -> Option<&'static City> {
    let name = name.trim();
    CITIES.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

/// The UTC offset in minutes of a known city or of `UTC`, `UTC+8`, `GMT-05:30`.
pub fn utc_offset(location: &str) -> Option<i32> {
    if let Some(city) = find(location) {
        return Some(city.utc_offset_minutes);
    }
    let upper = location.trim().to_ascii_uppercase();
    let rest = upper.strip_prefix("UTC").or_else(|| upper.strip_prefix("GMT"))?.trim();
    if rest.is_empty() {
        return Some(0);
    }
    let (sign, digits) = match rest.as_bytes().first() {
        Some(b'+') => (1, &rest[1..]),
        Some(b'-') => (-1, &rest[1..]),
        _ => return None,
    };
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) => (h.parse::<i32>().ok()?, m.parse::<i32>().ok()?),
        None => (digits.parse::<i32>().ok()?, 0),
    };
    if !(0..=14).contains(&hours) || !(0..60).contains(&minutes) {
        return None;
    }
    Some(sign * (hours * 60 + minutes))
}

/// A civil date and time at a fixed UTC offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    weekday: usize,
    offset_minutes: i32,
}

const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

impl LocalTime {
    /// The time `unix_ms` (milliseconds since the epoch) seen at `offset_minutes`.
    pub fn at(unix_ms: i64, offset_minutes: i32) -> Self {
        let minutes = unix_ms.div_euclid(60_000) + i64::from(offset_minutes);
        let days = minutes.div_euclid(1440);
        let minute_of_day = minutes.rem_euclid(1440);
        let (year, month, day) = civil_from_days(days);
        // 1970-01-01 was a Thursday (index 3 from Monday).
        let weekday = (days + 3).rem_euclid(7) as usize;
        Self {
            year,
            month,
            day,
            hour: (minute_of_day / 60) as u32,
            minute: (minute_of_day % 60) as u32,
            weekday,
            offset_minutes,
        }
    }

    fn offset_text(&self) -> String {
        let sign = if self.offset_minutes < 0 { '-' } else { '+' };
        let abs = self.offset_minutes.unsigned_abs();
        format!("{sign}{:02}:{:02}", abs / 60, abs % 60)
    }

    /// ISO 8601 text, e.g. `2026-12-01T11:05+08:00`.
    pub fn iso(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}{}",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.offset_text()
        )
    }
}

impl fmt::Display for LocalTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let weekday = WEEKDAYS.get(self.weekday).copied().unwrap_or("?");
        write!(
            f,
            "{weekday} {:04}-{:02}-{:02} {:02}:{:02} (UTC{})",
            self.year,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.offset_text()
        )
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time_at_offsets() {
        // 2026-12-01T03:05:00Z is a Tuesday.
        let ms = 1_796_094_300_000;
        assert_eq!(LocalTime::at(ms, 0).to_string(), "Tuesday 2026-12-01 03:05 (UTC+00:00)");
        assert_eq!(LocalTime::at(ms, 480).iso(), "2026-12-01T11:05+08:00");
        assert_eq!(LocalTime::at(ms, -300).to_string(), "Monday 2026-11-30 22:05 (UTC-05:00)");
        assert_eq!(LocalTime::at(0, 0).iso(), "1970-01-01T00:00+00:00");
        assert_eq!(LocalTime::at(951_782_400_000, 0).iso(), "2000-02-29T00:00+00:00");
    }

    #[test]
    fn offsets_of_cities_and_zones() {
        assert_eq!(utc_offset("tokyo"), Some(540));
        assert_eq!(utc_offset("UTC"), Some(0));
        assert_eq!(utc_offset("UTC+8"), Some(480));
        assert_eq!(utc_offset("gmt-05:30"), Some(-330));
        assert_eq!(utc_offset("UTC+99"), None);
        assert_eq!(utc_offset("Atlantis"), None);
    }
}
