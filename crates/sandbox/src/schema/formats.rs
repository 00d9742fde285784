//! The `pattern` and `format` checks: Go's RE2 dialect and go-openapi's string formats.

use std::sync::LazyLock;

use regex::Regex;

/// Compiles a schema `pattern`. The server uses Go's RE2, whose `\d`, `\w`, `\s` and `\b` are
/// ASCII-only and which knows `\Q...\E` literals; the `regex` crate's classes are
/// Unicode-aware and it has no `\Q`, so the pattern is translated first.
pub(super) fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    Regex::new(&go_compatible_pattern(pattern)).map_err(|err| {
        let text = err.to_string();
        let reason = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("error: "))
            .unwrap_or(&text);
        format!("error parsing regexp: {reason}")
    })
}

fn go_compatible_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    let mut class_depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(escaped) = chars.next() else {
                    out.push(c);
                    break;
                };
                let replacement = match escaped {
                    'Q' => {
                        let rest = chars.as_str();
                        let (literal, after) = rest.split_once("\\E").unwrap_or((rest, ""));
                        out.push_str(&regex::escape(literal));
                        chars = after.chars();
                        continue;
                    }
                    'd' => "[0-9]",
                    'D' => "[^0-9]",
                    'w' => "[0-9A-Za-z_]",
                    'W' => "[^0-9A-Za-z_]",
                    's' => "[\\t\\n\\f\\r ]",
                    'S' => "[^\\t\\n\\f\\r ]",
                    'b' if class_depth == 0 => "(?-u:\\b)",
                    'B' if class_depth == 0 => "(?-u:\\B)",
                    _ => {
                        out.push(c);
                        out.push(escaped);
                        continue;
                    }
                };
                out.push_str(replacement);
            }
            '[' => {
                class_depth += 1;
                out.push(c);
            }
            ']' => {
                class_depth = class_depth.saturating_sub(1);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

fn lazy_regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn regex_matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

static CLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
/// go-openapi's hostname pattern (RFC 1034 labels, also allowing Unicode letters and symbols).
static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$",
    )
});
static HEXCOLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| lazy_regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static SSN: LazyLock<Option<Regex>> =
    LazyLock::new(|| lazy_regex(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));

/// Whether `text` satisfies a supported format (name without dashes). Formats the sandbox
/// does not check (isbn, creditcard, rgbcolor, duration, password) always pass.
pub(super) fn format_valid(format: &str, text: &str) -> bool {
    match format {
        "datetime" => is_date_time(text),
        "date" => is_date(text),
        "byte" => is_base64(text),
        "uuid" => regex_matches(&UUID, text),
        "uuid3" => regex_matches(&UUID3, text),
        "uuid4" => regex_matches(&UUID4, text),
        "uuid5" => regex_matches(&UUID5, text),
        "email" => is_email(text),
        "hostname" => is_hostname(text),
        "ipv4" => text.contains('.') && text.parse::<std::net::IpAddr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<std::net::IpAddr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "uri" => is_request_uri(text),
        "hexcolor" => regex_matches(&HEXCOLOR, text),
        "ssn" => regex_matches(&SSN, text),
        "bsonobjectid" => text.len() == 24 && text.bytes().all(|b| b.is_ascii_hexdigit()),
        _ => true,
    }
}

/// strfmt's date-time: a full date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)`, case-insensitive.
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(clock)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Some(captures) = CLOCK.as_ref().and_then(|re| re.captures(clock)) else {
        return false;
    };
    is_date(date)
        && captures.get(1).is_some_and(|h| h.as_str() <= "23")
        && captures.get(2).is_some_and(|m| m.as_str() <= "59")
        && captures.get(3).is_some_and(|s| s.as_str() <= "59")
}

/// A calendar date `YYYY-MM-DD`, as Go's `time.Parse("2006-01-02", ...)` accepts it.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = bytes.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
    };
    if bytes.len() != 10 || bytes.get(4) != Some(&b'-') || bytes.get(7) != Some(&b'-') {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// Standard padded base64, non-empty (govalidator's `IsBase64`).
fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return false;
    }
    let (body, last) = bytes.split_at(bytes.len() - 4);
    body.iter().all(alphabet)
        && match last {
            [a, b, c, d] => {
                alphabet(a)
                    && alphabet(b)
                    && ((alphabet(c) && (alphabet(d) || *d == b'=')) || (*c == b'=' && *d == b'='))
            }
            _ => false,
        }
}

/// Loose RFC 5322 check: an optional `Name <addr>` wrapper around `local@domain`.
fn is_email(text: &str) -> bool {
    let address = match (text.rfind('<'), text.strip_suffix('>')) {
        (Some(start), Some(inner)) => inner.get(start + 1..).unwrap_or(""),
        _ => text,
    };
    match address.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !address.chars().any(|c| c.is_whitespace() || c.is_control())
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn is_hostname(text: &str) -> bool {
    regex_matches(&HOSTNAME, text)
        && text.len() <= 255
        && text.split('.').all(|label| label.len() <= 63)
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    let limit = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|n| n <= limit)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:...`/`xx-xx-...`, or groups `xxxx.xxxx...`.
fn is_mac(text: &str) -> bool {
    let hex_groups = |separator: char, width: usize, counts: [usize; 3]| {
        let groups: Vec<&str> = text.split(separator).collect();
        counts.contains(&groups.len())
            && groups
                .iter()
                .all(|g| g.len() == width && g.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    hex_groups(':', 2, [6, 8, 20])
        || hex_groups('-', 2, [6, 8, 20])
        || hex_groups('.', 4, [3, 4, 10])
}

/// Loose `url.ParseRequestURI`: an absolute URI (`scheme:...`) or an absolute path.
fn is_request_uri(text: &str) -> bool {
    if text.is_empty() || text.chars().any(|c| c.is_ascii_control()) {
        return false;
    }
    if text.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}
