//! The rules every Gateway API route kind shares: host names, parentRefs, backendRefs; and the
//! one path HTTPRoute and GRPCRoute take through what they have in common (rule names, each
//! rule's filters and backendRefs with theirs), each kind adding its own matches ([`RouteRule`]).
//! TLSRoute and TCPRoute, which have only parents, host names (TLS) and backends, are here too.

use std::collections::HashMap;

use gateway_api::apis::experimental::tcproutes::{TcpRoute, TcpRouteRulesBackendRefs};
use gateway_api::apis::standard::tlsroutes::{TlsRoute, TlsRouteRulesBackendRefs};

use super::filters::{RouteFilter, validate_filter};
use super::{push, unique_name, validate_port};
use crate::validate::common::{
    check_regex, validate_dns1123_subdomain, validate_header_name, validate_header_value,
    validate_hostname,
};
use crate::validate::{FieldError, Verdict};

/// A rule of an HTTPRoute or a GRPCRoute: what [`validate_route`] reads of it, and the checks
/// of its kind's own.
pub(super) trait RouteRule {
    type Filter: RouteFilter;
    type Backend: FilteredBackend;
    /// `name`, optional.
    fn name(&self) -> Option<&String>;
    fn filters(&self) -> &[Self::Filter];
    fn backend_refs(&self) -> &[Self::Backend];
    /// Checks the rule's matches (`base` names the rule); run before its filters'.
    fn validate_matches(&self, v: &mut Verdict, base: &str);
    /// Checks what the kind has besides matches, filters and backends (HTTPRoute's timeouts
    /// and retries); run last.
    fn validate_rest(&self, _v: &mut Verdict, _base: &str) {}
}

/// A backendRef of any route kind: what can be wrong in where it points.
pub(super) trait Backend {
    fn target(&self) -> BackendTarget<'_>;
}

/// A backendRef of an HTTPRoute or a GRPCRoute rule: it has filters of its own.
pub(super) trait FilteredBackend: Backend {
    type Filter: RouteFilter;
    fn filters(&self) -> &[Self::Filter];
}

/// The fields of a backendRef that can be wrong.
pub(super) struct BackendTarget<'a> {
    pub(super) group: Option<&'a str>,
    pub(super) kind: Option<&'a str>,
    pub(super) port: Option<i32>,
    pub(super) weight: Option<i32>,
}

/// An HTTPRoute's or a GRPCRoute's checks: its host names, its parentRefs as `(port,
/// sectionName)`, its rule names, then each rule's matches, filters, backendRefs and the rest.
pub(super) fn validate_route<'a, R: RouteRule>(
    hostnames: &[String],
    parents: impl IntoIterator<Item = (Option<i32>, Option<&'a str>)>,
    rules: &[R],
) -> Verdict {
    let mut v = Verdict::default();
    validate_hostnames(&mut v, hostnames);
    validate_parent_refs(&mut v, parents);
    validate_rule_names(&mut v, rules.iter().map(R::name));
    for (i, rule) in rules.iter().enumerate() {
        let base = format!("spec.rules[{i}]");
        rule.validate_matches(&mut v, &base);
        validate_filters(&mut v, &base, rule.filters());
        for (b, be) in rule.backend_refs().iter().enumerate() {
            let at = format!("{base}.backendRefs[{b}]");
            validate_backend_ref(&mut v, &at, be.target());
            validate_filters(&mut v, &at, be.filters());
        }
        rule.validate_rest(&mut v, &base);
    }
    v
}

/// The filters of a rule or a backendRef (`base` names it).
fn validate_filters<F: RouteFilter>(v: &mut Verdict, base: &str, filters: &[F]) {
    for (k, f) in filters.iter().enumerate() {
        validate_filter(v, &format!("{base}.filters[{k}]"), &f.fields());
    }
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

/// `(port, sectionName)` of every parentRef.
fn validate_parent_refs<'a>(
    v: &mut Verdict,
    parents: impl IntoIterator<Item = (Option<i32>, Option<&'a str>)>,
) {
    for (i, (port, section)) in parents.into_iter().enumerate() {
        if let Some(port) = port {
            validate_port(v, &format!("spec.parentRefs[{i}].port"), port);
        }
        if let Some(s) = section {
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
fn validate_backend_ref(v: &mut Verdict, path: &str, t: BackendTarget<'_>) {
    let is_service = t.group.unwrap_or("").is_empty() && t.kind.unwrap_or("Service") == "Service";
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
fn validate_rule_backends<'a, B: Backend + 'a>(
    v: &mut Verdict,
    rules: impl IntoIterator<Item = &'a [B]>,
) {
    for (i, backends) in rules.into_iter().enumerate() {
        for (b, be) in backends.iter().enumerate() {
            let at = format!("spec.rules[{i}].backendRefs[{b}]");
            validate_backend_ref(v, &at, be.target());
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

impl Backend for TlsRouteRulesBackendRefs {
    fn target(&self) -> BackendTarget<'_> {
        BackendTarget {
            group: self.group.as_deref(),
            kind: self.kind.as_deref(),
            port: self.port,
            weight: self.weight,
        }
    }
}

impl Backend for TcpRouteRulesBackendRefs {
    fn target(&self) -> BackendTarget<'_> {
        BackendTarget {
            group: self.group.as_deref(),
            kind: self.kind.as_deref(),
            port: self.port,
            weight: self.weight,
        }
    }
}

/// Host names (SNI, wildcards allowed) and backends of a TLSRoute.
pub fn validate_tls_route(r: &TlsRoute) -> Verdict {
    let mut v = Verdict::default();
    validate_hostnames(&mut v, &r.spec.hostnames);
    validate_parent_refs(
        &mut v,
        (r.spec.parent_refs.iter().flatten()).map(|p| (p.port, p.section_name.as_deref())),
    );
    let rules = r.spec.rules.iter().map(|rule| rule.backend_refs.as_slice());
    validate_rule_backends(&mut v, rules);
    v
}

/// Backends of a TCPRoute.
pub fn validate_tcp_route(r: &TcpRoute) -> Verdict {
    let mut v = Verdict::default();
    validate_parent_refs(
        &mut v,
        (r.spec.parent_refs.iter().flatten()).map(|p| (p.port, p.section_name.as_deref())),
    );
    if r.spec.rules.is_empty() {
        v.error(FieldError::spec(
            "spec.rules",
            "must hold at least one rule",
        ));
    }
    let rules = r.spec.rules.iter().map(|rule| rule.backend_refs.as_slice());
    validate_rule_backends(&mut v, rules);
    v
}
