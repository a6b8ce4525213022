//! Single-object rules of IngressRoute `contour.heptio.com/v1beta1` and `projectcontour.io/v1`.
//!
//! The same functions serve the webhook, `sluice validate` and `dag::build` (which also uses the
//! conversions here: the deprecated v1beta1 `service` field, v1 header conditions, match identity).

use std::fmt;

use hashbrown::HashMap;
use serde_json::Value;

use super::common::{
    check_regex, parse_timeout, validate_dns1035_label, validate_dns1123_label,
    validate_dns1123_subdomain, validate_header_name, validate_header_value, validate_hostname,
    validate_path,
};
use super::{FieldError, Verdict, quote};
use crate::api::contour_v1::{self, HeaderCondition, MatchConditions};
use crate::api::heptio_v1beta1::{self, Service, VirtualHost};
use crate::api::status::reason;
use crate::api::{Delegate, HealthCheck};
use crate::route_match::{HeaderMatch, HeaderOp, PathMatch};
use backend::{validate_tcp_route, validate_v1_backends};

/// Largest relative weight of one service or backend.
pub const MAX_WEIGHT: u32 = 1_000_000;
/// Most services one route may name (`services`, `backends`, `upstreams`), as the CRD schemas
/// say; checked here too, for manifests no API server has seen. With the largest weight, their
/// sum stays far below the 32-bit total Envoy adds a route's weights in (past it Envoy refuses
/// the route configuration).
pub const MAX_SERVICES_PER_ROUTE: usize = 128;

/// A route's list of services is at most [`MAX_SERVICES_PER_ROUTE`] long.
pub(super) fn check_service_count(v: &mut Verdict, path: impl fmt::Display, count: usize) {
    if count > MAX_SERVICES_PER_ROUTE {
        v.error(FieldError::spec(
            path.to_string(),
            format!(
                "holds {count} services; a route may name at most {MAX_SERVICES_PER_ROUTE} (list each Service once, with its weight)"
            ),
        ));
    }
}

/// Records the error of a rule that failed.
fn check(v: &mut Verdict, r: Result<(), FieldError>) {
    if let Err(e) = r {
        v.error(e);
    }
}

// ---- rules shared by every sluice CRD (also used by the Route v1alpha1 rules) ----

/// A Service port number.
pub(crate) fn validate_port(path: impl fmt::Display, port: i32) -> Result<(), FieldError> {
    if (1..=65535).contains(&port) {
        Ok(())
    } else {
        Err(FieldError::spec(
            path.to_string(),
            format!("{port} must be a port number between 1 and 65535"),
        ))
    }
}

/// An active health check: a probe path, a DNS Host header, positive intervals and thresholds.
pub(crate) fn validate_health_check(v: &mut Verdict, path: &str, h: &HealthCheck) {
    check(
        v,
        validate_path(format_args!("{path}.path"), &h.path, false),
    );
    if let Some(host) = &h.host {
        check(
            v,
            validate_hostname(format_args!("{path}.host"), host, false),
        );
    }
    for (field, value) in [
        ("intervalSeconds", h.interval_seconds),
        ("timeoutSeconds", h.timeout_seconds),
    ] {
        if let Some(s) = value.filter(|s| !(1..=86400).contains(s)) {
            v.error(FieldError::spec(
                format!("{path}.{field}"),
                format!("{s} must be between 1 and 86400 seconds"),
            ));
        }
    }
    for (field, value) in [
        ("unhealthyThresholdCount", h.unhealthy_threshold_count),
        ("healthyThresholdCount", h.healthy_threshold_count),
    ] {
        if let Some(n) = value.filter(|n| !(1..=1000).contains(n)) {
            v.error(FieldError::spec(
                format!("{path}.{field}"),
                format!("{n} must be between 1 and 1000"),
            ));
        }
    }
}

/// The virtual host of a root: a DNS name without wildcard, a TLS Secret in the object's namespace.
fn validate_virtualhost(v: &mut Verdict, vh: &VirtualHost) {
    check(
        v,
        validate_hostname("spec.virtualhost.fqdn", &vh.fqdn, false),
    );
    if let Some(tls) = &vh.tls {
        let path = "spec.virtualhost.tls.secretName";
        if tls.secret_name.contains('/') {
            v.error(FieldError::invalid(
                path,
                &tls.secret_name,
                "must name a Secret in the IngressRoute's own namespace",
            ));
        } else {
            check(
                v,
                validate_dns1123_subdomain(path, &tls.secret_name, "Secret"),
            );
        }
    }
}

