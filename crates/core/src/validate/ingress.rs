//! Ingress (`networking.k8s.io/v1`) and IngressClass rules: hosts (single-label wildcards allowed),
//! paths per pathType, backends (exactly one of service/resource, exactly one of port number/name),
//! TLS entries, and the class annotation/field rules of the Ingress v1 design.
//!
//! The helpers [`ingress_class`], [`is_default_class`] and [`PathType`] are shared with the Ingress
//! processor in `dag::ingress`, so admission and status read an object the same way.

use std::fmt;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, Ingress, IngressBackend, IngressClass, IngressRule, IngressTLS,
    ServiceBackendPort,
};

use super::common::{
    validate_dns1035_label, validate_dns1123_subdomain, validate_hostname, validate_path,
};
use super::{FieldError, Verdict, quote};

/// The deprecated annotation selecting an Ingress's class. It beats `spec.ingressClassName`.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The warning for an Ingress that names its class in [`CLASS_ANNOTATION`] only, written out:
/// every full build checks every Ingress, and many still use the annotation.
const CLASS_ANNOTATION_DEPRECATED: &str = "metadata.annotations[\"kubernetes.io/ingress.class\"] is deprecated; use spec.ingressClassName";
/// The IngressClass annotation marking the class Ingresses without a class belong to.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// Longest accepted `spec.controller` of an IngressClass.
pub const MAX_CONTROLLER_LEN: usize = 250;

/// How an Ingress path is matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathType {
    /// The request path equals the path.
    Exact,
    /// Segment-wise prefix; a trailing `/` in the path is ignored.
    Prefix,
    /// sluice's interpretation: a plain string prefix (`/foo` also matches `/foobar`).
    ImplementationSpecific,
}

impl PathType {
    /// The accepted values of `pathType`, as the API spells them.
    pub const NAMES: [&'static str; 3] = ["Exact", "Prefix", "ImplementationSpecific"];

    /// Parses `pathType`; an absent (empty) value is `ImplementationSpecific`, unknown values None.
    pub fn parse(value: &str) -> Option<PathType> {
        match value {
            "Exact" => Some(PathType::Exact),
            "Prefix" => Some(PathType::Prefix),
            "ImplementationSpecific" | "" => Some(PathType::ImplementationSpecific),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PathType::Exact => "Exact",
            PathType::Prefix => "Prefix",
            PathType::ImplementationSpecific => "ImplementationSpecific",
        }
    }
}

fn non_empty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|s| !s.is_empty())
}

fn class_annotation(o: &Ingress) -> Option<&str> {
    non_empty(o.metadata.annotations.as_ref()?.get(CLASS_ANNOTATION))
}

/// `spec.ingressClassName`, when set and not empty.
pub fn class_field(o: &Ingress) -> Option<&str> {
    non_empty(o.spec.as_ref()?.ingress_class_name.as_ref())
}

/// The class an Ingress asks for: the `kubernetes.io/ingress.class` annotation beats
/// `spec.ingressClassName`; empty values count as unset. None when neither is set.
pub fn ingress_class(o: &Ingress) -> Option<&str> {
    class_annotation(o).or_else(|| class_field(o))
}

