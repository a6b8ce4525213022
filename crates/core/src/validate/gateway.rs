//! Gateway API rules (GatewayClass, Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute,
//! ReferenceGrant): what the upstream schemas and CEL rules cannot see — regular expression validity
//! (RE2, bounded), path syntax, header names and values (case-insensitive duplicates), host name
//! syntax, durations — and the listener conflicts within one Gateway that upstream only reports in
//! status after the fact.
//!
//! Every rule here holds for any conformant implementation except where noted (RE2 regexes and
//! certificate-less Terminate listeners are sluice's); the webhook applies them only to objects the
//! index does not show to belong to another controller (see docs/webhook.md).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::str::FromStr;

use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};
use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteRulesFiltersType, HttpRouteRulesMatchesHeadersType,
    HttpRouteRulesMatchesPathType, HttpRouteRulesMatchesQueryParamsType,
};
use gateway_api::apis::experimental::tcproutes::TcpRoute;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;
use gateway_api::apis::standard::tlsroutes::TlsRoute;

use super::common::{
    check_regex, validate_dns1123_label, validate_dns1123_subdomain, validate_header_name,
    validate_header_value, validate_hostname, validate_path,
};
use super::label_selector::listener_selector;
use super::{FieldError, Verdict, quote};
use crate::store::AnyObject;

// The checks of route filters' fields: CORS policies, mirrors' shares, replacement paths.
#[path = "gateway_filters.rs"]
mod filters;
use filters::{CorsFields, validate_cors, validate_mirror_share, validate_replacement_path};

/// Runs the rules of a Gateway API object; other kinds get an empty verdict.
pub fn validate_gateway_object(o: &AnyObject) -> Verdict {
    match o {
        AnyObject::GatewayClass(c) => validate_gateway_class(c),
        AnyObject::Gateway(g) => validate_gateway(g),
        AnyObject::HttpRoute(r) => validate_http_route(r),
        AnyObject::GrpcRoute(r) => validate_grpc_route(r),
        AnyObject::TlsRoute(r) => validate_tls_route(r),
        AnyObject::TcpRoute(r) => validate_tcp_route(r),
        AnyObject::ReferenceGrant(r) => validate_reference_grant(r),
        _ => Verdict::default(),
    }
}

fn push(v: &mut Verdict, r: Result<(), FieldError>) {
    if let Err(e) = r {
        v.error(e);
    }
}

pub(super) fn validate_port(v: &mut Verdict, path: &str, port: i32) {
    if !(1..=65535).contains(&port) {
        v.error(FieldError::spec(
            path,
            format!("{port} must be a port number between 1 and 65535"),
        ));
    }
}

// ---- GatewayClass ----

/// `spec.controllerName` is a domain-prefixed path; `parametersRef.namespace` a namespace name.
pub fn validate_gateway_class(c: &GatewayClass) -> Verdict {
    let mut v = Verdict::default();
    let name = &c.spec.controller_name;
    let ok = match name.split_once('/') {
        Some((domain, path)) => {
            validate_dns1123_subdomain("", domain, "").is_ok()
                && !path.is_empty()
                && path
                    .chars()
                    .all(|ch| ch.is_ascii_graphic() && !matches!(ch, '?' | '#' | '"' | '\\'))
        }
        None => false,
    };
    if !ok {
        v.error(FieldError::invalid(
            "spec.controllerName",
            name,
            "must be a domain-prefixed path like \"example.com/gateway-controller\"",
        ));
    }
    if let Some(ns) = c
        .spec
        .parameters_ref
        .as_ref()
        .and_then(|p| p.namespace.as_deref())
    {
        push(
            &mut v,
            validate_dns1123_label("spec.parametersRef.namespace", ns, "namespace"),
        );
    }
    v
}

// ---- Gateway ----

/// Listeners that may share a port: all HTTP, or all TLS-based (HTTPS, TLS). TCP shares with
/// nothing; UDP is a different transport; other (domain-prefixed) protocols are not compared.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortGroup {
    Http,
    Tls,
    Tcp,
    Udp,
    Other,
}