/// A delegation's own rules, and one visible in the object alone: a delegation to itself is a
/// cycle (`meta` is the delegating object's).
fn validate_delegate(
    v: &mut Verdict,
    path: impl fmt::Display + Copy,
    d: &Delegate,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) {
    let own_ns = meta.namespace.as_deref().unwrap_or_default();
    let target_ns = d
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(own_ns);
    if meta.name.as_deref() == Some(d.name.as_str()) && target_ns == own_ns {
        v.error(FieldError::new(
            format!("{path}.name"),
            reason::DELEGATION_CYCLE,
            format!(
                "{} delegates to this IngressRoute itself, a delegation cycle; delegate to another IngressRoute, or route to services",
                quote(&d.name)
            ),
        ));
    }
    let name_path = format_args!("{path}.name");
    if validate_dns1123_subdomain(name_path, &d.name, "IngressRoute").is_err() {
        v.error(FieldError::invalid(
            name_path.to_string(),
            &d.name,
            "must be an IngressRoute name: lowercase letters, digits, '-' and '.', at most 253 characters",
        ));
    }
    if let Some(ns) = &d.namespace {
        check(
            v,
            validate_dns1123_label(format_args!("{path}.namespace"), ns, "namespace"),
        );
    }
}

fn validate_weight(v: &mut Verdict, path: impl fmt::Display, weight: Option<u32>) {
    if let Some(w) = weight.filter(|w| *w > MAX_WEIGHT) {
        v.error(FieldError::spec(
            format!("{path}.weight"),
            format!("{w} must be at most {MAX_WEIGHT}"),
        ));
    }
}

// ---- contour.heptio.com/v1beta1 ----

const SERVICE_KEYS: [&str; 5] = ["name", "port", "weight", "strategy", "healthCheck"];

/// The services of a v1beta1 route with their field paths: `services` as written, or the deprecated
/// `service` (one service object, or a list of them). Problems decoding `service` are returned
/// beside whatever could be decoded.
pub fn v1beta1_services(
    route: &heptio_v1beta1::Route,
    index: usize,
) -> (Vec<(String, Service)>, Vec<FieldError>) {
    let mut out: Vec<(String, Service)> = route
        .services
        .iter()
        .enumerate()
        .map(|(j, s)| (format!("spec.routes[{index}].services[{j}]"), s.clone()))
        .collect();
    let mut errors = Vec::new();
    let base = || format!("spec.routes[{index}].service");
    match &route.service {
        None => {}
        Some(Value::Array(items)) => {
            for (j, item) in items.iter().enumerate() {
                let path = format!("{}[{j}]", base());
                match decode_service(&path, item) {
                    Ok(s) => out.push((path, s)),
                    Err(e) => errors.push(e),
                }
            }
        }
        Some(item @ Value::Object(_)) => match decode_service(&base(), item) {
            Ok(s) => out.push((base(), s)),
            Err(e) => errors.push(e),
        },
        Some(_) => errors.push(FieldError::spec(
            base(),
            "must be a service ({name, port}) or a list of services",
        )),
    }
    (out, errors)
}

