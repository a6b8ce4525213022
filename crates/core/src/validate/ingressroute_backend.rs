//! The backends of an IngressRoute `projectcontour.io/v1` route: each names one Service under
//! one protocol key, TLS backends may verify the certificate they are served, and tcp backends
//! proxy a TLS root's whole stream.

use std::fmt;

use super::{
    RouteAt, check, check_service_count, found, v1_backends_field, validate_health_check,
    validate_port, validate_weight,
};
use crate::api::contour_v1::{self, Backend, BackendProtocol};
use crate::validate::common::{
    validate_dns1035_label, validate_dns1123_subdomain, validate_hostname,
};
use crate::validate::{FieldError, Verdict, quote};

/// Where a v1 route sends its requests: `backends` (or its alias `services`, never both) or a
/// delegate, exactly one of the two; at most [`super::MAX_SERVICES_PER_ROUTE`] backends, each valid.
/// `ns`: the IngressRoute's namespace, when it names one.
pub(super) fn validate_v1_backends(
    v: &mut Verdict,
    i: usize,
    r: &contour_v1::Route,
    ns: Option<&str>,
) {
    let at = RouteAt(i);
    if !r.backends.is_empty() && !r.services.is_empty() {
        v.error(FieldError::spec(
            at.to_string(),
            "has both backends and services (services is an alias of backends); use backends only",
        ));
    }
    let list = r.backend_list();
    match (&r.delegate, list.is_empty()) {
        (None, true) => v.error(FieldError::spec(
            at.to_string(),
            "must have backends or a delegate",
        )),
        (Some(_), false) => v.error(FieldError::spec(
            at.to_string(),
            "must have backends or a delegate, not both",
        )),
        _ => {}
    }
    let field = v1_backends_field(r);
    check_service_count(v, format_args!("{at}.{field}"), list.len());
    for (j, b) in list.iter().enumerate() {
        validate_backend(v, format_args!("{at}.{field}[{j}]"), b, ns);
    }
}

/// The protocol keys set on a backend.
fn protocol_keys(b: &Backend) -> Vec<(&'static str, &str)> {
    [
        ("http", &b.http),
        ("https", &b.https),
        ("http2", &b.http2),
        ("h2c", &b.h2c),
        ("https2", &b.https2),
        ("h2", &b.h2),
        ("tcp", &b.tcp),
    ]
    .into_iter()
    .filter_map(|(k, n)| n.as_deref().map(|n| (k, n)))
    .collect()
}

/// One v1 backend; `ns`: the IngressRoute's namespace, when it names one.
fn validate_backend(
    v: &mut Verdict,
    path: impl fmt::Display + Copy,
    b: &Backend,
    ns: Option<&str>,
) {
    let keys = protocol_keys(b);
    match keys.as_slice() {
        [(key, name)] => {
            check(
                v,
                validate_dns1035_label(format_args!("{path}.{key}"), name, "Service"),
            );
            validate_backend_tls(v, path, (key, name), b, ns);
        }
        _ => {
            let names: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
            v.error(FieldError::spec(
                path.to_string(),
                format!(
                    "must name its Service under exactly one protocol key: http, https, http2, h2c, https2, h2 or tcp (found {})",
                    found(&names)
                ),
            ));
        }
    }
    check(v, validate_port(format_args!("{path}.port"), b.port));
    validate_weight(v, path, b.weight);
    if let Some(h) = &b.health_check {
        validate_health_check(v, &format!("{path}.healthCheck"), h);
    }
}

/// A backend's `validation` (docs/ingressroute.md, "Secure backends"): on TLS backends only, a
/// CA Secret of the IngressRoute's own namespace and a DNS subject name. A TLS backend without
/// it gets an admission warning: its certificate is not verified.
fn validate_backend_tls(
    v: &mut Verdict,
    path: impl fmt::Display + Copy,
    (key, name): (&str, &str),
    b: &Backend,
    ns: Option<&str>,
) {
    let tls = b.protocol_and_name().is_some_and(|(p, _)| p.is_tls());
    let Some(val) = &b.validation else {
        if tls {
            let ns = ns.filter(|n| !n.is_empty()).unwrap_or("<namespace>");
            v.warn(format!(
                "{path}: the certificate of {key} backend {} is not verified (Envoy sends SNI {name}.{ns}.svc and accepts any certificate); add validation: {{caSecret, subjectName}} to verify it",
                quote(name)
            ));
        }
        return;
    };
    if !tls {
        v.error(FieldError::spec(
            format!("{path}.validation"),
            format!(
                "is for TLS backends only, and {key} backend {} is reached without TLS; name the Service under https or https2 to verify its certificate, or remove validation",
                quote(name)
            ),
        ));
        return;
    }
    let ca = format!("{path}.validation.caSecret");
    if val.ca_secret.contains('/') {
        v.error(FieldError::invalid(
            ca,
            &val.ca_secret,
            "must name a Secret in the IngressRoute's own namespace (no namespace/ prefix): copy the CA's ca.crt into a Secret of this namespace",
        ));
    } else {
        check(v, validate_dns1123_subdomain(ca, &val.ca_secret, "Secret"));
    }
    let subject = format!("{path}.validation.subjectName");
    if validate_hostname(&subject, &val.subject_name, false).is_err() {
        v.error(FieldError::invalid(
            subject,
            &val.subject_name,
            "must be the DNS name the backend's certificate carries, like \"api.web.svc\" (letters, digits, '-' and '.'; no wildcard, no port, no IP address: it is also sent as SNI)",
        ));
    }
}

/// TCP proxying: only on a TLS root, in a route matching everything, with nothing but tcp backends.
pub(super) fn validate_tcp_route(v: &mut Verdict, o: &contour_v1::IngressRoute, i: usize) {
    let r = &o.spec.routes[i];
    let list = r.backend_list();
    let field = v1_backends_field(r);
    let protocol = |b: &Backend| b.protocol_and_name().map(|(p, _)| p);
    let Some(j) = list
        .iter()
        .position(|b| protocol(b) == Some(BackendProtocol::Tcp))
    else {
        return;
    };
    let tls_root = o
        .spec
        .virtualhost
        .as_ref()
        .is_some_and(|vh| vh.tls.is_some());
    if !tls_root {
        v.error(FieldError::spec(
            format!("spec.routes[{i}].{field}[{j}].tcp"),
            "tcp backends are only allowed on a root IngressRoute with spec.virtualhost.tls (the TCP stream is proxied after TLS termination)",
        ));
    }
    let everything = r.match_.as_ref().is_none_or(|m| {
        m.headers.is_empty()
            && m.path
                .as_deref()
                .is_none_or(|p| p.trim_end_matches('/').is_empty())
    });
    if !everything {
        v.error(FieldError::spec(
            format!("spec.routes[{i}].match"),
            "a route with tcp backends must match everything (no match, or path \"/\" without headers)",
        ));
    }
    if list
        .iter()
        .any(|b| protocol(b).is_some_and(|p| p != BackendProtocol::Tcp))
    {
        v.error(FieldError::spec(
            format!("spec.routes[{i}].{field}"),
            "tcp backends cannot be mixed with backends of other protocols in one route",
        ));
    }
}