pub(crate) fn port_group(protocol: &str) -> PortGroup {
    match protocol {
        "HTTP" => PortGroup::Http,
        "HTTPS" | "TLS" => PortGroup::Tls,
        "TCP" => PortGroup::Tcp,
        "UDP" => PortGroup::Udp,
        _ => PortGroup::Other,
    }
}

fn hostname_text(h: Option<&str>) -> String {
    match h {
        Some(h) => format!("hostname {}", quote(h)),
        None => "no hostname".to_string(),
    }
}

/// Listener syntax, TLS settings and conflicts between the listeners of one Gateway.
pub fn validate_gateway(g: &Gateway) -> Verdict {
    let mut v = Verdict::default();
    if g.spec.gateway_class_name.is_empty() {
        v.error(FieldError::required(
            "spec.gatewayClassName",
            "name the GatewayClass this Gateway is for",
        ));
    }
    for (i, a) in g.spec.addresses.iter().flatten().enumerate() {
        let path = format!("spec.addresses[{i}].value");
        let Some(value) = a.value.as_deref() else {
            continue;
        };
        match a.r#type.as_deref().unwrap_or("IPAddress") {
            "IPAddress" if value.parse::<std::net::IpAddr>().is_err() => {
                v.error(FieldError::invalid(
                    path,
                    value,
                    "must be an IPv4 or IPv6 address for type IPAddress",
                ));
            }
            "Hostname" => push(&mut v, validate_hostname(&path, value, false)),
            _ => {}
        }
    }
    if g.spec.listeners.is_empty() {
        v.error(FieldError::spec(
            "spec.listeners",
            "must hold at least one listener",
        ));
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut by_port: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, l) in g.spec.listeners.iter().enumerate() {
        let base = format!("spec.listeners[{i}]");
        unique_name(
            &mut v,
            &mut names,
            ("spec.listeners", i),
            &l.name,
            "a Gateway",
        );
        validate_port(&mut v, &format!("{base}.port"), l.port);
        validate_listener_host_and_tls(&mut v, &base, l);
        validate_namespace_selector(&mut v, &base, l);
        let earlier = by_port.entry(l.port).or_default();
        if let Some(e) = listener_conflict(&g.spec.listeners, earlier, i, &base) {
            v.error(e);
        }
        earlier.push(i);
    }
    v
}

