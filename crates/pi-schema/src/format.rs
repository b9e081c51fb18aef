//! The `format` checks the reference applies (JSON Schema 2020-12 formats, as pi-schema's `formats` table checks
//! them). Formats not listed here are annotations: they accept every string.

use super::regex::JsRegex;

/// A format check: whether a string has the format.
pub(crate) type FormatCheck = fn(&str) -> bool;

/// The check of a format name.
pub(crate) fn lookup(name: &str) -> Option<FormatCheck> {
    Some(match name {
        "date" => is_date,
        "time" => is_time,
        "date-time" => is_date_time,
        "duration" => is_duration,
        "email" => is_email,
        "ipv4" => is_ipv4,
        "ipv6" => is_ipv6,
        "uuid" => is_uuid,
        "uri" => is_uri,
        "uri-reference" => is_uri_reference,
        "uri-template" => is_uri_template,
        "json-pointer" => is_json_pointer,
        "json-pointer-uri-fragment" => is_json_pointer_uri_fragment,
        "relative-json-pointer" => is_relative_json_pointer,
        "regex" => |s| JsRegex::new(s).is_ok(),
        _ => return None,
    })
}

fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(&s[..4]), digits(&s[5..7]), digits(&s[8..])) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// `hh:mm:ss[.frac]` with a required zone (`Z` or `±hh:mm`); a leap second only at 23:59:60 UTC.
fn is_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' || !s.is_char_boundary(8) {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) = (digits(&s[..2]), digits(&s[3..5]), digits(&s[6..8])) else {
        return false;
    };
    let mut rest = &s[8..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = fraction.find(|c: char| !c.is_ascii_digit()).unwrap_or(fraction.len());
        if end == 0 {
            return false;
        }
        rest = &fraction[end..];
    }
    let offset = match rest {
        "Z" | "z" => 0_i64,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || !matches!(rb[0], b'+' | b'-') || rb[3] != b':' {
                return false;
            }
            let (Some(h), Some(m)) = (digits(&rest[1..3]), digits(&rest[4..])) else { return false };
            if h > 23 || m > 59 {
                return false;
            }
            let sign = if rb[0] == b'-' { -1 } else { 1 };
            sign * i64::from(h * 60 + m)
        }
    };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    if second < 60 {
        return true;
    }
    let utc = i64::from(hour * 60 + minute) - offset;
    utc.rem_euclid(1440) == 1439
}

fn is_date_time(s: &str) -> bool {
    let parts: Vec<&str> = s.split(['T', 't']).collect();
    parts.len() == 2 && is_date(parts[0]) && is_time(parts[1])
}

/// ISO 8601 durations: `P` then date units in order without gaps (Y, M, D), then `T` and time units (H, M, S), or
/// weeks alone.
fn is_duration(s: &str) -> bool {
    let Some(body) = s.strip_prefix('P') else { return false };
    if let Some(weeks) = body.strip_suffix('W') {
        return !weeks.is_empty() && weeks.bytes().all(|b| b.is_ascii_digit());
    }
    let (date, time) = match body.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (body, None),
    };
    let units_ok = |part: &str, units: &[u8]| -> bool {
        let mut last: Option<usize> = None;
        let mut number = 0;
        for b in part.bytes() {
            if b.is_ascii_digit() {
                number += 1;
                continue;
            }
            let Some(i) = units.iter().position(|u| *u == b) else { return false };
            if number == 0 || last.is_some_and(|l| i != l + 1) {
                return false;
            }
            last = Some(i);
            number = 0;
        }
        number == 0 && last.is_some()
    };
    let date_ok = date.is_empty() || units_ok(date, b"YMD");
    match time {
        Some(t) => date_ok && units_ok(t, b"HMS"),
        None => !date.is_empty() && date_ok,
    }
}

fn is_email(s: &str) -> bool {
    let (local_ok, domain) = if let Some(quoted) = s.strip_prefix('"') {
        let mut chars = quoted.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    end = Some(i);
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, e)) if (' '..='~').contains(&e) => {}
                    _ => return false,
                },
                _ => {}
            }
        }
        let Some(end) = end else { return false };
        match quoted[end + 1..].strip_prefix('@') {
            Some(domain) => (true, domain),
            None => return false,
        }
    } else {
        let Some((local, domain)) = s.split_once('@') else { return false };
        let atom = |a: &str| {
            !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~-".contains(&b))
        };
        (local.split('.').all(atom), domain)
    };
    if !local_ok {
        return false;
    }
    if let Some(literal) = domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        if let Some(addr) = literal.get(..5).filter(|p| p.eq_ignore_ascii_case("ipv6:")).map(|_| &literal[5..]) {
            return !addr.is_empty() && addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
        }
        return is_ipv4(literal);
    }
    domain.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

/// A dotted quad of 0-255 without leading zeros.
fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && (p.len() == 1 || !p.starts_with('0'))
                && digits(p).is_some_and(|n| n <= 255)
        })
}

