//! Field rules shared by every kind: host names, paths, header names and values, regular expressions,
//! object names, durations. Each returns a [`FieldError`] naming the field, the value and the fix.

use std::fmt;
use std::time::Duration;

use super::FieldError;

/// Longest regular expression accepted, in bytes.
pub const MAX_REGEX_LEN: usize = 1024;
/// Largest compiled program a regular expression may need (guards against exponential expansion).
pub const MAX_REGEX_PROGRAM: usize = 64 * 1024;
/// Most regular expressions one object may hold ([`check_regex`]).
pub const MAX_REGEXES_PER_OBJECT: usize = 512;

fn has_control(s: &str) -> bool {
    s.chars().any(|c| c.is_control())
}

/// A DNS host name as a virtual host (RFC 1123), optionally with a single leading `*` label when
/// `allow_wildcard`. Case is ignored (names are compared lowercased).
///
/// One pass over the bytes, allocating only for the error: every routing object's hosts are
/// checked again on each full build.
pub fn validate_hostname(
    path: impl fmt::Display,
    value: &str,
    allow_wildcard: bool,
) -> Result<(), FieldError> {
    let rest = match value.strip_prefix("*.") {
        Some(rest) if allow_wildcard => Some(rest),
        Some(_) => None,
        None => Some(value),
    };
    // Labels of letters, digits and '-' (which rules out control characters, ports, IPv6
    // addresses and a '*' anywhere but the leading label); an IPv4 address passes them, so it is
    // refused on its own.
    let ok = value.len() <= 253
        && rest.is_some_and(|rest| dns_labels(rest) && rest.parse::<std::net::Ipv4Addr>().is_err());
    if ok {
        return Ok(());
    }
    let fix = if allow_wildcard {
        "must be a DNS name like \"www.example.com\" or \"*.example.com\" (lowercase letters, digits, '-' and '.'; no port, no IP address)"
    } else {
        "must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)"
    };
    Err(FieldError::invalid(path.to_string(), value, fix))
}

/// Whether `s` is one or more '.'-separated labels of 1 to 63 ASCII letters, digits and '-',
/// none starting or ending with '-'.
fn dns_labels(s: &str) -> bool {
    let mut len = 0usize;
    let mut prev = b'.';
    for &b in s.as_bytes() {
        if b == b'.' {
            if len == 0 || prev == b'-' {
                return false;
            }
            len = 0;
        } else if b.is_ascii_alphanumeric() || (b == b'-' && len > 0) {
            len += 1;
            if len > 63 {
                return false;
            }
        } else {
            return false;
        }
        prev = b;
    }
    len > 0 && prev != b'-'
}

/// A URL path used as a match: starts with `/`, no whitespace or control characters, no query or
/// fragment, no `.`/`..` segments and (when `no_double_slash`) no `//`.
pub fn validate_path(
    path: impl fmt::Display,
    value: &str,
    no_double_slash: bool,
) -> Result<(), FieldError> {
    if value.len() <= 4096 && plain_path(value, no_double_slash) {
        return Ok(());
    }
    path_rules(path, value, no_double_slash)
}

/// The rules of [`validate_path`], one at a time, in the order their errors take precedence.
fn path_rules(
    path: impl fmt::Display,
    value: &str,
    no_double_slash: bool,
) -> Result<(), FieldError> {
    if !value.starts_with('/') {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must start with \"/\"",
        ));
    }
    if value.len() > 4096 {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must be at most 4096 characters",
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            format!("must not contain whitespace or control characters (found {c:?})"),
        ));
    }
    if let Some(c) = value.chars().find(|c| matches!(c, '?' | '#')) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            format!("must be a path only, without {c:?} (queries and fragments are not matched)"),
        ));
    }
    if no_double_slash && value.contains("//") {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must not contain consecutive \"/\" characters",
        ));
    }
    if value.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must not contain \".\" or \"..\" segments (request paths are normalized before matching)",
        ));
    }
    if !valid_percent_encoding(value) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "has a '%' not followed by two hex digits",
        ));
    }
    Ok(())
}