/// The name of item `i` of the list at `list` (a listener, a rule): a section name (an RFC 1123
/// subdomain, as the Gateway API's `SectionName` is), unique among the names in `seen` (the
/// earlier items', by index), which it joins.
pub(super) fn unique_name<'a>(
    v: &mut Verdict,
    seen: &mut HashMap<&'a str, usize>,
    (list, i): (&str, usize),
    name: &'a str,
    within: &str,
) {
    let path = format!("{list}[{i}].name");
    let what = if list.ends_with("listeners") {
        "listener"
    } else {
        "rule"
    };
    push(v, validate_dns1123_subdomain(&path, name, what));
    match seen.get(name) {
        Some(&j) => v.error(FieldError::invalid(
            path,
            name,
            format!(
                "is already the name of {list}[{j}]; {what} names must be unique within {within}"
            ),
        )),
        None => {
            seen.insert(name, i);
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

/// A listener taking the routes of the namespaces a label selector matches needs a selector that
/// reads (see [`listener_selector`]).
pub(super) fn validate_namespace_selector(v: &mut Verdict, base: &str, l: &GatewayListeners) {
    let Some(n) = l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
    else {
        return;
    };
    if n.from != Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) {
        return;
    }
    let at = format!("{base}.allowedRoutes.namespaces.selector");
    if let Err(e) = listener_selector(&at, n.selector.as_ref()) {
        v.error(e);
    }
}

pub(super) fn validate_listener_host_and_tls(v: &mut Verdict, base: &str, l: &GatewayListeners) {
    let protocol = l.protocol.as_str();
    if let Some(h) = l.hostname.as_deref() {
        if matches!(protocol, "TCP" | "UDP") {
            v.error(FieldError::spec(
                format!("{base}.hostname"),
                format!("must not be set for protocol {protocol} (TCP and UDP listeners do not see host names)"),
            ));
        } else {
            push(
                v,
                validate_hostname(format_args!("{base}.hostname"), h, true),
            );
        }
    }
    match (protocol, &l.tls) {
        ("HTTP" | "TCP" | "UDP", Some(_)) => v.error(FieldError::spec(
            format!("{base}.tls"),
            format!(
                "must not be set for protocol {protocol} (only HTTPS and TLS listeners use TLS)"
            ),
        )),
        ("HTTPS", None) => v.error(FieldError::required(
            format!("{base}.tls"),
            "an HTTPS listener terminates TLS and needs tls.certificateRefs",
        )),
        ("TLS", None) => v.error(FieldError::required(
            format!("{base}.tls"),
            "a TLS listener needs tls.mode Passthrough, or Terminate with tls.certificateRefs",
        )),
        ("HTTPS" | "TLS", Some(tls)) => {
            let mode = tls
                .mode
                .clone()
                .unwrap_or(GatewayListenersTlsMode::Terminate);
            match mode {
                GatewayListenersTlsMode::Passthrough if protocol == "HTTPS" => {
                    v.error(FieldError::invalid(
                        format!("{base}.tls.mode"),
                        "Passthrough",
                        "is only valid for protocol TLS; an HTTPS listener terminates TLS (mode Terminate)",
                    ))
                }
                GatewayListenersTlsMode::Passthrough => {}
                GatewayListenersTlsMode::Terminate => {
                    if tls.certificate_refs.as_ref().is_none_or(Vec::is_empty) {
                        v.error(FieldError::required(
                            format!("{base}.tls.certificateRefs"),
                            "a listener in tls mode Terminate (the default) needs at least one certificate Secret",
                        ));
                    }
                }
            }
        }
        _ => {}
    }
}

/// The first earlier listener on the same port that listener `i` conflicts with.
fn listener_conflict(
    listeners: &[GatewayListeners],
    earlier: &[usize],
    i: usize,
    base: &str,
) -> Option<FieldError> {
    let l = &listeners[i];
    let host = l.hostname.as_deref().map(str::to_ascii_lowercase);
    for &j in earlier {
        let o = &listeners[j];
        let other = format!(
            "spec.listeners[{j}] ({}, protocol {})",
            quote(&o.name),
            o.protocol
        );
        let (g1, g2) = (port_group(&l.protocol), port_group(&o.protocol));
        let same_host = host == o.hostname.as_deref().map(str::to_ascii_lowercase);
        if l.protocol == o.protocol && same_host {
            return Some(FieldError::spec(
                base,
                format!(
                    "port {}, protocol {} and {} are the same as {other}; one of them must differ",
                    l.port,
                    l.protocol,
                    hostname_text(l.hostname.as_deref())
                ),
            ));
        }
        if g1 == PortGroup::Other
            || g2 == PortGroup::Other
            || g1 == PortGroup::Udp
            || g2 == PortGroup::Udp
        {
            continue;
        }
        if g1 != g2 || g1 == PortGroup::Tcp {
            return Some(FieldError::spec(
                format!("{base}.protocol"),
                format!(
                    "{} on port {} conflicts with {other}; listeners sharing a port must all be HTTP, or all HTTPS/TLS, or one TCP listener",
                    l.protocol, l.port
                ),
            ));
        }
        if same_host {
            return Some(FieldError::spec(
                base,
                format!(
                    "port {} with {} is already taken by {other}; TLS listeners sharing a port need distinct hostnames",
                    l.port,
                    hostname_text(l.hostname.as_deref())
                ),
            ));
        }
    }
    None
}

// ---- routes: shared pieces ----

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

/// A backendRef: a Service (the default kind) needs a port; ports and weights in range.
fn validate_backend_ref(
    v: &mut Verdict,
    path: &str,
    group: Option<&str>,
    kind: Option<&str>,
    port: Option<i32>,
    weight: Option<i32>,
) {
    let is_service = group.unwrap_or("").is_empty() && kind.unwrap_or("Service") == "Service";
    match port {
        Some(p) => validate_port(v, &format!("{path}.port"), p),
        None if is_service => v.error(FieldError::required(
            format!("{path}.port"),
            "a Service backend names the Service port to send to",
        )),
        None => {}
    }
    if let Some(w) = weight
        && !(0..=1_000_000).contains(&w)
    {
        v.error(FieldError::spec(
            format!("{path}.weight"),
            format!("{w} must be between 0 and 1000000"),
        ));
    }
}

/// A header modifier: names are header names, values carry no control characters, and no header
/// is set (or added, or removed) twice under names that differ only in case.
struct HeaderModifier<'a> {
    set: Vec<(&'a str, &'a str)>,
    add: Vec<(&'a str, &'a str)>,
    remove: Vec<&'a str>,
}

macro_rules! header_modifier {
    ($m:expr) => {
        HeaderModifier {
            set: $m
                .set
                .iter()
                .flatten()
                .map(|h| (h.name.as_str(), h.value.as_str()))
                .collect(),
            add: $m
                .add
                .iter()
                .flatten()
                .map(|h| (h.name.as_str(), h.value.as_str()))
                .collect(),
            remove: $m.remove.iter().flatten().map(String::as_str).collect(),
        }
    };
}

fn validate_header_modifier(v: &mut Verdict, path: &str, m: HeaderModifier<'_>) {
    for (list, entries) in [("set", &m.set), ("add", &m.add)] {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (k, (name, value)) in entries.iter().enumerate() {
            let at = format!("{path}.{list}[{k}]");
            push(v, validate_header_name(&format!("{at}.name"), name));
            push(v, validate_header_value(&format!("{at}.value"), value));
            match seen.entry(name.to_ascii_lowercase()) {
                Entry::Occupied(first) => v.error(FieldError::invalid(
                    format!("{at}.name"),
                    name,
                    format!(
                        "names the same header as {list}[{}] (header names are case-insensitive)",
                        first.get()
                    ),
                )),
                Entry::Vacant(slot) => {
                    slot.insert(k);
                }
            }
        }
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (k, name) in m.remove.iter().enumerate() {
        let at = format!("{path}.remove[{k}]");
        push(v, validate_header_name(&at, name));
        match seen.entry(name.to_ascii_lowercase()) {
            Entry::Occupied(first) => v.error(FieldError::invalid(
                at,
                name,
                format!(
                    "names the same header as remove[{}] (header names are case-insensitive)",
                    first.get()
                ),
            )),
            Entry::Vacant(slot) => {
                slot.insert(k);
            }
        }
    }
}

/// A header match: the name is a header name; Exact values carry no control characters;
/// RegularExpression values are valid bounded RE2.
fn validate_header_match(v: &mut Verdict, path: &str, name: &str, value: &str, regex: bool) {
    push(v, validate_header_name(&format!("{path}.name"), name));
    let at = format!("{path}.value");
    if regex {
        check_regex(v, &at, value);
    } else {
        push(v, validate_header_value(&at, value));
    }
}

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

// ---- HTTPRoute ----

macro_rules! http_filter {
    ($v:expr, $path:expr, $f:expr) => {{
        let (v, path, f) = ($v, $path, $f);
        if let Some(m) = &f.request_header_modifier {
            validate_header_modifier(
                v,
                &format!("{path}.requestHeaderModifier"),
                header_modifier!(m),
            );
        }
        if let Some(m) = &f.response_header_modifier {
            validate_header_modifier(
                v,
                &format!("{path}.responseHeaderModifier"),
                header_modifier!(m),
            );
        }
        if let Some(r) = &f.request_redirect {
            let at = format!("{path}.requestRedirect");
            if let Some(h) = &r.hostname {
                push(v, validate_hostname(&format!("{at}.hostname"), h, false));
            }
            if let Some(p) = &r.path {
                validate_replacement_path(
                    v,
                    &format!("{at}.path"),
                    p.replace_full_path.as_deref(),
                    p.replace_prefix_match.as_deref(),
                );
            }
            if let Some(port) = r.port {
                validate_port(v, &format!("{at}.port"), port);
            }
            if let Some(code) = r.status_code {
                if ![301, 302, 303, 307, 308].contains(&code) {
                    v.error(FieldError::spec(
                        format!("{at}.statusCode"),
                        format!("{code} must be one of 301, 302, 303, 307, 308"),
                    ));
                }
            }
        }
        if let Some(r) = &f.url_rewrite {
            let at = format!("{path}.urlRewrite");
            if let Some(h) = &r.hostname {
                push(v, validate_hostname(&format!("{at}.hostname"), h, false));
            }
            if let Some(p) = &r.path {
                validate_replacement_path(
                    v,
                    &format!("{at}.path"),
                    p.replace_full_path.as_deref(),
                    p.replace_prefix_match.as_deref(),
                );
            }
        }
        if let Some(c) = &f.cors {
            validate_cors(
                v,
                &format!("{path}.cors"),
                CorsFields {
                    allow_origins: c.allow_origins.as_deref().unwrap_or_default(),
                    allow_methods: c.allow_methods.as_deref().unwrap_or_default(),
                    allow_headers: c.allow_headers.as_deref().unwrap_or_default(),
                    expose_headers: c.expose_headers.as_deref().unwrap_or_default(),
                    max_age: c.max_age,
                },
            );
        }
        if let Some(m) = &f.request_mirror {
            let at = format!("{path}.requestMirror");
            if let Some(port) = m.backend_ref.port {
                validate_port(v, &format!("{at}.backendRef.port"), port);
            }
            validate_mirror_share(
                v,
                &at,
                m.percent,
                m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
            );
        }
    }};
}

/// Host names, match syntax (paths, headers, query parameters, RE2 regexes), filters, backends and
/// timeouts of an HTTPRoute.
pub fn validate_http_route(r: &HttpRoute) -> Verdict {
    let mut v = Verdict::default();
    validate_hostnames(&mut v, r.spec.hostnames.iter().flatten());
    validate_parent_refs(
        &mut v,
        r.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| (p.port, p.section_name.as_deref())),
    );
    validate_rule_names(
        &mut v,
        r.spec.rules.iter().flatten().map(|r| r.name.as_ref()),
    );
    for (i, rule) in r.spec.rules.iter().flatten().enumerate() {
        let base = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().flatten().enumerate() {
            let at = format!("{base}.matches[{j}]");
            if let Some(p) = &m.path {
                let value = p.value.as_deref().unwrap_or("/");
                let vpath = format!("{at}.path.value");
                match p
                    .r#type
                    .clone()
                    .unwrap_or(HttpRouteRulesMatchesPathType::PathPrefix)
                {
                    HttpRouteRulesMatchesPathType::RegularExpression => {
                        check_regex(&mut v, &vpath, value)
                    }
                    HttpRouteRulesMatchesPathType::Exact
                    | HttpRouteRulesMatchesPathType::PathPrefix => {
                        push(&mut v, validate_path(&vpath, value, true))
                    }
                }
            }
            for (k, h) in m.headers.iter().flatten().enumerate() {
                let regex = matches!(
                    h.r#type,
                    Some(HttpRouteRulesMatchesHeadersType::RegularExpression)
                );
                validate_header_match(
                    &mut v,
                    &format!("{at}.headers[{k}]"),
                    &h.name,
                    &h.value,
                    regex,
                );
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
                        check_regex(&mut v, &vat, &q.value)
                    }
                    _ => push(&mut v, validate_header_value(&vat, &q.value)),
                }
            }
        }
        for (k, f) in rule.filters.iter().flatten().enumerate() {
            http_filter!(&mut v, &format!("{base}.filters[{k}]"), f);
            if f.r#type == HttpRouteRulesFiltersType::Cors && f.cors.is_none() {
                v.error(FieldError::spec(
                    format!("{base}.filters[{k}].cors"),
                    "is required for a CORS filter: set allowOrigins and the other fields of the policy",
                ));
            }
        }
        for (b, be) in rule.backend_refs.iter().flatten().enumerate() {
            let at = format!("{base}.backendRefs[{b}]");
            validate_backend_ref(
                &mut v,
                &at,
                be.group.as_deref(),
                be.kind.as_deref(),
                be.port,
                be.weight,
            );
            for (k, f) in be.filters.iter().flatten().enumerate() {
                http_filter!(&mut v, &format!("{at}.filters[{k}]"), f);
            }
        }
        if let Some(t) = &rule.timeouts {
            let request = t
                .request
                .as_deref()
                .and_then(|d| validate_duration(&mut v, &format!("{base}.timeouts.request"), d));
            let backend = t.backend_request.as_deref().and_then(|d| {
                validate_duration(&mut v, &format!("{base}.timeouts.backendRequest"), d)
            });
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
        if let Some(r) = &rule.retry {
            if let Some(b) = r.backoff.as_deref() {
                validate_duration(&mut v, &format!("{base}.retry.backoff"), b);
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
    }
    v
}

// ---- GRPCRoute ----

macro_rules! grpc_filter {
    ($v:expr, $path:expr, $f:expr) => {{
        let (v, path, f) = ($v, $path, $f);
        if let Some(m) = &f.request_header_modifier {
            validate_header_modifier(
                v,
                &format!("{path}.requestHeaderModifier"),
                header_modifier!(m),
            );
        }
        if let Some(m) = &f.response_header_modifier {
            validate_header_modifier(
                v,
                &format!("{path}.responseHeaderModifier"),
                header_modifier!(m),
            );
        }
        if let Some(m) = &f.request_mirror {
            let at = format!("{path}.requestMirror");
            if let Some(port) = m.backend_ref.port {
                validate_port(v, &format!("{at}.backendRef.port"), port);
            }
            validate_mirror_share(
                v,
                &at,
                m.percent,
                m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
            );
        }
    }};
}

// GRPCRoute's rules: its method matches and what it shares with HTTPRoute's.
#[path = "gateway_grpc.rs"]
mod grpc;
pub use grpc::{grpc_path_regex, validate_grpc_route};

// ---- TLSRoute, TCPRoute ----

/// Host names (SNI, wildcards allowed) and backends of a TLSRoute.
pub fn validate_tls_route(r: &TlsRoute) -> Verdict {
    let mut v = Verdict::default();
    validate_hostnames(&mut v, &r.spec.hostnames);
    validate_parent_refs(
        &mut v,
        r.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| (p.port, p.section_name.as_deref())),
    );
    for (i, rule) in r.spec.rules.iter().enumerate() {
        for (b, be) in rule.backend_refs.iter().enumerate() {
            let at = format!("spec.rules[{i}].backendRefs[{b}]");
            validate_backend_ref(
                &mut v,
                &at,
                be.group.as_deref(),
                be.kind.as_deref(),
                be.port,
                be.weight,
            );
        }
    }
    v
}

