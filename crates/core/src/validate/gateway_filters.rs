//! Checks of route filters' fields: CORS policies (HTTPRoute), mirrors' shares (HTTPRoute and
//! GRPCRoute), replacement paths of redirects and rewrites (HTTPRoute).

use super::push;
use crate::validate::common::{is_http_token, validate_header_name, validate_path};
use crate::validate::{FieldError, Verdict};

/// The fields of a `CORS` filter that can be wrong (a rule's and a backendRef's filters are
/// types of their own).
pub(super) struct CorsFields<'a> {
    pub(super) allow_origins: &'a [String],
    pub(super) allow_methods: &'a [String],
    pub(super) allow_headers: &'a [String],
    pub(super) expose_headers: &'a [String],
    pub(super) max_age: Option<i32>,
}

/// A `CORS` filter: origins as `*` or `<scheme>://<host>[:<port>]` (scheme `http` or `https`, a
/// host that may start with `*`), methods and header names as HTTP tokens or `*`, and a
/// `maxAge` of at least a second. Envoy gets the lists joined with commas, so a comma in a value
/// would split it: tokens have none.
pub(super) fn validate_cors(v: &mut Verdict, at: &str, c: CorsFields<'_>) {
    for (i, origin) in c.allow_origins.iter().enumerate() {
        if let Err(problem) = check_origin(origin) {
            v.error(FieldError::invalid(
                format!("{at}.allowOrigins[{i}]"),
                origin,
                format!(
                    "{problem}; write \"*\" or <scheme>://<host>[:<port>] with scheme http or https, such as \"https://app.example.com\" or \"https://*.example.com\""
                ),
            ));
        }
    }
    for (i, m) in c.allow_methods.iter().enumerate() {
        if !is_http_token(m) {
            v.error(FieldError::invalid(
                format!("{at}.allowMethods[{i}]"),
                m,
                "must be an HTTP method such as GET or PUT, or \"*\"",
            ));
        }
    }
    for (field, names) in [
        ("allowHeaders", c.allow_headers),
        ("exposeHeaders", c.expose_headers),
    ] {
        for (i, h) in names.iter().enumerate() {
            push(v, validate_header_name(&format!("{at}.{field}[{i}]"), h));
        }
    }
    if let Some(age) = c.max_age
        && age < 1
    {
        v.error(FieldError::spec(
            format!("{at}.maxAge"),
            format!("{age} must be at least 1 (seconds a browser keeps a preflight's answer)"),
        ));
    }
}

/// Whether `origin` is a CORS origin the Gateway API allows: `*`, or a scheme (`http`, `https`),
/// `://`, a host name that may start with `*`, and an optional port; the problem when not.
fn check_origin(origin: &str) -> Result<(), &'static str> {
    if origin == "*" {
        return Ok(());
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return Err("has no scheme");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err("has a scheme other than http and https");
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err("has a port that is not a number between 1 and 65535");
    }
    let name = host.strip_prefix('*').unwrap_or(host);
    let label_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
    if host.is_empty() || !name.bytes().all(label_char) || name.contains("..") {
        return Err(
            "has no host name, or one with characters other than letters, digits, '-' and '.' (and a leading '*')",
        );
    }
    Ok(())
}

/// A mirror's `percent` (0–100) or `fraction` (a numerator from 0 to its denominator, which is
/// above 0; 100 when unset), not both.
pub(super) fn validate_mirror_share(
    v: &mut Verdict,
    at: &str,
    percent: Option<i32>,
    fraction: Option<(i32, Option<i32>)>,
) {
    if percent.is_some() && fraction.is_some() {
        v.error(FieldError::spec(
            format!("{at}.fraction"),
            "set percent or fraction, not both",
        ));
    }
    if let Some(p) = percent
        && !(0..=100).contains(&p)
    {
        v.error(FieldError::spec(
            format!("{at}.percent"),
            format!("{p} must be between 0 and 100"),
        ));
    }
    if let Some((numerator, denominator)) = fraction {
        let denominator = denominator.unwrap_or(100);
        if denominator <= 0 {
            v.error(FieldError::spec(
                format!("{at}.fraction.denominator"),
                format!("{denominator} must be above 0"),
            ));
        } else if !(0..=denominator).contains(&numerator) {
            v.error(FieldError::spec(
                format!("{at}.fraction.numerator"),
                format!("{numerator} must be between 0 and the denominator, {denominator}"),
            ));
        }
    }
}

pub(super) fn validate_replacement_path(
    v: &mut Verdict,
    path: &str,
    full: Option<&str>,
    prefix: Option<&str>,
) {
    if let Some(p) = full {
        push(
            v,
            validate_path(format_args!("{path}.replaceFullPath"), p, true),
        );
    }
    if let Some(p) = prefix {
        push(
            v,
            validate_path(format_args!("{path}.replacePrefixMatch"), p, true),
        );
    }
}
