//! Ingress (`networking.k8s.io/v1`) and IngressClass rules: hosts (single-label wildcards allowed),
//! paths per pathType, backends (exactly one of service/resource, exactly one of port number/name),
//! TLS entries, and the class annotation/field rules of the Ingress v1 design.
//!
//! The helpers [`ingress_class`], [`is_default_class`] and [`PathType`] are shared with the Ingress
//! processor in `dag::ingress`, so admission and status read an object the same way.

use std::fmt;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, Ingress, IngressBackend, IngressClass, ServiceBackendPort,
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
    if class_annotation(o).is_some() {
        match class_conflict(o) {
            Some(conflict) => v.warn(conflict),
            None => v.warn(CLASS_ANNOTATION_DEPRECATED),
        }
    }
    if let Some(class) = class_field(o) {
        push(
            &mut v,
            validate_dns1123_subdomain("spec.ingressClassName", class, "IngressClass"),
        );
    }

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
        if let Some(host) = non_empty(rule.host.as_ref()) {
            push(
                &mut v,
                validate_ingress_host(format_args!("spec.rules[{i}].host"), host),
            );
        }
        match &rule.http {
            None if default_backend.is_none() => v.error(FieldError::required(
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
                    validate_http_path(&mut v, format_args!("spec.rules[{i}].http.paths[{j}]"), p);
                }
            }
        }
    }

    for (i, tls) in spec
        .and_then(|s| s.tls.as_deref())
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let hosts = tls.hosts.as_deref().unwrap_or(&[]);
        if hosts.is_empty() {
            v.warn(format!(
                "spec.tls[{i}].hosts is empty; the certificate is not used"
            ));
        }
        for (j, host) in hosts.iter().enumerate() {
            push(
                &mut v,
                validate_ingress_host(format_args!("spec.tls[{i}].hosts[{j}]"), host),
            );
        }
        let path = format_args!("spec.tls[{i}].secretName");
        match non_empty(tls.secret_name.as_ref()) {
            None => v.error(FieldError::required(
                path.to_string(),
                "sluice has no default certificate; name a kubernetes.io/tls Secret in the Ingress's namespace",
            )),
            Some(name) => push(&mut v, validate_dns1123_subdomain(path, name, "Secret")),
        }
    }
    v
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
mod tests {
    use super::*;
    use crate::api::status::reason;

    fn mk_ingress(yaml: &str) -> Ingress {
        serde_norway::from_str(yaml).expect("test Ingress parses")
    }