/// Backends of a TCPRoute.
pub fn validate_tcp_route(r: &TcpRoute) -> Verdict {
    let mut v = Verdict::default();
    validate_parent_refs(
        &mut v,
        r.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| (p.port, p.section_name.as_deref())),
    );
    if r.spec.rules.is_empty() {
        v.error(FieldError::spec(
            "spec.rules",
            "must hold at least one rule",
        ));
    }
    for (i, rule) in r.spec.rules.iter().enumerate() {
        for (b, be) in rule.backend_refs.iter().enumerate() {
            let at = format!("spec.rules[{i}].backendRefs[{b}]");
            validate_backend_ref(
                &mut v,
                &at,
                be.group.as_deref(),
                be.kind.as_deref(),
                be.port,
                be.weight,
            );
        }
    }
    v
}

// ---- ReferenceGrant ----

/// `from` and `to` are non-empty, `from[].namespace` is a namespace name, kinds are named.
pub fn validate_reference_grant(r: &ReferenceGrant) -> Verdict {
    let mut v = Verdict::default();
    if r.spec.from.is_empty() {
        v.error(FieldError::spec(
            "spec.from",
            "must hold at least one entry",
        ));
    }
    if r.spec.to.is_empty() {
        v.error(FieldError::spec("spec.to", "must hold at least one entry"));
    }
    for (i, f) in r.spec.from.iter().enumerate() {
        push(
            &mut v,
            validate_dns1123_label(
                format_args!("spec.from[{i}].namespace"),
                &f.namespace,
                "namespace",
            ),
        );
        if f.kind.is_empty() {
            v.error(FieldError::required(
                format!("spec.from[{i}].kind"),
                "name the kind of the referring objects, e.g. HTTPRoute",
            ));
        }
    }
    for (i, t) in r.spec.to.iter().enumerate() {
        if t.kind.is_empty() {
            v.error(FieldError::required(
                format!("spec.to[{i}].kind"),
                "name the kind of the referenced objects, e.g. Service",
            ));
        }
        if let Some(name) = t.name.as_deref() {
            push(
                &mut v,
                validate_dns1123_subdomain(format_args!("spec.to[{i}].name"), name, "object"),
            );
        }
    }
    v
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