/// Whether `value` passes every rule of [`validate_path`] but the length, judged in one pass over
/// its bytes: it starts with '/' and holds only printable ASCII other than '?', '#' and '%', no
/// "." or ".." segment and (when `no_double_slash`) no "//". A path this says no to is checked
/// rule by rule, for the error (or passes them: '%' escapes and non-ASCII text are allowed).
fn plain_path(value: &str, no_double_slash: bool) -> bool {
    let bytes = value.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    // The current segment's length and how many of its bytes are '.'.
    let (mut len, mut dots) = (0usize, 0usize);
    let dot_segment = |len: usize, dots: usize| (len == 1 || len == 2) && dots == len;
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        if !b.is_ascii_graphic() || matches!(b, b'?' | b'#' | b'%') {
            return false;
        }
        if b == b'/' {
            if dot_segment(len, dots) || (no_double_slash && bytes[i - 1] == b'/') {
                return false;
            }
            (len, dots) = (0, 0);
        } else {
            len += 1;
            dots += usize::from(b == b'.');
        }
    }
    !dot_segment(len, dots)
}

fn valid_percent_encoding(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// Whether `value` is an RFC 9110 token of at most 256 bytes: what header names and methods are
/// (no `:`, no spaces, no commas).
pub fn is_http_token(value: &str) -> bool {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !value.is_empty() && value.len() <= 256 && value.bytes().all(token)
}

/// An HTTP header name (an RFC 9110 token); pseudo-headers such as `:path` are refused.
pub fn validate_header_name(path: &str, value: &str) -> Result<(), FieldError> {
    if !is_http_token(value) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)",
        ));
    }
    Ok(())
}

/// A header value to compare against: printable, no CR, LF or NUL, at most 4096 bytes.
pub fn validate_header_value(path: &str, value: &str) -> Result<(), FieldError> {
    if value.len() > 4096 {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must be at most 4096 bytes",
        ));
    }
    if has_control(value) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must not contain control characters such as newlines",
        ));
    }
    Ok(())
}

/// A regular expression with RE2 semantics (what Envoy runs): no backreferences or look-around, at
/// most [`MAX_REGEX_LEN`] bytes, a bounded compiled size, and nothing RE2 reads otherwise or
/// refuses ([`super::re2`]).
pub fn validate_regex(path: &str, value: &str) -> Result<(), FieldError> {
    // Envoy refuses an empty expression (a route configuration holding one is NACKed).
    if value.is_empty() {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must not be empty; write \"^$\" to match an empty value or \".*\" to match any",
        ));
    }
    if value.len() > MAX_REGEX_LEN {
        return Err(FieldError::spec(
            path,
            format!(
                "regular expression of {} bytes is longer than the {MAX_REGEX_LEN} bytes allowed",
                value.len()
            ),
        ));
    }
    if has_control(value) {
        return Err(FieldError::invalid(
            path.to_string(),
            value,
            "must not contain control characters",
        ));
    }
    // What RE2 refuses or reads otherwise first: its message is more precise than the size
    // limit's (`a{5000}` is both too big and past RE2's repetition limit).
    if let Some(problem) = super::re2::check(value) {
        return Err(FieldError::invalid(path.to_string(), value, problem));
    }
    match regex::RegexBuilder::new(value)
        .size_limit(MAX_REGEX_PROGRAM)
        .build()
    {
        Ok(_) => Ok(()),
        Err(regex::Error::CompiledTooBig(_)) => Err(FieldError::invalid(
            path.to_string(),
            value,
            "is too complex (its compiled form exceeds the size limit); simplify it",
        )),
        Err(e) => {
            let detail = e.to_string();
            let last = detail
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("syntax error");
            Err(FieldError::invalid(
                path.to_string(),
                value,
                format!("is not a valid RE2 regular expression ({last})"),
            ))
        }
    }
}

/// [`validate_regex`] into a verdict, with a warning when Envoy's byte-by-byte (Latin-1) reading
/// of the expression can differ from a Unicode one ([`super::re2::reads_non_ascii`]).
///
/// At most [`MAX_REGEXES_PER_OBJECT`] expressions of one object (one verdict) are checked: each
/// is compiled here and again by Envoy, so an object of a few megabytes of small expressions
/// would cost seconds of CPU at every admission and every build. The first one over the limit
/// gets an error naming its field and the limit; the rest are not compiled.
pub fn check_regex(v: &mut super::Verdict, path: &str, value: &str) {
    v.regexes.0 += 1;
    let n = v.regexes.0;
    if n > MAX_REGEXES_PER_OBJECT {
        if n == MAX_REGEXES_PER_OBJECT + 1 {
            v.error(FieldError::spec(
                path,
                format!(
                    "is regular expression number {n} of this object; an object may hold at \
                     most {MAX_REGEXES_PER_OBJECT} (each is compiled at admission and again by \
                     Envoy): match several values with one expression (\"a|b\") or split the \
                     object"
                ),
            ));
        }
        return;
    }
    match validate_regex(path, value) {
        Err(e) => v.error(e),
        Ok(()) if super::re2::reads_non_ascii(value) => v.warn(format!(
            "{path}: Envoy matches regular expressions byte by byte (Latin-1): \\p{{..}} classes match only characters up to \\xFF, and a non-ASCII character matches its UTF-8 bytes"
        )),
        Ok(()) => {}
    }
}