/// Eight groups of 1-4 hex digits (an IPv4 address may stand for the last two), or fewer with one `::`.
fn is_ipv6(s: &str) -> bool {
    let (head, tail, compressed) = match s.split_once("::") {
        Some((h, t)) => (h, t, true),
        None => (s, "", false),
    };
    if tail.contains("::") {
        return false;
    }
    let groups = |part: &str, last: bool| -> Option<usize> {
        if part.is_empty() {
            return Some(0);
        }
        let pieces: Vec<&str> = part.split(':').collect();
        let mut n = 0;
        for (i, p) in pieces.iter().enumerate() {
            if last && i == pieces.len() - 1 && p.contains('.') {
                if !is_ipv4(p) {
                    return None;
                }
                n += 2;
            } else if (1..=4).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit()) {
                n += 1;
            } else {
                return None;
            }
        }
        Some(n)
    };
    if compressed {
        match (groups(head, false), groups(tail, true)) {
            (Some(h), Some(t)) => h + t <= 7,
            _ => false,
        }
    } else {
        groups(head, true) == Some(8)
    }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn unreserved_or_sub_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b)
}

/// Whether every byte of `s` is allowed by `allowed` or part of a `%XX` escape.
fn escaped_all(s: &str, allowed: impl Fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return false;
            }
            i += 3;
        } else if allowed(b[i]) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

fn pchars(s: &str) -> bool {
    escaped_all(s, |b| unreserved_or_sub_delim(b) || b == b':' || b == b'@')
}

/// `?query` and `#fragment` after the hierarchical part; returns the part before them.
fn split_query_fragment(s: &str) -> Option<&str> {
    let (before, fragment) = s.split_once('#').map_or((s, None), |(b, f)| (b, Some(f)));
    let (main, query) = before.split_once('?').map_or((before, None), |(m, q)| (m, Some(q)));
    let tail_ok = |t: &str| escaped_all(t, |b| unreserved_or_sub_delim(b) || b":@/?".contains(&b));
    (query.is_none_or(tail_ok) && fragment.is_none_or(tail_ok)).then_some(main)
}

fn authority_ok(authority: &str) -> bool {
    let (userinfo, hostport) = match authority.split_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if userinfo.is_some_and(|u| !escaped_all(u, |b| unreserved_or_sub_delim(b) || b == b':')) {
        return false;
    }
    let (host_ok, port) = if let Some(literal) = hostport.strip_prefix('[') {
        let Some((inside, after)) = literal.split_once(']') else { return false };
        let future = inside.strip_prefix(['v', 'V']).and_then(|f| f.split_once('.')).is_some_and(|(hex, rest)| {
            !hex.is_empty()
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
                && !rest.is_empty()
                && rest.bytes().all(|b| unreserved_or_sub_delim(b) || b == b':')
        });
        (is_ipv6(inside) || future, after.strip_prefix(':').or(if after.is_empty() { Some("") } else { None }))
    } else {
        let (host, port) = hostport.split_once(':').map_or((hostport, Some("")), |(h, p)| (h, Some(p)));
        (escaped_all(host, unreserved_or_sub_delim), port)
    };
    host_ok && port.is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// A hierarchical part after `scheme:` (or a relative reference when `relative`).
fn hier_part_ok(part: &str, relative: bool) -> bool {
    if let Some(rest) = part.strip_prefix("//") {
        let end = rest.find('/').unwrap_or(rest.len());
        return authority_ok(&rest[..end]) && rest[end..].split('/').all(pchars);
    }
    if part.is_empty() {
        return true;
    }
    let segments: Vec<&str> = part.split('/').collect();
    if relative && segments.first().is_some_and(|first| first.contains(':')) {
        return false;
    }
    segments.iter().all(|seg| pchars(seg))
}

fn scheme_len(s: &str) -> Option<usize> {
    let colon = s.find(':')?;
    let scheme = &s.as_bytes()[..colon];
    (!scheme.is_empty()
        && scheme[0].is_ascii_alphabetic()
        && scheme.iter().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)))
    .then_some(colon)
}

fn is_uri(s: &str) -> bool {
    let Some(colon) = scheme_len(s) else { return false };
    split_query_fragment(&s[colon + 1..]).is_some_and(|hier| hier_part_ok(hier, false))
}

fn is_uri_reference(s: &str) -> bool {
    if is_uri(s) {
        return true;
    }
    split_query_fragment(s).is_some_and(|main| hier_part_ok(main, true))
}

fn is_uri_template(s: &str) -> bool {
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(expression) = rest.strip_prefix('{') {
            let Some(end) = expression.find('}') else { return false };
            if !template_expression_ok(&expression[..end]) {
                return false;
            }
            rest = &expression[end + 1..];
            continue;
        }
        let c = rest.chars().next().unwrap_or('\0');
        if c == '%' {
            let b = rest.as_bytes();
            if b.len() < 3 || !b[1].is_ascii_hexdigit() || !b[2].is_ascii_hexdigit() {
                return false;
            }
            rest = &rest[3..];
            continue;
        }
        if c <= ' ' || c == '\u{7f}' || "\"<>\\^`{|}".contains(c) {
            return false;
        }
        rest = &rest[c.len_utf8()..];
    }
    true
}

