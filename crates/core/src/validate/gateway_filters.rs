//! Checks of route filters' fields: header modifiers and mirrors (HTTPRoute and GRPCRoute), CORS
//! policies, redirects and rewrites (HTTPRoute). Filters of every route kind, a rule's and a
//! backendRef's, are read as the one [`Filter`] type of [`crate::api::gateway_route`].

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::{push, validate_port};
use crate::api::gateway_route::{self as shared, Filter};
use crate::validate::common::{
    is_http_token, validate_header_name, validate_header_value, validate_hostname, validate_path,
};
use crate::validate::{FieldError, Verdict};

/// Checks one filter, `path` naming it; `of_rule`: a rule's (not a backendRef's), whose `CORS`
/// filter must carry its policy.
pub(super) fn validate_filter(v: &mut Verdict, path: &str, f: &Filter, of_rule: bool) {
    if let Some(m) = &f.request_header_modifier {
        validate_header_modifier(v, &format!("{path}.requestHeaderModifier"), m);
    }
    if let Some(m) = &f.response_header_modifier {
        validate_header_modifier(v, &format!("{path}.responseHeaderModifier"), m);
    }
    if let Some(r) = &f.request_redirect {
        validate_redirect(v, &format!("{path}.requestRedirect"), r);
    }
    if let Some(r) = &f.url_rewrite {
        let at = format!("{path}.urlRewrite");
        if let Some(h) = &r.hostname {
            push(
                v,
                validate_hostname(format_args!("{at}.hostname"), h, false),
            );
        }
        if let Some(p) = &r.path {
            validate_replacement_path(v, &format!("{at}.path"), p);
        }
    }
    if let Some(c) = &f.cors {
        validate_cors(v, &format!("{path}.cors"), c);
    }
    if let Some(m) = &f.request_mirror {
        let at = format!("{path}.requestMirror");
        if let Some(port) = m.backend_ref.port {
            validate_port(v, &format!("{at}.backendRef.port"), port);
        }
        let fraction = m.fraction.as_ref().map(|f| (f.numerator, f.denominator));
        validate_mirror_share(v, &at, m.percent, fraction);
    }
    if of_rule && f.type_ == shared::CORS && f.cors.is_none() {
        v.error(FieldError::spec(
            format!("{path}.cors"),
            "is required for a CORS filter: set allowOrigins and the other fields of the policy",
        ));
    }
}

/// A redirect (`at` naming it): its hostname, path, port and status code.
fn validate_redirect(v: &mut Verdict, at: &str, r: &shared::Redirect) {
    if let Some(h) = &r.hostname {
        push(
            v,
            validate_hostname(format_args!("{at}.hostname"), h, false),
        );
    }
    if let Some(p) = &r.path {
        validate_replacement_path(v, &format!("{at}.path"), p);
    }
    if let Some(port) = r.port {
        validate_port(v, &format!("{at}.port"), port);
    }
    if let Some(code) = r.status_code
        && ![301, 302, 303, 307, 308].contains(&code)
    {
        v.error(FieldError::spec(
            format!("{at}.statusCode"),
            format!("{code} must be one of 301, 302, 303, 307, 308"),
        ));
    }
}

/// A header modifier: names are header names, values carry no control characters, and no header
/// is set (or added, or removed) twice under names that differ only in case.
fn validate_header_modifier(v: &mut Verdict, path: &str, m: &shared::HeaderModifier) {
    for (list, entries) in [("set", &m.set), ("add", &m.add)] {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (k, shared::Header { name, value }) in entries.iter().enumerate() {
            let at = format!("{path}.{list}[{k}]");
            push(v, validate_header_name(&format!("{at}.name"), name));
            push(v, validate_header_value(&format!("{at}.value"), value));
            if let Some(first) = first_of(&mut seen, name, k) {
                v.error(FieldError::invalid(
                    format!("{at}.name"),
                    name,
                    format!(
                        "names the same header as {list}[{first}] (header names are case-insensitive)"
                    ),
                ));
            }
        }
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (k, name) in m.remove.iter().enumerate() {
        let at = format!("{path}.remove[{k}]");
        push(v, validate_header_name(&at, name));
        if let Some(first) = first_of(&mut seen, name, k) {
            v.error(FieldError::invalid(
                at,
                name,
                format!(
                    "names the same header as remove[{first}] (header names are case-insensitive)"
                ),
            ));
        }
    }
}

/// The index of the earlier entry of `seen` naming header `name` (case-insensitively), if any;
/// otherwise `name` joins `seen` as entry `k`.
fn first_of(seen: &mut HashMap<String, usize>, name: &str, k: usize) -> Option<usize> {
    match seen.entry(name.to_ascii_lowercase()) {
        Entry::Occupied(first) => Some(*first.get()),
        Entry::Vacant(slot) => {
            slot.insert(k);
            None
        }
    }
}

/// A `CORS` filter: origins as `*` or `<scheme>://<host>[:<port>]` (scheme `http` or `https`, a
/// host that may start with `*`), methods and header names as HTTP tokens or `*`, and a
/// `maxAge` of at least a second. Envoy gets the lists joined with commas, so a comma in a value
/// would split it: tokens have none.
fn validate_cors(v: &mut Verdict, at: &str, c: &shared::Cors) {
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
        ("allowHeaders", &c.allow_headers),
        ("exposeHeaders", &c.expose_headers),
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
fn validate_mirror_share(
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

/// A redirect's or a rewrite's path: `replaceFullPath` and `replacePrefixMatch` are paths.
fn validate_replacement_path(v: &mut Verdict, path: &str, p: &shared::ReplacementPath) {
    if let Some(p) = &p.replace_full_path {
        push(
            v,
            validate_path(format_args!("{path}.replaceFullPath"), p, true),
        );
    }
    if let Some(p) = &p.replace_prefix_match {
        push(
            v,
            validate_path(format_args!("{path}.replacePrefixMatch"), p, true),
        );
    }
}