fn decode_service(path: &str, value: &Value) -> Result<Service, FieldError> {
    let Value::Object(map) = value else {
        return Err(FieldError::spec(
            path,
            "must be a service object with name and port",
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !SERVICE_KEYS.contains(&k.as_str())) {
        return Err(FieldError::spec(
            format!("{path}.{unknown}"),
            "is not a field of a service; a service has name, port, weight, strategy and healthCheck",
        ));
    }
    serde_path_to_error::deserialize::<_, Service>(value.clone()).map_err(|e| {
        let field = e.path().to_string();
        let at = if field == "." || field.is_empty() {
            path.to_string()
        } else {
            format!("{path}.{field}")
        };
        FieldError::spec(at, e.into_inner().to_string())
    })
}

fn validate_v1beta1_service(v: &mut Verdict, path: impl fmt::Display + Copy, s: &Service) {
    check(
        v,
        validate_dns1035_label(format_args!("{path}.name"), &s.name, "Service"),
    );
    check(v, validate_port(format_args!("{path}.port"), s.port));
    validate_weight(v, path, s.weight);
    if let Some(h) = &s.health_check {
        validate_health_check(v, &format!("{path}.healthCheck"), h);
    }
}

/// The single-object rules of an IngressRoute `contour.heptio.com/v1beta1`.
pub fn validate_v1beta1(o: &heptio_v1beta1::IngressRoute) -> Verdict {
    let mut v = Verdict::default();
    let spec = &o.spec;
    validate_spec_head(
        &mut v,
        spec.virtualhost.as_ref(),
        spec.health_check.as_ref(),
        spec.routes.len(),
    );
    // By the prefix each match stands for (`PathMatch::prefix`: without trailing slashes); a
    // single route has nothing to repeat.
    let several = spec.routes.len() > 1;
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, r) in spec.routes.iter().enumerate() {
        validate_v1beta1_match(&mut v, i, r, several.then_some(&mut seen));
        validate_v1beta1_targets(&mut v, i, r, &o.metadata);
    }
    v
}

/// What both versions check before their routes: the virtual host, the default health check and
/// that there is at least one route.
fn validate_spec_head(
    v: &mut Verdict,
    vh: Option<&VirtualHost>,
    health_check: Option<&HealthCheck>,
    route_count: usize,
) {
    if let Some(vh) = vh {
        validate_virtualhost(v, vh);
    }
    if let Some(h) = health_check {
        validate_health_check(v, "spec.healthCheck", h);
    }
    if route_count == 0 {
        v.error(FieldError::spec(
            "spec.routes",
            "must hold at least one route",
        ));
    }
}

/// A v1beta1 route's `match`: a valid path prefix, and (when `seen` is given, the routes of an
/// object with several) not the prefix of an earlier route.
fn validate_v1beta1_match<'a>(
    v: &mut Verdict,
    i: usize,
    r: &'a heptio_v1beta1::Route,
    seen: Option<&mut HashMap<&'a str, usize>>,
) {
    let at = RouteAt(i);
    match validate_path(format_args!("{at}.match"), &r.match_, true) {
        Err(e) => v.error(e),
        Ok(()) => {
            let prefix = match r.match_.trim_end_matches('/') {
                "" => "/",
                trimmed => trimmed,
            };
            if let Some(seen) = seen
                && let Some(first) = seen.insert(prefix, i)
            {
                v.error(FieldError::invalid(
                    format!("{at}.match"),
                    &r.match_,
                    format!("is the same match as spec.routes[{first}]; a match may appear once per IngressRoute"),
                ));
            }
        }
    }
}

/// Where a v1beta1 route sends its requests: `services` or the deprecated `service` (warned
/// about, never both), or a delegate, exactly one of the two; then each service and the delegate.
fn validate_v1beta1_targets(
    v: &mut Verdict,
    i: usize,
    r: &heptio_v1beta1::Route,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) {
    let at = RouteAt(i);
    let has_service = r.service.is_some();
    if has_service {
        v.warn(format!("{at}.service is deprecated; use services"));
    }
    if has_service && !r.services.is_empty() {
        v.error(FieldError::spec(
            at.to_string(),
            "has both service and services; use services only",
        ));
    }
    // The deprecated `service` field, decoded (the `services` list is checked as written).
    let deprecated = if has_service {
        let (services, errors) = v1beta1_services(r, i);
        v.errors.extend(errors);
        services
    } else {
        Vec::new()
    };
    check_service_count(v, format_args!("{at}.services"), r.services.len());
    check_service_count(v, format_args!("{at}.service"), deprecated.len());
    let has_services = has_service || !r.services.is_empty();
    match (&r.delegate, has_services) {
        (None, false) => v.error(FieldError::spec(
            at.to_string(),
            "must have services or a delegate",
        )),
        (Some(_), true) => v.error(FieldError::spec(
            at.to_string(),
            "must have services or a delegate, not both",
        )),
        _ => {}
    }
    for (j, s) in r.services.iter().enumerate() {
        validate_v1beta1_service(v, format_args!("{at}.services[{j}]"), s);
    }
    for (path, s) in deprecated.iter().skip(r.services.len()) {
        validate_v1beta1_service(v, path.as_str(), s);
    }
    if let Some(d) = &r.delegate {
        validate_delegate(v, format_args!("{at}.delegate"), d, meta);
    }
}

/// `spec.routes[i]`, written out only where a message needs it.
#[derive(Clone, Copy)]
struct RouteAt(usize);

impl fmt::Display for RouteAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "spec.routes[{}]", self.0)
    }
}

// ---- projectcontour.io/v1 ----

/// The path a v1 route matches: its `match.path` as a segment-wise prefix, `/` when absent.
pub fn v1_path_match(m: Option<&MatchConditions>) -> PathMatch {
    match m.and_then(|m| m.path.as_deref()) {
        Some(p) => PathMatch::prefix(p),
        None => PathMatch::prefix("/"),
    }
}

