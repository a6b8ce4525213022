//! The rules of an HTTPRoute: what it shares with GRPCRoute ([`super::routes::validate_route`]),
//! its matches (paths, headers, query parameters, RE2 regexes), the filters only it has
//! (redirects, rewrites, CORS policies), its timeouts and its retries.

use std::str::FromStr;

use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesMatches, HttpRouteRulesMatchesHeadersType,
    HttpRouteRulesMatchesPathType, HttpRouteRulesMatchesQueryParamsType, HttpRouteRulesRetry,
    HttpRouteRulesTimeouts,
};

use super::push;
use super::routes::{KindChecks, read_spec, validate_header_match, validate_route};
use crate::api::gateway_route::RouteSpec;
use crate::validate::common::{check_regex, validate_header_value, validate_path};
use crate::validate::{FieldError, Verdict, quote};

/// Host names, match syntax (paths, headers, query parameters, RE2 regexes), filters, backends and
/// timeouts of an HTTPRoute.
pub fn validate_http_route(r: &HttpRoute) -> Verdict {
    let mut v = Verdict::default();
    let spec = read_spec(&mut v, &r.spec);
    validate_http_route_with(v, r, &spec)
}

/// [`validate_http_route`] of the route's shared fields read already (`v` holds what reading
/// them found).
pub fn validate_http_route_with(v: Verdict, r: &HttpRoute, spec: &RouteSpec) -> Verdict {
    validate_route(v, spec, &Rules(r.spec.rules.as_deref().unwrap_or_default()))
}

/// An HTTPRoute's rules, for the checks of what only HTTPRoute has.
struct Rules<'a>(&'a [HttpRouteRules]);

impl KindChecks for Rules<'_> {
    fn matches(&self, v: &mut Verdict, i: usize, base: &str) {
        let matches = self.0.get(i).and_then(|r| r.matches.as_deref());
        for (j, m) in matches.unwrap_or_default().iter().enumerate() {
            validate_match(v, &format!("{base}.matches[{j}]"), m);
        }
    }

    fn rest(&self, v: &mut Verdict, i: usize, base: &str) {
        let Some(rule) = self.0.get(i) else { return };
        if let Some(t) = &rule.timeouts {
            validate_timeouts(v, base, t);
        }
        if let Some(r) = &rule.retry {
            validate_retry(v, base, r);
        }
    }
}

/// One match (`at` names it): its path, headers and query parameters.
fn validate_match(v: &mut Verdict, at: &str, m: &HttpRouteRulesMatches) {
    if let Some(p) = &m.path {
        let value = p.value.as_deref().unwrap_or("/");
        let vpath = format!("{at}.path.value");
        match p
            .r#type
            .clone()
            .unwrap_or(HttpRouteRulesMatchesPathType::PathPrefix)
        {
            HttpRouteRulesMatchesPathType::RegularExpression => check_regex(v, &vpath, value),
            HttpRouteRulesMatchesPathType::Exact | HttpRouteRulesMatchesPathType::PathPrefix => {
                push(v, validate_path(&vpath, value, true))
            }
        }
    }
    for (k, h) in m.headers.iter().flatten().enumerate() {
        let regex = matches!(
            h.r#type,
            Some(HttpRouteRulesMatchesHeadersType::RegularExpression)
        );
        validate_header_match(v, &format!("{at}.headers[{k}]"), &h.name, &h.value, regex);
    }
    for (k, q) in m.query_params.iter().flatten().enumerate() {
        let qat = format!("{at}.queryParams[{k}]");
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if q.name.is_empty() || q.name.len() > 256 || !q.name.bytes().all(token) {
            v.error(FieldError::invalid(
                format!("{qat}.name"),
                &q.name,
                "must be a query parameter name (letters, digits and !#$%&'*+-.^_`|~)",
            ));
        }
        let vat = format!("{qat}.value");
        match q.r#type {
            Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) => {
                check_regex(v, &vat, &q.value)
            }
            _ => push(v, validate_header_value(&vat, &q.value)),
        }
    }
}

/// `timeouts.request` and `timeouts.backendRequest` are durations, the second no longer than
/// the first.
fn validate_timeouts(v: &mut Verdict, base: &str, t: &HttpRouteRulesTimeouts) {
    let request = t
        .request
        .as_deref()
        .and_then(|d| validate_duration(v, &format!("{base}.timeouts.request"), d));
    let backend = t
        .backend_request
        .as_deref()
        .and_then(|d| validate_duration(v, &format!("{base}.timeouts.backendRequest"), d));
    if let (Some(req), Some(be)) = (request, backend) {
        // Zero means no timeout: a request with none takes any backendRequest, and a
        // backendRequest of none leaves the request's alone to bound it (as the
        // Gateway API's own schema rule reads them).
        if !req.is_zero() && be > req {
            v.error(FieldError::spec(
                format!("{base}.timeouts.backendRequest"),
                format!(
                    "{} must not be longer than timeouts.request ({})",
                    quote(t.backend_request.as_deref().unwrap_or("")),
                    quote(t.request.as_deref().unwrap_or(""))
                ),
            ));
        }
    }
}

/// `retry`: a backoff duration, 0 to 100 attempts, HTTP error status codes.
fn validate_retry(v: &mut Verdict, base: &str, r: &HttpRouteRulesRetry) {
    if let Some(b) = r.backoff.as_deref() {
        validate_duration(v, &format!("{base}.retry.backoff"), b);
    }
    if let Some(a) = r.attempts.filter(|a| !(0..=100).contains(a)) {
        v.error(FieldError::spec(
            format!("{base}.retry.attempts"),
            format!("{a} is not a number of retries from 0 to 100"),
        ));
    }
    for (k, c) in r.codes.iter().flatten().enumerate() {
        if !(400..=599).contains(c) {
            v.error(FieldError::spec(
                format!("{base}.retry.codes[{k}]"),
                format!("{c} is not an HTTP error status code (400 to 599)"),
            ));
        }
    }
}

/// A Gateway API duration; None (and an error) when `value` is not one.
fn validate_duration(v: &mut Verdict, path: &str, value: &str) -> Option<std::time::Duration> {
    match gateway_api::Duration::from_str(value) {
        Ok(d) => Some(std::time::Duration::from_nanos(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        )),
        Err(_) => {
            v.error(FieldError::invalid(
                path,
                value,
                "must be a duration like \"10s\", \"500ms\" or \"1h30m\" (units h, m, s, ms; at most 5 digits per unit)",
            ));
            None
        }
    }
}