    /// An Ingress in `default` with the given spec (YAML, indented under `spec:`).
    fn mk_spec(spec: &str) -> Ingress {
        mk_ingress(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: x}}\nspec:\n{spec}"
        ))
    }

    fn mk_class(yaml: &str) -> IngressClass {
        serde_norway::from_str(yaml).expect("test IngressClass parses")
    }

    fn errors(v: &Verdict) -> Vec<String> {
        v.errors.iter().map(|e| e.to_string()).collect()
    }

    /// A valid one-path Ingress with the path's fields replaced.
    fn mk_path(path: &str, path_type: &str, backend: &str) -> Ingress {
        mk_spec(&format!(
            "  rules:\n  - host: foo.com\n    http:\n      paths:\n      - path: {path}\n        pathType: {path_type}\n        backend: {backend}\n"
        ))
    }

    const SVC: &str = "{service: {name: web, port: {number: 80}}}";

    #[test]
    fn valid_ingress_passes() {
        let v = validate_ingress(&mk_spec(
            "  ingressClassName: sluice\n  defaultBackend: {service: {name: web, port: {name: http}}}\n  tls: [{hosts: [foo.com, \"*.foo.com\"], secretName: foo-tls}]\n  rules:\n  - host: \"*.foo.com\"\n    http:\n      paths:\n      - {path: /a, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /b/, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n      - {path: /c, pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}\n  - http:\n      paths:\n      - {pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n",
        ));
        assert_eq!(errors(&v), Vec::<String>::new());
        assert_eq!(v.warnings, Vec::<String>::new());
    }

    #[test]
    fn rule_host_must_be_a_dns_name_or_single_wildcard() {
        for bad in ["\"*\"", "foo.com:80", "a.*.com", "10.0.0.1"] {
            let v = validate_ingress(&mk_spec(&format!(
                "  rules:\n  - host: {bad}\n    http: {{paths: [{{path: /, pathType: Prefix, backend: {SVC}}}]}}\n"
            )));
            let value: String = serde_norway::from_str(bad).unwrap();
            assert_eq!(
                errors(&v),
                vec![format!(
                    "spec.rules[0].host: {value:?} must be a DNS name like \"www.example.com\" or \"*.example.com\" (lowercase letters, digits, '-' and '.'; no port, no IP address)"
                )]
            );
        }
    }

    #[test]
    fn tls_hosts_and_secret() {
        let v = validate_ingress(&mk_spec(&format!(
            "  defaultBackend: {SVC}\n  tls:\n  - {{hosts: [\"*\"], secretName: Foo_TLS}}\n  - {{hosts: [foo.com]}}\n  - {{secretName: unused}}\n"
        )));
        assert_eq!(
            errors(&v),
            vec![
                "spec.tls[0].hosts[0]: \"*\" must be a DNS name like \"www.example.com\" or \"*.example.com\" (lowercase letters, digits, '-' and '.'; no port, no IP address)",
                "spec.tls[0].secretName: \"Foo_TLS\" must be a valid Secret name: lowercase letters, digits, '-' and '.', at most 253 characters",
                "spec.tls[1].secretName: is required; sluice has no default certificate; name a kubernetes.io/tls Secret in the Ingress's namespace",
            ]
        );
        assert_eq!(
            v.warnings,
            vec!["spec.tls[2].hosts is empty; the certificate is not used"]
        );
    }

    #[test]
    fn path_rules_depend_on_path_type() {
        let v = validate_ingress(&mk_path("/a//b", "Prefix", SVC));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http.paths[0].path: \"/a//b\" must not contain consecutive \"/\" characters"
            ]
        );
        let v = validate_ingress(&mk_path("/a//b", "Exact", SVC));
        assert_eq!(v.errors.len(), 1);
        // ImplementationSpecific paths may hold "//".
        let v = validate_ingress(&mk_path("/a//b", "ImplementationSpecific", SVC));
        assert_eq!(errors(&v), Vec::<String>::new());
        let v = validate_ingress(&mk_path("foo", "ImplementationSpecific", SVC));
        assert_eq!(
            errors(&v),
            vec!["spec.rules[0].http.paths[0].path: \"foo\" must start with \"/\""]
        );
    }

    #[test]
    fn path_type_must_be_known() {
        let v = validate_ingress(&mk_path("/a", "Regex", SVC));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http.paths[0].pathType: \"Regex\" must be one of \"Exact\", \"Prefix\", \"ImplementationSpecific\""
            ]
        );
    }

    #[test]
    fn absent_path_type_is_a_warning() {
        let v = validate_ingress(&mk_spec(&format!(
            "  rules:\n  - http: {{paths: [{{path: /a, backend: {SVC}}}]}}\n"
        )));
        assert_eq!(errors(&v), Vec::<String>::new());
        assert_eq!(
            v.warnings,
            vec![
                "spec.rules[0].http.paths[0].pathType is not set; sluice treats it as ImplementationSpecific (a plain string prefix)"
            ]
        );
    }

    #[test]
    fn backend_needs_exactly_one_of_service_and_resource() {
        let both = "{service: {name: web, port: {number: 80}}, resource: {kind: Bucket, name: b}}";
        let v = validate_ingress(&mk_path("/", "Prefix", both));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http.paths[0].backend: sets both service and resource; set exactly one of them"
            ]
        );
        let v = validate_ingress(&mk_path("/", "Prefix", "{}"));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http.paths[0].backend: sets neither service nor resource; set exactly one of them (sluice supports service)"
            ]
        );
        let v = validate_ingress(&mk_path(
            "/",
            "Prefix",
            "{resource: {kind: Bucket, name: b}}",
        ));
        assert_eq!(errors(&v), Vec::<String>::new());
        assert_eq!(
            v.warnings,
            vec![
                "spec.rules[0].http.paths[0].backend.resource: resource backends are not supported by sluice; requests for this backend get 503"
            ]
        );
    }

    #[test]
    fn service_name_is_a_dns1035_label() {
        let v = validate_ingress(&mk_path(
            "/",
            "Prefix",
            "{service: {name: 2web, port: {number: 80}}}",
        ));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http.paths[0].backend.service.name: \"2web\" must be the name of a Service in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters"
            ]
        );
    }

    #[test]
    fn service_port_needs_exactly_one_of_number_and_name() {
        let check = |backend: &str, want: &str| {
            let v = validate_ingress(&mk_spec(&format!("  defaultBackend: {backend}\n")));
            assert_eq!(errors(&v), vec![want.to_string()], "{backend}");
        };
        check(
            "{service: {name: web}}",
            "spec.defaultBackend.service.port: is required; set port.number (1-65535) or port.name",
        );
        check(
            "{service: {name: web, port: {}}}",
            "spec.defaultBackend.service.port: is required; set port.number (1-65535) or port.name",
        );
        check(
            "{service: {name: web, port: {number: 80, name: http}}}",
            "spec.defaultBackend.service.port: sets both number and name; set exactly one of them",
        );
        check(
            "{service: {name: web, port: {number: 0}}}",
            "spec.defaultBackend.service.port.number: 0 must be a port number between 1 and 65535",
        );
        check(
            "{service: {name: web, port: {number: 65536}}}",
            "spec.defaultBackend.service.port.number: 65536 must be a port number between 1 and 65535",
        );
        let name_msg = "must be a port name: at most 15 characters, lowercase letters, digits and '-', at least one letter, no '-' at either end and no \"--\"";
        for bad in ["HTTP", "8080", "a-very-long-port-name", "-http", "ht--tp"] {
            check(
                &format!("{{service: {{name: web, port: {{name: {bad:?}}}}}}}"),
                &format!("spec.defaultBackend.service.port.name: {bad:?} {name_msg}"),
            );
        }
        for good in ["http", "h2c", "web-8080", "a"] {
            assert!(validate_iana_svc_name("p", good).is_ok(), "{good}");
        }
    }

    #[test]
    fn an_ingress_must_route_something() {
        let v = validate_ingress(&mk_spec("  tls: [{hosts: [foo.com], secretName: s}]\n"));
        assert_eq!(
            errors(&v),
            vec!["spec: routes nothing; set spec.rules with http paths or spec.defaultBackend"]
        );
        let v = validate_ingress(&mk_spec("  rules: [{host: foo.com}]\n"));
        assert_eq!(
            errors(&v),
            vec![
                "spec.rules[0].http: is required; a rule without http paths routes nothing unless the Ingress has spec.defaultBackend"
            ]
        );
        // With a defaultBackend, a host-only rule sends that host to the default backend.
        let v = validate_ingress(&mk_spec(&format!(
            "  defaultBackend: {SVC}\n  rules: [{{host: foo.com}}]\n"
        )));
        assert_eq!(errors(&v), Vec::<String>::new());
        let v = validate_ingress(&mk_spec(&format!(
            "  defaultBackend: {SVC}\n  rules: [{{host: foo.com, http: {{paths: []}}}}]\n"
        )));
        assert_eq!(
            errors(&v),
            vec!["spec.rules[0].http.paths: is required; list at least one path"]
        );
    }

    #[test]
    fn class_annotation_and_field_together_are_refused_only_when_created() {
        let both = |annotation: &str, field: &str| {
            mk_ingress(&format!(
                "metadata:\n  name: x\n  annotations: {{kubernetes.io/ingress.class: {annotation}}}\nspec:\n  ingressClassName: {field}\n  defaultBackend: {SVC}\n"
            ))
        };
        // A new Ingress: refused, saying to keep the field alone.
        let created = validate_new_ingress(&both("sluice", "sluice"));
        assert_eq!(
            created.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![
                "metadata.annotations[\"kubernetes.io/ingress.class\"]: \"sluice\" is set together with spec.ingressClassName \"sluice\"; a new Ingress names its class in spec.ingressClassName alone: remove the annotation"
            ]
        );
        assert_eq!(created[0].reason, reason::INVALID_SPEC);
        // A stored one: valid (served by the annotation's class), with a warning.
        let same = validate_ingress(&both("sluice", "sluice"));
        assert_eq!(errors(&same), Vec::<String>::new());
        assert_eq!(same.warnings, vec![CLASS_ANNOTATION_DEPRECATED]);
        assert_eq!(class_conflict(&both("sluice", "sluice")), None);
        let differ = validate_ingress(&both("sluice", "nginx"));
        assert_eq!(errors(&differ), Vec::<String>::new());
        let conflict = class_conflict(&both("sluice", "nginx")).unwrap();
        assert_eq!(differ.warnings, vec![conflict.clone()]);
        assert!(
            conflict.starts_with(
                "metadata.annotations[\"kubernetes.io/ingress.class\"] \"sluice\" and spec.ingressClassName \"nginx\" disagree; the annotation takes priority"
            ),
            "{conflict}"
        );
        // Only the annotation, or only the field: nothing to refuse.
        assert!(
            validate_new_ingress(&mk_spec(&format!(
                "  ingressClassName: sluice\n  defaultBackend: {SVC}\n"
            )))
            .is_empty()
        );
    }

    #[test]
    fn class_annotation_alone_is_deprecated() {
        let o = mk_ingress(&format!(
            "metadata:\n  name: x\n  annotations: {{kubernetes.io/ingress.class: sluice}}\nspec:\n  defaultBackend: {SVC}\n"
        ));
        let v = validate_ingress(&o);
        assert_eq!(errors(&v), Vec::<String>::new());
        assert_eq!(
            v.warnings,
            vec![
                "metadata.annotations[\"kubernetes.io/ingress.class\"] is deprecated; use spec.ingressClassName"
            ]
        );
        // The warning names the annotation the code reads.
        assert_eq!(
            CLASS_ANNOTATION_DEPRECATED,
            format!(
                "metadata.annotations[{CLASS_ANNOTATION:?}] is deprecated; use spec.ingressClassName"
            )
        );
        assert_eq!(ingress_class(&o), Some("sluice"));
    }

    #[test]
    fn class_field_is_an_object_name() {
        let v = validate_ingress(&mk_spec(&format!(
            "  ingressClassName: Sluice\n  defaultBackend: {SVC}\n"
        )));
        assert_eq!(
            errors(&v),
            vec![
                "spec.ingressClassName: \"Sluice\" must be a valid IngressClass name: lowercase letters, digits, '-' and '.', at most 253 characters"
            ]
        );
    }

    #[test]
    fn annotation_beats_field_when_choosing_the_class() {
        let o = mk_ingress(
            "metadata:\n  name: x\n  annotations: {kubernetes.io/ingress.class: nginx}\nspec: {ingressClassName: sluice}\n",
        );
        assert_eq!(ingress_class(&o), Some("nginx"));
        let o = mk_ingress(
            "metadata:\n  name: x\n  annotations: {kubernetes.io/ingress.class: \"\"}\nspec: {ingressClassName: sluice}\n",
        );
        assert_eq!(ingress_class(&o), Some("sluice"));
        assert_eq!(ingress_class(&mk_spec("  {}\n")), None);
    }

    #[test]
    fn ingress_class_controller_is_a_domain_prefixed_path() {
        let ok = mk_class(
            "metadata: {name: sluice}\nspec: {controller: sluice.dev/ingress-controller}\n",
        );
        assert_eq!(errors(&validate_ingress_class(&ok)), Vec::<String>::new());
        let want = "must be a domain-prefixed path such as \"sluice.dev/ingress-controller\" (a lowercase DNS name, '/', then a path)";
        for bad in [
            "sluice",
            "sluice.dev/",
            "/ingress",
            "Sluice.dev/x",
            "sluice.dev/a b",
        ] {
            let c = mk_class(&format!(
                "metadata: {{name: sluice}}\nspec: {{controller: {bad:?}}}\n"
            ));
            assert_eq!(
                errors(&validate_ingress_class(&c)),
                vec![format!("spec.controller: {bad:?} {want}")]
            );
        }
        let long = format!("sluice.dev/{}", "a".repeat(250));
        assert_eq!(
            validate_domain_prefixed_path("spec.controller", &long)
                .unwrap_err()
                .message,
            format!("{} is longer than the 250 characters allowed", quote(&long))
        );
        let none = mk_class("metadata: {name: sluice}\nspec: {}\n");
        assert_eq!(
            errors(&validate_ingress_class(&none)),
            vec![
                "spec.controller: is required; name the controller as a domain-prefixed path, e.g. \"sluice.dev/ingress-controller\""
            ]
        );
    }

    #[test]
    fn default_class_annotation_is_a_boolean() {
        let c = mk_class(
            "metadata:\n  name: sluice\n  annotations: {ingressclass.kubernetes.io/is-default-class: \"yes\"}\nspec: {controller: sluice.dev/ingress-controller}\n",
        );
        assert_eq!(
            errors(&validate_ingress_class(&c)),
            vec![
                "metadata.annotations[\"ingressclass.kubernetes.io/is-default-class\"]: \"yes\" must be \"true\" or \"false\""
            ]
        );
        assert!(!is_default_class(&c));
        let c = mk_class(
            "metadata:\n  name: sluice\n  annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}\nspec: {controller: sluice.dev/ingress-controller}\n",
        );
        assert_eq!(errors(&validate_ingress_class(&c)), Vec::<String>::new());
        assert!(is_default_class(&c));
    }

    #[test]
    fn path_type_parsing() {
        assert_eq!(PathType::parse("Exact"), Some(PathType::Exact));
        assert_eq!(PathType::parse("Prefix"), Some(PathType::Prefix));
        assert_eq!(PathType::parse(""), Some(PathType::ImplementationSpecific));
        assert_eq!(PathType::parse("prefix"), None);
        for n in PathType::NAMES {
            assert_eq!(PathType::parse(n).map(PathType::as_str), Some(n));
        }
    }
}