/// A header condition as the routing model's match: `value`/`exact` → Exact, `present: false` →
/// Absent, `cookie` → `cookie` Contains, `userAgent` → `user-agent` Contains. None when the condition
/// breaks the one-name-one-operator rule (see [`validate_v1`]).
pub fn v1_header_match(c: &HeaderCondition) -> Option<HeaderMatch> {
    match (&c.header, &c.cookie, &c.user_agent) {
        (Some(name), None, None) => {
            let ops = header_ops(c);
            let [op] = ops.as_slice() else {
                return None;
            };
            Some(HeaderMatch {
                name: name.to_ascii_lowercase(),
                op: op.1.clone(),
            })
        }
        (None, Some(cookie), None) if header_ops(c).is_empty() => Some(HeaderMatch {
            name: "cookie".into(),
            op: HeaderOp::Contains(cookie.clone()),
        }),
        (None, None, Some(ua)) if header_ops(c).is_empty() => Some(HeaderMatch {
            name: "user-agent".into(),
            op: HeaderOp::Contains(ua.clone()),
        }),
        _ => None,
    }
}

/// The operators set on a condition, by field name.
fn header_ops(c: &HeaderCondition) -> Vec<(&'static str, HeaderOp)> {
    let mut ops = Vec::new();
    if let Some(x) = &c.value {
        ops.push(("value", HeaderOp::Exact(x.clone())));
    }
    if let Some(x) = &c.exact {
        ops.push(("exact", HeaderOp::Exact(x.clone())));
    }
    if let Some(x) = &c.contains {
        ops.push(("contains", HeaderOp::Contains(x.clone())));
    }
    if let Some(x) = &c.not_contains {
        ops.push(("notContains", HeaderOp::NotContains(x.clone())));
    }
    if let Some(p) = c.present {
        ops.push((
            "present",
            if p {
                HeaderOp::Present
            } else {
                HeaderOp::Absent
            },
        ));
    }
    if let Some(x) = &c.regex {
        ops.push(("regex", HeaderOp::Regex(x.clone())));
    }
    ops
}

/// One v1 header condition: its shape (see [`validate_condition_shape`]), then its values.
fn validate_header_condition(v: &mut Verdict, path: &str, c: &HeaderCondition) {
    validate_condition_shape(v, path, c);
    validate_condition_values(v, path, c);
}

/// A condition names exactly one of header, cookie and userAgent; a header takes exactly one
/// operator, a cookie or userAgent none.
fn validate_condition_shape(v: &mut Verdict, path: &str, c: &HeaderCondition) {
    let names: Vec<&str> = [
        ("header", c.header.is_some()),
        ("cookie", c.cookie.is_some()),
        ("userAgent", c.user_agent.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, set)| set.then_some(n))
    .collect();
    let ops = header_ops(c);
    let op_names: Vec<&str> = ops.iter().map(|(n, _)| *n).collect();
    match names.as_slice() {
        ["header"] => {
            let name = c.header.as_deref().unwrap_or_default();
            check(v, validate_header_name(&format!("{path}.header"), name));
            if ops.len() != 1 {
                v.error(FieldError::spec(
                    path,
                    format!(
                        "header {} needs exactly one of value, exact, contains, notContains, present, regex (found {})",
                        quote(name),
                        found(&op_names)
                    ),
                ));
            }
        }
        [shortcut] => {
            if !ops.is_empty() {
                let header = if *shortcut == "cookie" {
                    "Cookie"
                } else {
                    "User-Agent"
                };
                v.error(FieldError::spec(
                    path,
                    format!(
                        "{shortcut} takes no operator (found {}); it matches when the {header} header contains its value",
                        found(&op_names)
                    ),
                ));
            }
        }
        _ => v.error(FieldError::spec(
            path,
            format!(
                "must name exactly one of header, cookie, userAgent (found {})",
                found(&names)
            ),
        )),
    }
}

