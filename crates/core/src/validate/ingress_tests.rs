//! Unit tests of the Ingress and IngressClass rules.

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
    let ok =
        mk_class("metadata: {name: sluice}\nspec: {controller: sluice.dev/ingress-controller}\n");
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

#[test]
fn a_tls_entry_needs_a_secret_and_warns_without_hosts() {
    let mut v = Verdict::default();
    validate_tls(&mut v, 1, &IngressTLS::default());
    assert_eq!(
        v.warnings,
        vec!["spec.tls[1].hosts is empty; the certificate is not used"]
    );
    let e: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("spec.tls[1].secretName: is required"),
        "{e:?}"
    );
}

#[test]
fn a_rule_without_paths_needs_a_default_backend() {
    let rule = IngressRule {
        host: Some("a.example.com".into()),
        http: None,
    };
    let mut v = Verdict::default();
    validate_rule(&mut v, 0, &rule, true);
    assert!(v.allowed());
    validate_rule(&mut v, 0, &rule, false);
    let e: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("spec.rules[0].http: is required"), "{e:?}");
}