fn template_expression_ok(e: &str) -> bool {
    let body = e.strip_prefix(|c: char| "+#./;?&=,!@|".contains(c)).unwrap_or(e);
    body.split(',').all(|spec| {
        let (name, modifier) = if let Some(n) = spec.strip_suffix('*') {
            (n, None)
        } else {
            match spec.split_once(':') {
                Some((n, m)) => (n, Some(m)),
                None => (spec, None),
            }
        };
        let modifier_ok = modifier
            .is_none_or(|m| (1..=4).contains(&m.len()) && !m.starts_with('0') && m.bytes().all(|b| b.is_ascii_digit()));
        modifier_ok
            && name
                .split('.')
                .all(|part| !part.is_empty() && escaped_all(part, |b| b.is_ascii_alphanumeric() || b == b'_'))
    })
}

fn pointer_tokens_ok(s: &str) -> bool {
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

fn is_json_pointer(s: &str) -> bool {
    (s.is_empty() || s.starts_with('/')) && pointer_tokens_ok(s)
}

fn is_json_pointer_uri_fragment(s: &str) -> bool {
    let Some(pointer) = s.strip_prefix('#') else { return false };
    (pointer.is_empty() || pointer.starts_with('/'))
        && pointer_tokens_ok(pointer)
        && escaped_all(pointer, |b| b.is_ascii_alphanumeric() || b"_-.!$&'()*+,;:=@/~".contains(&b))
}

fn is_relative_json_pointer(s: &str) -> bool {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, rest) = s.split_at(end);
    let number_ok = number == "0" || (!number.is_empty() && !number.starts_with('0'));
    number_ok && (rest == "#" || is_json_pointer(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_formats() {
        assert!(is_date("2024-02-29") && !is_date("2023-02-29") && !is_date("2023-13-01"));
        assert!(
            is_time("23:59:60Z") && is_time("12:00:00.5+01:00") && !is_time("12:00:00") && !is_time("23:59:60+01:00")
        );
        assert!(is_date_time("2023-01-01t10:00:00.5+01:00") && !is_date_time("2023-01-01T10:00:00"));
        assert!(is_duration("P1Y2M3DT4H") && is_duration("P4W") && is_duration("PT1S") && !is_duration("P"));
        assert!(!is_duration("P1Y2D") && !is_duration("PT") && !is_duration("P1D2M"));
        assert!(
            is_email("A.B@example.COM") && is_email("\"a b\"@x.io") && !is_email("not-an-email") && !is_email("a..b@x")
        );
        assert!(is_ipv4("10.0.0.1") && !is_ipv4("256.1.1.1") && !is_ipv4("01.1.1.1"));
        assert!(is_ipv6("::") && is_ipv6("fe80::1:2") && is_ipv6("::ffff:1.2.3.4") && is_ipv6("1:2:3:4:5:6:7:8"));
        assert!(!is_ipv6("::1::") && !is_ipv6("1::2:3:4:5:6:7:8") && !is_ipv6("1:2:3:4:5:6:7") && !is_ipv6("12345::"));
        assert!(is_uuid("123e4567-E89B-12d3-a456-426614174000") && !is_uuid("1234"));
        assert!(is_uri("https://example.com/a?b#c") && is_uri("urn:isbn:123") && is_uri("http://[::1]:80/"));
        assert!(!is_uri("no scheme") && !is_uri("http://a b") && !is_uri("/relative"));
        assert!(
            is_uri_reference("/relative")
                && is_uri_reference("a/b:c")
                && !is_uri_reference("a b")
                && !is_uri_reference("a:b c")
        );
        assert!(is_uri_template("/users/{id}{?q,page:10}") && !is_uri_template("{oops"));
        assert!(is_json_pointer("/a~1b/0") && !is_json_pointer("a/b") && !is_json_pointer("/~2"));
        assert!(is_relative_json_pointer("0#") && is_relative_json_pointer("1/a") && !is_relative_json_pointer("01/a"));
        assert!(is_json_pointer_uri_fragment("#/a%20b") && !is_json_pointer_uri_fragment("/a"));
        assert!(is_email("a@[IPv6:fe80::1]") && !is_email("a@[IPv6:]") && !is_email("a@[é1234]"));
        for odd in ["é", "12:00:0é", "ab:cd:éé", "2024-0é-01", "%", "%é", "{é", "P1é", "[é]", "a@b.é", "\"é"]
        {
            for name in
                ["date", "time", "date-time", "duration", "email", "ipv4", "ipv6", "uuid", "uri", "uri-reference"]
            {
                let _ = lookup(name).map(|check| check(odd));
            }
        }
    }
}