/// A condition's values: valid header values, none of the substring ones empty, a regex RE2
/// accepts.
fn validate_condition_values(v: &mut Verdict, path: &str, c: &HeaderCondition) {
    for (field, value) in [
        ("value", &c.value),
        ("exact", &c.exact),
        ("contains", &c.contains),
        ("notContains", &c.not_contains),
        ("cookie", &c.cookie),
        ("userAgent", &c.user_agent),
    ] {
        if let Some(x) = value {
            check(v, validate_header_value(&format!("{path}.{field}"), x));
        }
    }
    // Envoy refuses an empty `contains` (a route configuration holding one is NACKed); every
    // present value contains "" anyway.
    for (field, value, fix) in [
        (
            "contains",
            &c.contains,
            "must not be empty (every value contains \"\"); use present: true",
        ),
        (
            "notContains",
            &c.not_contains,
            "must not be empty (every value contains \"\"); use present: false",
        ),
        (
            "cookie",
            &c.cookie,
            "must not be empty; name the cookie, like \"user=test\"",
        ),
        (
            "userAgent",
            &c.user_agent,
            "must not be empty; give part of the User-Agent, like \"Chrome\"",
        ),
    ] {
        if value.as_deref() == Some("") {
            v.error(FieldError::invalid(format!("{path}.{field}"), "", fix));
        }
    }
    if let Some(re) = &c.regex {
        check_regex(v, &format!("{path}.regex"), re);
    }
}

fn found(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The field name a v1 route's backends are written under (`backends`, or its alias `services`).
pub fn v1_backends_field(r: &contour_v1::Route) -> &'static str {
    if r.backends.is_empty() && !r.services.is_empty() {
        "services"
    } else {
        "backends"
    }
}

/// The single-object rules of an IngressRoute `projectcontour.io/v1`.
pub fn validate_v1(o: &contour_v1::IngressRoute) -> Verdict {
    let mut v = Verdict::default();
    let spec = &o.spec;
    validate_spec_head(
        &mut v,
        spec.virtualhost.as_ref(),
        spec.health_check.as_ref(),
        spec.routes.len(),
    );
    let mut seen: HashMap<(PathMatch, Vec<HeaderMatch>), usize> = HashMap::new();
    for (i, r) in spec.routes.iter().enumerate() {
        let at = RouteAt(i);
        validate_v1_match(&mut v, i, r, (spec.routes.len() > 1).then_some(&mut seen));
        validate_v1_backends(&mut v, i, r, o.metadata.namespace.as_deref());
        validate_tcp_route(&mut v, o, i);
        if let Some(d) = &r.delegate {
            validate_delegate(&mut v, format_args!("{at}.delegate"), d, &o.metadata);
        }
        validate_v1_policies(&mut v, at, r);
    }
    v
}

/// A v1 route's `match`: its path and header conditions, and (when they are valid and `seen` is
/// given, the routes of an object with several) not the same match as an earlier route's.
fn validate_v1_match(
    v: &mut Verdict,
    i: usize,
    r: &contour_v1::Route,
    seen: Option<&mut HashMap<(PathMatch, Vec<HeaderMatch>), usize>>,
) {
    let at = RouteAt(i);
    let before = v.errors.len();
    if let Some(m) = &r.match_ {
        if let Some(p) = &m.path {
            check(v, validate_path(format_args!("{at}.match.path"), p, true));
        }
        for (k, c) in m.headers.iter().enumerate() {
            validate_header_condition(v, &format!("{at}.match.headers[{k}]"), c);
        }
    }
    if v.errors.len() == before
        && let Some(seen) = seen
    {
        let mut headers: Vec<HeaderMatch> = r
            .match_
            .iter()
            .flat_map(|m| m.headers.iter().filter_map(v1_header_match))
            .collect();
        headers.sort();
        headers.dedup();
        if let Some(first) = seen.insert((v1_path_match(r.match_.as_ref()), headers), i) {
            v.error(FieldError::spec(
                format!("{at}.match"),
                format!("is the same match as spec.routes[{first}]; a match may appear once per IngressRoute"),
            ));
        }
    }
}

/// A v1 route's timeout and retry policies: durations Envoy takes, at most 100 retries.
fn validate_v1_policies(v: &mut Verdict, at: RouteAt, r: &contour_v1::Route) {
    if let Some(t) = r.timeout_policy.as_ref().and_then(|t| t.request.as_deref())
        && let Err(e) = parse_timeout(&format!("{at}.timeoutPolicy.request"), t)
    {
        v.error(e);
    }
    if let Some(f) = &r.failure_policy {
        if let Some(c) = f.count.filter(|c| *c > 100) {
            v.error(FieldError::spec(
                format!("{at}.failurePolicy.count"),
                format!("{c} must be between 0 and 100"),
            ));
        }
        if let Some(t) = &f.per_try_timeout
            && let Err(e) = parse_timeout(&format!("{at}.failurePolicy.perTryTimeout"), t)
        {
            v.error(e);
        }
    }
}

#[path = "ingressroute_backend.rs"]
mod backend;

#[cfg(test)]
#[path = "ingressroute_tests.rs"]
mod tests;
