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

use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::referencegrants::ReferenceGrant;

use super::common::{validate_dns1123_label, validate_dns1123_subdomain, validate_hostname};
use super::label_selector::listener_selector;
use super::{FieldError, Verdict, quote};
use crate::store::AnyObject;

// The checks of route filters' fields, of every route kind.
#[path = "gateway_filters.rs"]
mod filters;
// What every route kind shares, and the one path of HTTPRoute's and GRPCRoute's checks.
#[path = "gateway_routes.rs"]
mod routes;
pub use routes::{
    read_spec, validate_tcp_route, validate_tcp_route_with, validate_tls_route,
    validate_tls_route_with,
};
// HTTPRoute's matches, redirects, rewrites, CORS policies, timeouts and retries.
#[path = "gateway_http.rs"]
mod http;
pub use http::{validate_http_route, validate_http_route_with};
// GRPCRoute's method matches.
#[path = "gateway_grpc.rs"]
mod grpc;
pub use grpc::{grpc_path_regex, validate_grpc_route, validate_grpc_route_with};

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