/// An RFC 1035 label, as Service names are: lowercase letters, digits and '-', starting with a letter.
pub fn validate_dns1035_label(
    path: impl fmt::Display,
    value: &str,
    what: &str,
) -> Result<(), FieldError> {
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !value.ends_with('-');
    FieldError::unless(
        ok,
        path,
        value,
        format_args!(
            "must be the name of a {what} in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters"
        ),
    )
}

/// An RFC 1123 label, as namespace names are.
pub fn validate_dns1123_label(
    path: impl fmt::Display,
    value: &str,
    what: &str,
) -> Result<(), FieldError> {
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !value.ends_with('-');
    FieldError::unless(
        ok,
        path,
        value,
        format_args!(
            "must be a valid {what} name: lowercase letters, digits and '-', at most 63 characters"
        ),
    )
}

/// An RFC 1123 subdomain, as most object names (Secrets, IngressRoutes) are.
pub fn validate_dns1123_subdomain(
    path: impl fmt::Display,
    value: &str,
    what: &str,
) -> Result<(), FieldError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    FieldError::unless(
        ok,
        path,
        value,
        format_args!(
            "must be a valid {what} name: lowercase letters, digits, '-' and '.', at most 253 characters"
        ),
    )
}

/// A label name, as label keys (after any prefix) and non-empty label values are: letters,
/// digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters.
pub fn validate_label_name(path: impl fmt::Display, value: &str) -> Result<(), FieldError> {
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    FieldError::unless(
        ok,
        path,
        value,
        "is not a label name: letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters",
    )
}

/// A timeout: a Go-style duration (`1s`, `150ms`, `1m30s`, `1.5s`) or `infinity` (no timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Timeout {
    Infinite,
    After(Duration),
}