/// Whether an IngressClass carries `ingressclass.kubernetes.io/is-default-class: "true"`.
pub fn is_default_class(c: &IngressClass) -> bool {
    c.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// When an Ingress's class annotation and `spec.ingressClassName` name different classes: what
/// its status warns (seed 001: the annotation takes priority; a controller may warn).
pub fn class_conflict(o: &Ingress) -> Option<String> {
    match (class_annotation(o), class_field(o)) {
        (Some(annotation), Some(field)) if annotation != field => Some(format!(
            "metadata.annotations[{CLASS_ANNOTATION:?}] {} and spec.ingressClassName {} disagree; the annotation takes priority, so IngressClass {} decides this Ingress; remove the annotation and keep the class you mean in spec.ingressClassName",
            quote(annotation),
            quote(field),
            quote(annotation),
        )),
        _ => None,
    }
}

/// The rules an Ingress meets only when it is created (seed 001): it names its class in
/// `spec.ingressClassName` alone, not also in the deprecated annotation. Stored Ingresses with
/// both keep being served, by the annotation's class ([`class_conflict`] warns when they differ).
pub fn validate_new_ingress(o: &Ingress) -> Vec<FieldError> {
    match (class_annotation(o), class_field(o)) {
        (Some(annotation), Some(field)) => vec![FieldError::spec(
            format!("metadata.annotations[{CLASS_ANNOTATION:?}]"),
            format!(
                "{} is set together with spec.ingressClassName {}; a new Ingress names its class in spec.ingressClassName alone: remove the annotation",
                quote(annotation),
                quote(field),
            ),
        )],
        _ => Vec::new(),
    }
}

/// The single-object rules of an Ingress.
pub fn validate_ingress(o: &Ingress) -> Verdict {
    let mut v = Verdict::default();
    if let Some(name) = o.metadata.name.as_deref() {
        push(
            &mut v,
            validate_dns1123_subdomain("metadata.name", name, "Ingress"),
        );
    }
    validate_class(&mut v, o);

    let spec = o.spec.as_ref();
    let rules = spec.and_then(|s| s.rules.as_deref()).unwrap_or(&[]);
    let default_backend = spec.and_then(|s| s.default_backend.as_ref());
    if rules.is_empty() && default_backend.is_none() {
        v.error(FieldError::spec(
            "spec",
            "routes nothing; set spec.rules with http paths or spec.defaultBackend",
        ));
    }
    if let Some(backend) = default_backend {
        validate_backend(&mut v, "spec.defaultBackend", backend);
    }
    for (i, rule) in rules.iter().enumerate() {
        validate_rule(&mut v, i, rule, default_backend.is_some());
    }
    let tls = spec.and_then(|s| s.tls.as_deref()).unwrap_or(&[]);
    for (i, tls) in tls.iter().enumerate() {
        validate_tls(&mut v, i, tls);
    }
    v
}

/// How an Ingress names its class: a warning for the deprecated annotation (naming the conflict
/// when `spec.ingressClassName` disagrees with it), and a valid IngressClass name in the field.
fn validate_class(v: &mut Verdict, o: &Ingress) {
    if class_annotation(o).is_some() {
        match class_conflict(o) {
            Some(conflict) => v.warn(conflict),
            None => v.warn(CLASS_ANNOTATION_DEPRECATED),
        }
    }
    if let Some(class) = class_field(o) {
        push(
            v,
            validate_dns1123_subdomain("spec.ingressClassName", class, "IngressClass"),
        );
    }
}

/// `spec.rules[i]`: a valid host when set, and http paths, each valid (a rule may have none only
/// when the Ingress has a default backend).
fn validate_rule(v: &mut Verdict, i: usize, rule: &IngressRule, has_default_backend: bool) {
    if let Some(host) = non_empty(rule.host.as_ref()) {
        push(
            v,
            validate_ingress_host(format_args!("spec.rules[{i}].host"), host),
        );
    }
    match &rule.http {
        None if !has_default_backend => v.error(FieldError::required(
            format!("spec.rules[{i}].http"),
            "a rule without http paths routes nothing unless the Ingress has spec.defaultBackend",
        )),
        None => {}
        Some(http) if http.paths.is_empty() => v.error(FieldError::required(
            format!("spec.rules[{i}].http.paths"),
            "list at least one path",
        )),
        Some(http) => {
            for (j, p) in http.paths.iter().enumerate() {
                validate_http_path(v, format_args!("spec.rules[{i}].http.paths[{j}]"), p);
            }
        }
    }
}

/// `spec.tls[i]`: valid hosts (a warning when there are none) and the name of its Secret, which
/// is required.
fn validate_tls(v: &mut Verdict, i: usize, tls: &IngressTLS) {
    let hosts = tls.hosts.as_deref().unwrap_or(&[]);
    if hosts.is_empty() {
        v.warn(format!(
            "spec.tls[{i}].hosts is empty; the certificate is not used"
        ));
    }
    for (j, host) in hosts.iter().enumerate() {
        push(
            v,
            validate_ingress_host(format_args!("spec.tls[{i}].hosts[{j}]"), host),
        );
    }
    let path = format_args!("spec.tls[{i}].secretName");
    match non_empty(tls.secret_name.as_ref()) {
        None => v.error(FieldError::required(
            path.to_string(),
            "sluice has no default certificate; name a kubernetes.io/tls Secret in the Ingress's namespace",
        )),
        Some(name) => push(v, validate_dns1123_subdomain(path, name, "Secret")),
    }
}

/// An Ingress host, as the API server checks it: a lower-case DNS-1123 subdomain, optionally
/// behind a leading `*.`, not an IP address.
fn validate_ingress_host(path: impl fmt::Display, host: &str) -> Result<(), FieldError> {
    validate_hostname(&path, host, true)?;
    FieldError::unless(
        !host.bytes().any(|b| b.is_ascii_uppercase()),
        path,
        host,
        format_args!(
            "must be in lower case, as the API server requires of an Ingress host: {}",
            quote(&host.to_ascii_lowercase())
        ),
    )
}

fn push(v: &mut Verdict, r: Result<(), FieldError>) {
    if let Err(e) = r {
        v.error(e);
    }
}

/// The rules of one path of a rule; `base` is its field path, written out only for a message
/// (an Ingress's paths are checked on every full build).
fn validate_http_path(v: &mut Verdict, base: impl fmt::Display + Copy, p: &HTTPIngressPath) {
    let path_type = match PathType::parse(&p.path_type) {
        Some(t) => t,
        None => {
            v.error(FieldError::invalid(
                format!("{base}.pathType"),
                &p.path_type,
                "must be one of \"Exact\", \"Prefix\", \"ImplementationSpecific\"",
            ));
            PathType::Exact
        }
    };
    if p.path_type.is_empty() {
        v.warn(format!(
            "{base}.pathType is not set; sluice treats it as ImplementationSpecific (a plain string prefix)"
        ));
    }
    if let Some(path) = non_empty(p.path.as_ref()) {
        let strict = path_type != PathType::ImplementationSpecific;
        push(v, validate_path(format_args!("{base}.path"), path, strict));
    }
    validate_backend(v, format_args!("{base}.backend"), &p.backend);
}

fn validate_backend(v: &mut Verdict, base: impl fmt::Display + Copy, b: &IngressBackend) {
    match (&b.service, &b.resource) {
        (Some(_), Some(_)) => v.error(FieldError::spec(
            base.to_string(),
            "sets both service and resource; set exactly one of them",
        )),
        (None, None) => v.error(FieldError::spec(
            base.to_string(),
            "sets neither service nor resource; set exactly one of them (sluice supports service)",
        )),
        (None, Some(_)) => v.warn(format!(
            "{base}.resource: resource backends are not supported by sluice; requests for this backend get 503"
        )),
        (Some(svc), None) => {
            push(
                v,
                validate_dns1035_label(format_args!("{base}.service.name"), &svc.name, "Service"),
            );
            validate_service_port(v, format_args!("{base}.service.port"), svc.port.as_ref());
        }
    }
}

fn validate_service_port(
    v: &mut Verdict,
    base: impl fmt::Display + Copy,
    port: Option<&ServiceBackendPort>,
) {
    let number = port.and_then(|p| p.number);
    let name = port.and_then(|p| non_empty(p.name.as_ref()));
    match (number, name) {
        (None, None) => v.error(FieldError::required(
            base.to_string(),
            "set port.number (1-65535) or port.name",
        )),
        (Some(_), Some(_)) => v.error(FieldError::spec(
            base.to_string(),
            "sets both number and name; set exactly one of them",
        )),
        (Some(n), None) => {
            if !(1..=65535).contains(&n) {
                v.error(FieldError::spec(
                    format!("{base}.number"),
                    format!("{n} must be a port number between 1 and 65535"),
                ));
            }
        }
        (None, Some(name)) => push(v, validate_iana_svc_name(format_args!("{base}.name"), name)),
    }
}

/// A port name (IANA_SVC_NAME): at most 15 characters, lowercase letters, digits and '-', at least
/// one letter, no '-' at either end and no "--".
pub fn validate_iana_svc_name(path: impl fmt::Display, value: &str) -> Result<(), FieldError> {
    let ok = !value.is_empty()
        && value.len() <= 15
        && value
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && value.bytes().any(|c| c.is_ascii_lowercase())
        && !value.starts_with('-')
        && !value.ends_with('-')
        && !value.contains("--");
    FieldError::unless(
        ok,
        path,
        value,
        "must be a port name: at most 15 characters, lowercase letters, digits and '-', at least one letter, no '-' at either end and no \"--\"",
    )
}

/// The single-object rules of an IngressClass.
pub fn validate_ingress_class(o: &IngressClass) -> Verdict {
    let mut v = Verdict::default();
    let controller = o
        .spec
        .as_ref()
        .and_then(|s| non_empty(s.controller.as_ref()));
    match controller {
        None => v.error(FieldError::required(
            "spec.controller",
            "name the controller as a domain-prefixed path, e.g. \"sluice.dev/ingress-controller\"",
        )),
        Some(c) => push(&mut v, validate_domain_prefixed_path("spec.controller", c)),
    }
    if let Some(value) = o
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        && value != "true"
        && value != "false"
    {
        v.error(FieldError::invalid(
            format!("metadata.annotations[{DEFAULT_CLASS_ANNOTATION:?}]"),
            value,
            "must be \"true\" or \"false\"",
        ));
    }
    v
}

/// A domain-prefixed path such as `sluice.dev/ingress-controller`: a DNS subdomain, `/`, and a
/// non-empty path of URL-safe characters; at most [`MAX_CONTROLLER_LEN`] characters.
pub fn validate_domain_prefixed_path(path: &str, value: &str) -> Result<(), FieldError> {
    if value.len() > MAX_CONTROLLER_LEN {
        return Err(FieldError::spec(
            path,
            format!(
                "{} is longer than the {MAX_CONTROLLER_LEN} characters allowed",
                quote(value)
            ),
        ));
    }
    let path_char = |c: u8| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c);
    let ok = match value.split_once('/') {
        Some((domain, rest)) => {
            validate_dns1123_subdomain(path, domain, "domain").is_ok()
                && !rest.is_empty()
                && rest.bytes().all(path_char)
        }
        None => false,
    };
    FieldError::unless(
        ok,
        path,
        value,
        "must be a domain-prefixed path such as \"sluice.dev/ingress-controller\" (a lowercase DNS name, '/', then a path)",
    )
}

#[cfg(test)]
#[path = "ingress_tests.rs"]
mod tests;
