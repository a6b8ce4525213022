//! The rules every Gateway API route kind shares: host names, parentRefs, backendRefs; and the
//! one path HTTPRoute and GRPCRoute take through what they have in common (rule names, each
//! rule's filters and backendRefs with theirs), each kind adding its own matches ([`RouteRule`]).
//! TLSRoute and TCPRoute, which have only parents, host names (TLS) and backends, are here too.

use std::collections::HashMap;

use gateway_api::apis::experimental::tcproutes::TcpRoute;
use gateway_api::apis::standard::tlsroutes::TlsRoute;
use serde::Serialize;

use super::filters::validate_filter;
use super::{push, unique_name, validate_port};
use crate::api::gateway_route::{BackendRef, RouteSpec};
use crate::validate::common::{
    check_regex, validate_dns1123_subdomain, validate_header_name, validate_header_value,
    validate_hostname,
};
use crate::validate::{FieldError, Verdict};

/// The shared fields of a route's `spec` ([`RouteSpec::read`]); when they cannot be read (this
/// model and the generated type disagree: a bug of sluice), an error says so and they read as
/// empty.
pub fn read_spec(v: &mut Verdict, spec: &impl Serialize) -> RouteSpec {
    RouteSpec::read(spec).unwrap_or_else(|e| {
        v.error(FieldError::spec(
            "spec",
            format!("sluice could not read the route's parentRefs, hostnames and rules ({e}); please report this"),
        ));
        RouteSpec::default()
    })
}

/// The checks of one route kind's own fields of rule `i` (`base` names it): its matches (run
/// before the rule's filters) and the rest (HTTPRoute's timeouts and retries; run last).
pub(super) trait KindChecks {
    fn matches(&self, v: &mut Verdict, i: usize, base: &str);
    fn rest(&self, _v: &mut Verdict, _i: usize, _base: &str) {}
}

/// An HTTPRoute's or a GRPCRoute's checks: its host names, its parentRefs, its rule names, then
/// each rule's matches, filters, backendRefs (with their filters) and the rest.
pub(super) fn validate_route(mut v: Verdict, spec: &RouteSpec, kind: &impl KindChecks) -> Verdict {
    validate_hostnames(&mut v, &spec.hostnames);
    validate_parent_refs(&mut v, spec);
    validate_rule_names(&mut v, spec.rules.iter().map(|r| r.name.as_ref()));
    for (i, rule) in spec.rules.iter().enumerate() {
        let base = format!("spec.rules[{i}]");
        kind.matches(&mut v, i, &base);
        for (k, f) in rule.filters.iter().enumerate() {
            validate_filter(&mut v, &format!("{base}.filters[{k}]"), f, true);
        }
        for (b, be) in rule.backend_refs.iter().enumerate() {
            let at = format!("{base}.backendRefs[{b}]");
            validate_backend_ref(&mut v, &at, be);
            for (k, f) in be.filters.iter().enumerate() {
                validate_filter(&mut v, &format!("{at}.filters[{k}]"), f, false);
            }
        }
        kind.rest(&mut v, i, &base);
    }
    v
}

/// Host names (wildcards allowed) of `spec.hostnames`.
fn validate_hostnames<'a>(v: &mut Verdict, hostnames: impl IntoIterator<Item = &'a String>) {
    for (i, h) in hostnames.into_iter().enumerate() {
        push(
            v,
            validate_hostname(format_args!("spec.hostnames[{i}]"), h, true),
        );
    }
}

/// The `port` and `sectionName` of every parentRef.
fn validate_parent_refs(v: &mut Verdict, spec: &RouteSpec) {
    for (i, p) in spec.parent_refs.iter().enumerate() {
        if let Some(port) = p.port {
            validate_port(v, &format!("spec.parentRefs[{i}].port"), port);
        }
        if let Some(s) = &p.section_name {
            push(
                v,
                validate_dns1123_subdomain(
                    format_args!("spec.parentRefs[{i}].sectionName"),
                    s,
                    "section (listener)",
                ),
            );
        }
    }
}

/// Rule names (`spec.rules[].name` of an HTTPRoute or a GRPCRoute): optional, each unique within
/// the route.
fn validate_rule_names<'a>(v: &mut Verdict, names: impl Iterator<Item = Option<&'a String>>) {
    let mut seen = HashMap::new();
    for (i, name) in names.enumerate() {
        if let Some(name) = name {
            unique_name(v, &mut seen, ("spec.rules", i), name, "a route");
        }
    }
}

/// A backendRef: a Service (the default kind) needs a port; ports and weights in range.
fn validate_backend_ref(v: &mut Verdict, path: &str, t: &BackendRef) {
    let is_service = t.group.as_deref().unwrap_or("").is_empty()
        && t.kind.as_deref().unwrap_or("Service") == "Service";
    match t.port {
        Some(p) => validate_port(v, &format!("{path}.port"), p),
        None if is_service => v.error(FieldError::required(
            format!("{path}.port"),
            "a Service backend names the Service port to send to",
        )),
        None => {}
    }
    if let Some(w) = t.weight
        && !(0..=1_000_000).contains(&w)
    {
        v.error(FieldError::spec(
            format!("{path}.weight"),
            format!("{w} must be between 0 and 1000000"),
        ));
    }
}

/// The backendRefs of every rule of a route without filters (TLSRoute, TCPRoute).
fn validate_rule_backends(v: &mut Verdict, spec: &RouteSpec) {
    for (i, rule) in spec.rules.iter().enumerate() {
        for (b, be) in rule.backend_refs.iter().enumerate() {
            let at = format!("spec.rules[{i}].backendRefs[{b}]");
            validate_backend_ref(v, &at, be);
        }
    }
}

/// A header match: the name is a header name; Exact values carry no control characters;
/// RegularExpression values are valid bounded RE2.
pub(super) fn validate_header_match(
    v: &mut Verdict,
    path: &str,
    name: &str,
    value: &str,
    regex: bool,
) {
    push(v, validate_header_name(&format!("{path}.name"), name));
    let at = format!("{path}.value");
    if regex {
        check_regex(v, &at, value);
    } else {
        push(v, validate_header_value(&at, value));
    }
}

// ---- TLSRoute, TCPRoute ----

/// Host names (SNI, wildcards allowed) and backends of a TLSRoute.
pub fn validate_tls_route(r: &TlsRoute) -> Verdict {
    let mut v = Verdict::default();
    let spec = read_spec(&mut v, &r.spec);
    validate_tls_route_with(v, &spec)
}

/// [`validate_tls_route`] of the route's shared fields read already (`v` holds what reading
/// them found).
pub fn validate_tls_route_with(mut v: Verdict, spec: &RouteSpec) -> Verdict {
    validate_hostnames(&mut v, &spec.hostnames);
    validate_parent_refs(&mut v, spec);
    validate_rule_backends(&mut v, spec);
    v
}

/// Backends of a TCPRoute.
pub fn validate_tcp_route(r: &TcpRoute) -> Verdict {
    let mut v = Verdict::default();
    let spec = read_spec(&mut v, &r.spec);
    validate_tcp_route_with(v, &spec)
}

/// [`validate_tcp_route`] of the route's shared fields read already.
pub fn validate_tcp_route_with(mut v: Verdict, spec: &RouteSpec) -> Verdict {
    validate_parent_refs(&mut v, spec);
    if spec.rules.is_empty() {
        v.error(FieldError::spec(
            "spec.rules",
            "must hold at least one rule",
        ));
    }
    validate_rule_backends(&mut v, spec);
    v
}