/// Parses a Go-style duration: a sequence of decimal numbers with units ns, us, µs, ms, s, m, h.
pub fn parse_timeout(path: &str, value: &str) -> Result<Timeout, FieldError> {
    const FIX: &str = "must be a duration like \"1s\", \"150ms\", \"1m30s\" or \"infinity\"";
    if value == "infinity" || value == "infinite" {
        return Ok(Timeout::Infinite);
    }
    let mut rest = value;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return Err(FieldError::invalid(path.to_string(), value, FIX));
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let n: f64 = num
            .parse()
            .map_err(|_| FieldError::invalid(path.to_string(), value, FIX))?;
        let secs = match unit {
            "ns" => n / 1e9,
            "us" | "µs" => n / 1e6,
            "ms" => n / 1e3,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            _ => return Err(FieldError::invalid(path.to_string(), value, FIX)),
        };
        if !secs.is_finite() || secs > 365.0 * 24.0 * 3600.0 {
            return Err(FieldError::invalid(
                path.to_string(),
                value,
                "must be at most one year",
            ));
        }
        total += Duration::from_secs_f64(secs);
        rest = tail;
    }
    Ok(Timeout::After(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::quote;

    fn msg<T: std::fmt::Debug>(r: Result<T, FieldError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn an_object_holds_at_most_so_many_regular_expressions() {
        use crate::api::contour_v1::{IngressRoute, IngressRouteSpec};
        let routes: String = (0..=MAX_REGEXES_PER_OBJECT)
            .map(|i| format!("- match: {{path: /r{i}, headers: [{{header: x-a, regex: \"a{i}\"}}]}}\n  services: [{{http: app, port: 80}}]\n"))
            .collect();
        let spec: IngressRouteSpec = serde_norway::from_str(&format!("routes:\n{routes}")).unwrap();
        let v = super::super::validate_object(&crate::store::AnyObject::IngressRouteV1(
            std::sync::Arc::new(IngressRoute::new("ir", spec)),
        ));
        let errors: Vec<String> = v.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errors,
            [format!(
                "spec.routes[{MAX_REGEXES_PER_OBJECT}].match.headers[0].regex: is regular expression number 513 of this object; an object may hold at most 512 (each is compiled at admission and again by Envoy): match several values with one expression (\"a|b\") or split the object"
            )]
        );
        // The count is bookkeeping: a verdict compares by its errors and warnings.
        let mut fewer = super::super::Verdict::default();
        check_regex(&mut fewer, "p", "a");
        assert_eq!(fewer, super::super::Verdict::default());
    }

    #[test]
    fn hostnames() {
        assert!(validate_hostname("h", "www.example.com", false).is_ok());
        assert!(validate_hostname("h", "WWW.Example.COM", false).is_ok());
        assert!(validate_hostname("h", "*.example.com", true).is_ok());
        assert_eq!(
            msg(validate_hostname("h", "*.example.com", false)),
            "h: \"*.example.com\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)"
        );
        assert!(validate_hostname("h", "*", true).is_err());
        assert!(validate_hostname("h", "a.*.com", true).is_err());
        assert!(validate_hostname("h", "foo.com:80", true).is_err());
        assert!(validate_hostname("h", "10.0.0.1", true).is_err());
        assert!(validate_hostname("h", "foo\n.com", true).is_err());
        assert!(validate_hostname("h", "-foo.com", true).is_err());
        assert!(validate_hostname("h", "", true).is_err());
    }

    #[test]
    fn paths() {
        assert!(validate_path("p", "/", true).is_ok());
        assert!(validate_path("p", "/foo/bar%20x", true).is_ok());
        assert_eq!(
            msg(validate_path("spec.routes[2].match", "finance", true)),
            "spec.routes[2].match: \"finance\" must start with \"/\""
        );
        assert_eq!(
            msg(validate_path("p", "/a//b", true)),
            "p: \"/a//b\" must not contain consecutive \"/\" characters"
        );
        assert!(validate_path("p", "/a//b", false).is_ok());
        assert_eq!(
            msg(validate_path("p", "/a\nb", true)),
            "p: \"/a\\nb\" must not contain whitespace or control characters (found '\\n')"
        );
        assert!(msg(validate_path("p", "/a?b=1", true)).contains("without '?'"));
        assert!(msg(validate_path("p", "/a/../b", true)).contains("\"..\" segments"));
        assert!(msg(validate_path("p", "/a%zz", true)).contains("'%' not followed"));
        assert!(validate_path("p", "/a%", true).is_err());
    }

    /// Every string of up to `max` characters from `alphabet`.
    fn strings(alphabet: &[char], max: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    /// The host name rules as first written (lowercase, then label by label), against which the
    /// one-pass check is held.
    fn hostname_as_written(value: &str, allow_wildcard: bool) -> bool {
        if value.is_empty() || value.len() > 253 || value.chars().any(char::is_control) {
            return false;
        }
        let lower = value.to_ascii_lowercase();
        let rest = match lower.strip_prefix("*.") {
            Some(rest) if allow_wildcard => rest,
            Some(_) => return false,
            None => lower.as_str(),
        };
        rest.parse::<std::net::IpAddr>().is_err()
            && rest.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    }

    #[test]
    fn hostnames_in_one_pass_as_written() {
        let alphabet = ['a', 'Z', '1', '-', '.', '*', ':', '\n', 'é'];
        let mut corpus = strings(&alphabet, 5);
        corpus.extend(["1.2.3.4", "*.1.2.3.4", "1.2.3.4.5", "::1", "[::1]"].map(String::from));
        corpus.extend(["a".repeat(63), "a".repeat(64)]);
        corpus.extend([125, 126].map(|n| format!("{}.com", vec!["a"; n].join("."))));
        let mut accepted = 0;
        for value in &corpus {
            for wildcard in [false, true] {
                let ok = validate_hostname("h", value, wildcard).is_ok();
                assert_eq!(
                    ok,
                    hostname_as_written(value, wildcard),
                    "{value:?} {wildcard}"
                );
                accepted += usize::from(ok);
            }
        }
        assert!(accepted > 1000, "the corpus holds valid names too");
    }

    #[test]
    fn paths_in_one_pass_as_rule_by_rule() {
        let alphabet = ['/', '.', 'a', '%', '2', '?', '#', ' ', 'é'];
        let mut fast = 0;
        for value in strings(&alphabet, 5) {
            for no_double_slash in [false, true] {
                assert_eq!(
                    validate_path("p", &value, no_double_slash),
                    path_rules("p", &value, no_double_slash),
                    "{value:?} {no_double_slash}"
                );
                if plain_path(&value, no_double_slash) {
                    fast += 1;
                    assert!(path_rules("p", &value, no_double_slash).is_ok());
                }
            }
        }
        assert!(fast > 100, "the corpus holds plain paths too");
        let long = format!("/{}", "a".repeat(4096));
        assert!(plain_path(&long, true));
        assert!(msg(validate_path("p", &long, true)).contains("at most 4096"));
    }

    #[test]
    fn header_names_and_values() {
        assert!(validate_header_name("h", "x-header").is_ok());
        assert!(msg(validate_header_name("h", ":path")).contains("must be an HTTP header name"));
        assert!(validate_header_name("h", "x header").is_err());
        assert!(validate_header_value("v", "a;b {} \"q\" %ENV(X)%").is_ok());
        assert_eq!(
            msg(validate_header_value("v", "a\r\nb")),
            "v: \"a\\r\\nb\" must not contain control characters such as newlines"
        );
    }

    #[test]
    fn regexes() {
        assert!(validate_regex("r", ".*Chrome.*").is_ok());
        assert_eq!(
            msg(validate_regex("r", "")),
            "r: \"\" must not be empty; write \"^$\" to match an empty value or \".*\" to match any"
        );
        assert!(
            msg(validate_regex("r", "(a"))
                .starts_with("r: \"(a\" is not a valid RE2 regular expression")
        );
        assert!(msg(validate_regex("r", "(a)\\1")).contains("not a valid RE2"));
        assert!(msg(validate_regex("r", "(?=a)")).contains("not a valid RE2"));
        let long = "a".repeat(100_000);
        assert_eq!(
            msg(validate_regex("r", &long)),
            "r: regular expression of 100000 bytes is longer than the 1024 bytes allowed"
        );
        assert!(msg(validate_regex("r", r"\pL{100}")).contains("too complex"));
        assert!(msg(validate_regex("r", "((a{100}){100}){100}")).contains("multiply"));
        // Valid for Rust's regex crate, refused by Envoy's RE2.
        assert_eq!(
            msg(validate_regex("r", "a{1001}")),
            "r: \"a{1001}\" repeats 1001 times; RE2 (Envoy's regex engine) allows at most 1000: use a smaller count, or `+` or `*`"
        );
        assert!(msg(validate_regex("r", "(?x) a")).contains("flag `x`"));
    }

    #[test]
    fn names() {
        assert!(validate_dns1035_label("s", "kuard-2", "Service").is_ok());
        assert!(
            msg(validate_dns1035_label("s", "other/kuard", "Service"))
                .contains("in the same namespace")
        );
        assert!(validate_dns1035_label("s", "2kuard", "Service").is_err());
        assert!(validate_dns1123_label("n", "team-a", "namespace").is_ok());
        assert!(validate_dns1123_label("n", "Team", "namespace").is_err());
        assert!(validate_dns1123_subdomain("n", "a.b-c", "Secret").is_ok());
        assert!(validate_dns1123_subdomain("n", "a/b", "Secret").is_err());
    }

    #[test]
    fn timeouts() {
        assert_eq!(
            parse_timeout("t", "1s").unwrap(),
            Timeout::After(Duration::from_secs(1))
        );
        assert_eq!(
            parse_timeout("t", "150ms").unwrap(),
            Timeout::After(Duration::from_millis(150))
        );
        assert_eq!(
            parse_timeout("t", "1m30s").unwrap(),
            Timeout::After(Duration::from_secs(90))
        );
        assert_eq!(
            parse_timeout("t", "1.5s").unwrap(),
            Timeout::After(Duration::from_millis(1500))
        );
        assert_eq!(parse_timeout("t", "infinity").unwrap(), Timeout::Infinite);
        assert_eq!(
            msg(parse_timeout("t", "10 seconds")),
            "t: \"10 seconds\" must be a duration like \"1s\", \"150ms\", \"1m30s\" or \"infinity\""
        );
        assert!(parse_timeout("t", "").is_err());
        assert!(parse_timeout("t", "5").is_err());
        assert!(parse_timeout("t", "99999999h").is_err());
    }

    #[test]
    fn quoting_cuts_and_escapes() {
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
        let q = quote(&"x".repeat(200));
        assert!(q.ends_with("(200 characters)"));
    }
}
