//! Unit tests of the IngressRoute single-object rules: one per rule, each asserting the exact message.

use super::*;
use crate::api::contour_v1::IngressRouteSpec as V1Spec;
use crate::api::heptio_v1beta1::IngressRouteSpec as BetaSpec;

fn mk_beta(yaml: &str) -> heptio_v1beta1::IngressRoute {
    let spec: BetaSpec = serde_norway::from_str(yaml).expect("test spec parses");
    heptio_v1beta1::IngressRoute::new("ir", spec)
}

fn mk_v1(yaml: &str) -> contour_v1::IngressRoute {
    let spec: V1Spec = serde_norway::from_str(yaml).expect("test spec parses");
    contour_v1::IngressRoute::new("ir", spec)
}

fn beta_errors(yaml: &str) -> Vec<String> {
    validate_v1beta1(&mk_beta(yaml))
        .errors
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn v1_errors(yaml: &str) -> Vec<String> {
    validate_v1(&mk_v1(yaml))
        .errors
        .iter()
        .map(|e| e.to_string())
        .collect()
}

/// A v1beta1 spec whose first route has these extra lines (indented as route fields).
fn beta_route(fields: &str) -> String {
    format!("routes:\n- match: /\n{fields}")
}

const SVC: &str = "  services: [{name: app, port: 80}]\n";

#[test]
fn seed_examples_are_allowed() {
    let root = r#"
virtualhost:
  fqdn: www.google.com
  tls: {secretName: google-tls, minimumProtocolVersion: "1.3"}
strategy: RoundRobin
healthCheck: {path: /healthz, intervalSeconds: 30, timeoutSeconds: 60, unhealthyThresholdCount: 3, healthyThresholdCount: 5}
routes:
- match: /static
  service:
  - {name: google-static, port: 9000}
  permitInsecure: true
- match: /finance
  delegate: {name: google-finance, namespace: finance}
- match: /ads
  service:
  - {name: ads-red, port: 9090, weight: 50, strategy: RoundRobin}
  - name: ads-blue
    port: 9090
    weight: 50
    healthCheck: {path: /healthz, host: contour-envoy-healthcheck, intervalSeconds: 30}
"#;
    let v = validate_v1beta1(&mk_beta(root));
    assert_eq!(v.errors, vec![]);
    assert_eq!(
        v.warnings,
        vec![
            "spec.routes[0].service is deprecated; use services",
            "spec.routes[2].service is deprecated; use services"
        ]
    );
    let v1 = r#"
routes:
- match:
    path: /foo
    headers: [{header: x-header, value: a}]
  delegate: {name: headera-ir, namespace: team-a}
- match:
    path: /foo
    headers: [{header: x-header, value: b}, {userAgent: Chrome}]
  delegate: {name: headerb-ir, namespace: team-b}
- match: {path: /foo}
  services: [{http: backend-default, port: 9999}]
- match:
    path: /bar
    headers: [{cookie: user=test}]
  services: [{http: cookiebackend, port: 80}]
  timeoutPolicy: {request: 1s}
  failurePolicy: {count: 3, perTryTimeout: 150ms}
"#;
    assert_eq!(validate_v1(&mk_v1(v1)), Verdict::default());
}

#[test]
fn fqdn_must_be_a_plain_dns_name() {
    let e = beta_errors(&format!(
        "virtualhost: {{fqdn: \"*.example.com\"}}\n{}",
        beta_route(SVC)
    ));
    assert_eq!(
        e,
        vec![
            "spec.virtualhost.fqdn: \"*.example.com\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)"
        ]
    );
}

#[test]
fn tls_secret_in_own_namespace() {
    let e = beta_errors(&format!(
        "virtualhost: {{fqdn: a.com, tls: {{secretName: other/cert}}}}\n{}",
        beta_route(SVC)
    ));
    assert_eq!(
        e,
        vec![
            "spec.virtualhost.tls.secretName: \"other/cert\" must name a Secret in the IngressRoute's own namespace"
        ]
    );
    let e = v1_errors(
        "virtualhost: {fqdn: a.com, tls: {secretName: Cert_1}}\nroutes: [{services: [{http: a, port: 80}]}]",
    );
    assert_eq!(
        e,
        vec![
            "spec.virtualhost.tls.secretName: \"Cert_1\" must be a valid Secret name: lowercase letters, digits, '-' and '.', at most 253 characters"
        ]
    );
}

#[test]
fn routes_must_not_be_empty() {
    assert_eq!(
        beta_errors("routes: []"),
        vec!["spec.routes: must hold at least one route"]
    );
    assert_eq!(
        v1_errors("routes: []"),
        vec!["spec.routes: must hold at least one route"]
    );
}

#[test]
fn match_must_be_a_path() {
    let e = beta_errors(&format!(
        "routes:\n- match: /a\n{SVC}- match: /b\n{SVC}- match: finance\n{SVC}"
    ));
    assert_eq!(
        e,
        vec!["spec.routes[2].match: \"finance\" must start with \"/\""]
    );
    let e = beta_errors(&format!("routes:\n- match: /a//b\n{SVC}"));
    assert_eq!(
        e,
        vec!["spec.routes[0].match: \"/a//b\" must not contain consecutive \"/\" characters"]
    );
    let e = v1_errors("routes: [{match: {path: finance}, services: [{http: a, port: 80}]}]");
    assert_eq!(
        e,
        vec!["spec.routes[0].match.path: \"finance\" must start with \"/\""]
    );
}

#[test]
fn services_or_delegate() {
    assert_eq!(
        beta_errors("routes: [{match: /}]"),
        vec!["spec.routes[0]: must have services or a delegate"]
    );
    assert_eq!(
        beta_errors(&beta_route(&format!("{SVC}  delegate: {{name: x}}\n"))),
        vec!["spec.routes[0]: must have services or a delegate, not both"]
    );
    assert_eq!(
        v1_errors("routes: [{match: {path: /}}]"),
        vec!["spec.routes[0]: must have backends or a delegate"]
    );
    assert_eq!(
        v1_errors("routes: [{services: [{http: a, port: 80}], delegate: {name: x}}]"),
        vec!["spec.routes[0]: must have backends or a delegate, not both"]
    );
}

#[test]
fn a_route_names_at_most_128_services() {
    let list = |n: usize| {
        (0..n)
            .map(|_| "{name: app, port: 80, weight: 1000000}")
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(beta_errors(&beta_route(&format!("  services: [{}]\n", list(128)))).is_empty());
    assert_eq!(
        beta_errors(&beta_route(&format!("  services: [{}]\n", list(129)))),
        vec![
            "spec.routes[0].services: holds 129 services; a route may name at most 128 (list each Service once, with its weight)"
        ]
    );
    let deprecated = beta_errors(&beta_route(&format!("  service: [{}]\n", list(129))));
    assert_eq!(
        deprecated,
        vec![
            "spec.routes[0].service: holds 129 services; a route may name at most 128 (list each Service once, with its weight)"
        ]
    );
    let v1_list = list(129).replace("name:", "http:");
    assert_eq!(
        v1_errors(&format!("routes:\n- backends: [{v1_list}]\n")),
        vec![
            "spec.routes[0].backends: holds 129 services; a route may name at most 128 (list each Service once, with its weight)"
        ]
    );
}

#[test]
fn service_names_ports_weights() {
    let e = beta_errors(&beta_route(
        "  services:\n  - {name: other/app, port: 0}\n  - {name: app, port: 70000, weight: 2000000}\n",
    ));
    assert_eq!(
        e,
        vec![
            "spec.routes[0].services[0].name: \"other/app\" must be the name of a Service in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters",
            "spec.routes[0].services[0].port: 0 must be a port number between 1 and 65535",
            "spec.routes[0].services[1].port: 70000 must be a port number between 1 and 65535",
            "spec.routes[0].services[1].weight: 2000000 must be at most 1000000",
        ]
    );
}

#[test]
fn health_checks() {
    let e = beta_errors(&format!(
        "healthCheck: {{path: healthz, host: \"a b\", intervalSeconds: 0, timeoutSeconds: 90000, unhealthyThresholdCount: 0, healthyThresholdCount: 1001}}\n{}",
        beta_route(SVC)
    ));
    assert_eq!(
        e,
        vec![
            "spec.healthCheck.path: \"healthz\" must start with \"/\"",
            "spec.healthCheck.host: \"a b\" must be a DNS name like \"www.example.com\" (lowercase letters, digits, '-' and '.'; no wildcard, no port, no IP address)",
            "spec.healthCheck.intervalSeconds: 0 must be between 1 and 86400 seconds",
            "spec.healthCheck.timeoutSeconds: 90000 must be between 1 and 86400 seconds",
            "spec.healthCheck.unhealthyThresholdCount: 0 must be between 1 and 1000",
            "spec.healthCheck.healthyThresholdCount: 1001 must be between 1 and 1000",
        ]
    );
    let e = v1_errors(
        "routes: [{services: [{http: a, port: 80, healthCheck: {path: /h, intervalSeconds: -1}}]}]",
    );
    assert_eq!(
        e,
        vec![
            "spec.routes[0].services[0].healthCheck.intervalSeconds: -1 must be between 1 and 86400 seconds"
        ]
    );
}

#[test]
fn delegate_names() {
    let e = beta_errors(&beta_route(
        "  delegate: {name: Finance, namespace: team.a}\n",
    ));
    assert_eq!(
        e,
        vec![
            "spec.routes[0].delegate.name: \"Finance\" must be an IngressRoute name: lowercase letters, digits, '-' and '.', at most 253 characters",
            "spec.routes[0].delegate.namespace: \"team.a\" must be a valid namespace name: lowercase letters, digits and '-', at most 63 characters",
        ]
    );
}

#[test]
fn duplicate_matches_within_one_object() {
    let e = beta_errors(&format!(
        "routes:\n- match: /foo\n{SVC}- match: /foo/\n{SVC}"
    ));
    assert_eq!(
        e,
        vec![
            "spec.routes[1].match: \"/foo/\" is the same match as spec.routes[0]; a match may appear once per IngressRoute"
        ]
    );
    // The cookie shortcut is the same condition as a "cookie contains" header condition.
    let e = v1_errors(
        r#"
routes:
- match: {path: /a, headers: [{cookie: user=test}]}
  services: [{http: a, port: 80}]
- match: {path: /a/, headers: [{header: Cookie, contains: user=test}]}
  services: [{http: b, port: 80}]
- match: {path: /a, headers: [{header: x, value: "1"}]}
  services: [{http: b, port: 80}]
"#,
    );
    assert_eq!(
        e,
        vec![
            "spec.routes[1].match: is the same match as spec.routes[0]; a match may appear once per IngressRoute"
        ]
    );
}

#[test]
fn deprecated_service_field() {
    let r = mk_beta(&beta_route("  service: {name: app, port: 80, weight: 3}\n"));
    let v = validate_v1beta1(&r);
    assert_eq!(v.errors, vec![]);
    assert_eq!(
        v.warnings,
        vec!["spec.routes[0].service is deprecated; use services"]
    );
    let (services, errors) = v1beta1_services(&r.spec.routes[0], 0);
    assert!(errors.is_empty());
    assert_eq!(services.len(), 1);
    assert_eq!(services[0].0, "spec.routes[0].service");
    assert_eq!(
        (
            services[0].1.name.as_str(),
            services[0].1.port,
            services[0].1.weight
        ),
        ("app", 80, Some(3))
    );
    assert_eq!(
        beta_errors(&beta_route("  service: {name: app, port: http}\n")),
        vec!["spec.routes[0].service.port: invalid type: string \"http\", expected i32"]
    );
    assert_eq!(
        beta_errors(&beta_route(
            "  service: [{name: a, port: 80}, {name: b, port: 0}]\n"
        )),
        vec!["spec.routes[0].service[1].port: 0 must be a port number between 1 and 65535"]
    );
    assert_eq!(
        beta_errors(&beta_route("  service: [{name: a, prot: 80}]\n")),
        vec![
            "spec.routes[0].service[0].prot: is not a field of a service; a service has name, port, weight, strategy and healthCheck"
        ]
    );
    assert_eq!(
        beta_errors(&beta_route("  service: {port: 80}\n")),
        vec!["spec.routes[0].service: missing field `name`"]
    );
    assert_eq!(
        beta_errors(&beta_route(
            "  service: [{name: a, port: 80, healthCheck: {path: /h, intervalSeconds: soon}}, kuard]\n"
        )),
        vec![
            "spec.routes[0].service[0].healthCheck.intervalSeconds: invalid type: string \"soon\", expected i64",
            "spec.routes[0].service[1]: must be a service object with name and port",
        ]
    );
    assert_eq!(
        beta_errors(&beta_route("  service: kuard\n")),
        vec!["spec.routes[0].service: must be a service ({name, port}) or a list of services"]
    );
    assert_eq!(
        beta_errors(&beta_route(&format!(
            "  service: {{name: a, port: 80}}\n{SVC}"
        ))),
        vec!["spec.routes[0]: has both service and services; use services only"]
    );
    // With both fields set, each is still checked under its own path.
    assert_eq!(
        beta_errors(&beta_route(
            "  service: {name: a, port: 0}\n  services: [{name: B, port: 80}]\n"
        )),
        vec![
            "spec.routes[0]: has both service and services; use services only",
            "spec.routes[0].services[0].name: \"B\" must be the name of a Service in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters",
            "spec.routes[0].service.port: 0 must be a port number between 1 and 65535",
        ]
    );
}

#[test]
fn header_conditions() {
    let route = |cond: &str| {
        v1_errors(&format!(
            "routes: [{{match: {{path: /, headers: [{cond}]}}, services: [{{http: a, port: 80}}]}}]"
        ))
    };
    assert_eq!(
        route("{header: \"x header\", value: a}"),
        vec![
            "spec.routes[0].match.headers[0].header: \"x header\" must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~; no ':' pseudo-headers)"
        ]
    );
    assert_eq!(
        route("{header: x-a}"),
        vec![
            "spec.routes[0].match.headers[0]: header \"x-a\" needs exactly one of value, exact, contains, notContains, present, regex (found none)"
        ]
    );
    assert_eq!(
        route("{header: x-a, value: a, regex: b}"),
        vec![
            "spec.routes[0].match.headers[0]: header \"x-a\" needs exactly one of value, exact, contains, notContains, present, regex (found value, regex)"
        ]
    );
    assert_eq!(
        route("{value: a}"),
        vec![
            "spec.routes[0].match.headers[0]: must name exactly one of header, cookie, userAgent (found none)"
        ]
    );
    assert_eq!(
        route("{header: x-a, cookie: a, value: b}"),
        vec![
            "spec.routes[0].match.headers[0]: must name exactly one of header, cookie, userAgent (found header, cookie)"
        ]
    );
    assert_eq!(
        route("{cookie: a, exact: b}"),
        vec![
            "spec.routes[0].match.headers[0]: cookie takes no operator (found exact); it matches when the Cookie header contains its value"
        ]
    );
    assert_eq!(
        route("{header: x-a, contains: \"a\\nb\"}"),
        vec![
            "spec.routes[0].match.headers[0].contains: \"a\\nb\" must not contain control characters such as newlines"
        ]
    );
    assert_eq!(
        route("{userAgent: \"a\\rb\"}"),
        vec![
            "spec.routes[0].match.headers[0].userAgent: \"a\\rb\" must not contain control characters such as newlines"
        ]
    );
    assert_eq!(
        route("{header: x-a, regex: \"(a\"}"),
        vec![
            "spec.routes[0].match.headers[0].regex: \"(a\" is not a valid RE2 regular expression (error: unclosed group)"
        ]
    );
    // Envoy refuses an empty `contains`; so are the conditions built on it.
    assert_eq!(
        route("{header: x-a, contains: \"\"}"),
        vec![
            "spec.routes[0].match.headers[0].contains: \"\" must not be empty (every value contains \"\"); use present: true"
        ]
    );
    assert_eq!(
        route("{header: x-a, notContains: \"\"}"),
        vec![
            "spec.routes[0].match.headers[0].notContains: \"\" must not be empty (every value contains \"\"); use present: false"
        ]
    );
    assert_eq!(
        route("{cookie: \"\"}"),
        vec![
            "spec.routes[0].match.headers[0].cookie: \"\" must not be empty; name the cookie, like \"user=test\""
        ]
    );
    assert_eq!(
        route("{userAgent: \"\"}"),
        vec![
            "spec.routes[0].match.headers[0].userAgent: \"\" must not be empty; give part of the User-Agent, like \"Chrome\""
        ]
    );
    assert!(route("{header: x-a, exact: \"\"}").is_empty());
    // Rust's regex crate reads it; Envoy's RE2 refuses it.
    assert_eq!(
        route("{header: x-a, regex: \"v[0-9]{1200}\"}"),
        vec![
            "spec.routes[0].match.headers[0].regex: \"v[0-9]{1200}\" repeats 1200 times; RE2 (Envoy's regex engine) allows at most 1000: use a smaller count, or `+` or `*`"
        ]
    );
}

#[test]
fn header_conditions_become_matches() {
    let c: Vec<HeaderCondition> = serde_norway::from_str(
        r#"
- {cookie: user=test}
- {userAgent: Chrome}
- {header: X-Header, value: a}
- {header: x-b, present: false}
- {header: x-c, notContains: z}
- {header: x-d, regex: "v[0-9]+"}
- {header: x-e}
"#,
    )
    .unwrap();
    let got: Vec<String> = c
        .iter()
        .map(|c| v1_header_match(c).map_or("none".to_string(), |m| m.to_string()))
        .collect();
    assert_eq!(
        got,
        vec![
            "cookie~\"user=test\"",
            "user-agent~\"Chrome\"",
            "x-header=\"a\"",
            "x-b absent",
            "x-c!~\"z\"",
            "x-d=~/v[0-9]+/",
            "none"
        ]
    );
}

#[test]
fn backends() {
    assert_eq!(
        v1_errors("routes: [{backends: [{port: 80}, {http: a, tcp: b, port: 80}]}]"),
        vec![
            "spec.routes[0].backends[0]: must name its Service under exactly one protocol key: http, https, http2, h2c, https2, h2 or tcp (found none)",
            "spec.routes[0].backends[1]: must name its Service under exactly one protocol key: http, https, http2, h2c, https2, h2 or tcp (found http, tcp)",
        ]
    );
    assert_eq!(
        v1_errors("routes: [{backends: [{h2c: Kuard, port: 80, weight: 1000001}]}]"),
        vec![
            "spec.routes[0].backends[0].h2c: \"Kuard\" must be the name of a Service in the same namespace: lowercase letters, digits and '-', starting with a letter, at most 63 characters",
            "spec.routes[0].backends[0].weight: 1000001 must be at most 1000000",
        ]
    );
    assert_eq!(
        v1_errors("routes: [{backends: [{http: a, port: 80}], services: [{http: b, port: 80}]}]"),
        vec![
            "spec.routes[0]: has both backends and services (services is an alias of backends); use backends only"
        ]
    );
}

#[test]
fn timeouts_and_failure_policy() {
    assert_eq!(
        v1_errors(
            "routes: [{services: [{http: a, port: 80}], timeoutPolicy: {request: 10 seconds}, failurePolicy: {count: 101, perTryTimeout: 5}}]"
        ),
        vec![
            "spec.routes[0].timeoutPolicy.request: \"10 seconds\" must be a duration like \"1s\", \"150ms\", \"1m30s\" or \"infinity\"",
            "spec.routes[0].failurePolicy.count: 101 must be between 0 and 100",
            "spec.routes[0].failurePolicy.perTryTimeout: \"5\" must be a duration like \"1s\", \"150ms\", \"1m30s\" or \"infinity\"",
        ]
    );
}

#[test]
fn tcp_backends() {
    let ok = "virtualhost: {fqdn: a.com, tls: {secretName: s}}\nroutes: [{services: [{tcp: db, port: 5432}]}]";
    assert_eq!(v1_errors(ok), Vec::<String>::new());
    assert_eq!(
        v1_errors("routes: [{services: [{tcp: db, port: 5432}]}]"),
        vec![
            "spec.routes[0].services[0].tcp: tcp backends are only allowed on a root IngressRoute with spec.virtualhost.tls (the TCP stream is proxied after TLS termination)"
        ]
    );
    assert_eq!(
        v1_errors(
            "virtualhost: {fqdn: a.com, tls: {secretName: s}}\nroutes: [{match: {path: /db}, backends: [{http: web, port: 80}, {tcp: db, port: 5432}]}]"
        ),
        vec![
            "spec.routes[0].match: a route with tcp backends must match everything (no match, or path \"/\" without headers)",
            "spec.routes[0].backends: tcp backends cannot be mixed with backends of other protocols in one route",
        ]
    );
}

#[test]
fn a_regex_envoy_reads_byte_by_byte_gets_a_warning() {
    let warnings = |regex: &str| {
        validate_v1(&mk_v1(&format!(
            "routes:\n- match: {{headers: [{{header: x-a, regex: '{regex}'}}]}}\n  backends: [{{http: app, port: 80}}]\n"
        )))
        .warnings
    };
    assert_eq!(
        warnings(r"\p{Greek}+"),
        vec![
            r"spec.routes[0].match.headers[0].regex: Envoy matches regular expressions byte by byte (Latin-1): \p{..} classes match only characters up to \xFF, and a non-ASCII character matches its UTF-8 bytes"
        ]
    );
    assert_eq!(warnings("café").len(), 1);
    assert!(warnings("v[0-9]+").is_empty());
}

/// A v1 spec whose one route has this backend (a YAML flow mapping).
fn v1_backend(backend: &str) -> String {
    format!("routes:\n- services: [{backend}]\n")
}

#[test]
fn a_tls_backend_may_ask_for_its_certificate_to_be_verified() {
    let ok = v1_backend(
        "{https: api, port: 443, validation: {caSecret: api-ca, subjectName: api.web.svc}}",
    );
    let v = validate_v1(&mk_v1(&ok));
    assert_eq!((v.errors, v.warnings), (vec![], Vec::<String>::new()));
    let h2 = v1_backend("{https2: api, port: 443, validation: {caSecret: ca, subjectName: a.b}}");
    assert_eq!(v1_errors(&h2), Vec::<String>::new());
    assert_eq!(
        v1_errors(&v1_backend(
            "{h2: api, port: 443, validation: {caSecret: other/ca, subjectName: api.web.svc}}"
        )),
        vec![
            "spec.routes[0].services[0].validation.caSecret: \"other/ca\" must name a Secret in the IngressRoute's own namespace (no namespace/ prefix): copy the CA's ca.crt into a Secret of this namespace"
        ]
    );
    assert_eq!(
        v1_errors(&v1_backend(
            "{https: api, port: 443, validation: {caSecret: Api_CA, subjectName: \"*.web.svc\"}}"
        )),
        vec![
            "spec.routes[0].services[0].validation.caSecret: \"Api_CA\" must be a valid Secret name: lowercase letters, digits, '-' and '.', at most 253 characters",
            "spec.routes[0].services[0].validation.subjectName: \"*.web.svc\" must be the DNS name the backend's certificate carries, like \"api.web.svc\" (letters, digits, '-' and '.'; no wildcard, no port, no IP address: it is also sent as SNI)",
        ]
    );
    for bad in ["", "10.0.0.1", "api.web.svc:443"] {
        let e = v1_errors(&v1_backend(&format!(
            "{{https: api, port: 443, validation: {{caSecret: ca, subjectName: \"{bad}\"}}}}"
        )));
        assert_eq!(e.len(), 1, "{bad:?}: {e:?}");
        assert!(
            e[0].starts_with("spec.routes[0].services[0].validation.subjectName: "),
            "{e:?}"
        );
    }
}

#[test]
fn validation_on_a_backend_reached_without_tls_is_refused() {
    for key in ["http", "http2", "h2c", "tcp"] {
        let e = v1_errors(&v1_backend(&format!(
            "{{{key}: api, port: 80, validation: {{caSecret: ca, subjectName: api.web.svc}}}}"
        )));
        assert!(
            e.contains(&format!("spec.routes[0].services[0].validation: is for TLS backends only, and {key} backend \"api\" is reached without TLS; name the Service under https or https2 to verify its certificate, or remove validation")),
            "{key}: {e:?}"
        );
    }
}

#[test]
fn a_tls_backend_without_validation_gets_a_warning() {
    let mut o = mk_v1(&v1_backend("{https: api, port: 443}"));
    let v = validate_v1(&o);
    assert_eq!(v.errors, vec![]);
    assert_eq!(
        v.warnings,
        vec![
            "spec.routes[0].services[0]: the certificate of https backend \"api\" is not verified (Envoy sends SNI api.<namespace>.svc and accepts any certificate); add validation: {caSecret, subjectName} to verify it"
        ]
    );
    o.metadata.namespace = Some("web".into());
    assert!(validate_v1(&o).warnings[0].contains("SNI api.web.svc"));
    let plain = validate_v1(&mk_v1(&v1_backend("{http: api, port: 80}")));
    assert!(plain.warnings.is_empty());
}

#[test]
fn the_spec_head_checks_what_both_versions_share() {
    let mut v = Verdict::default();
    validate_spec_head(&mut v, None, None, 0);
    let e: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
    assert_eq!(e, vec!["spec.routes: must hold at least one route"]);
    let mut v = Verdict::default();
    validate_spec_head(&mut v, None, None, 1);
    assert!(v.allowed());
}

#[test]
fn a_header_condition_is_checked_for_its_shape_then_its_values() {
    let c: HeaderCondition =
        serde_norway::from_str("{cookie: \"\", contains: x}").expect("test condition parses");
    let mut shape = Verdict::default();
    validate_condition_shape(&mut shape, "c", &c);
    let shape: Vec<String> = shape.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shape,
        vec![
            "c: cookie takes no operator (found contains); it matches when the Cookie header contains its value"
        ]
    );
    let mut values = Verdict::default();
    validate_condition_values(&mut values, "c", &c);
    let values: Vec<String> = values.errors.iter().map(ToString::to_string).collect();
    assert_eq!(values.len(), 1, "{values:?}");
    assert!(values[0].starts_with("c.cookie: \"\""), "{values:?}");
}

#[test]
fn a_v1_route_policy_is_checked_alone() {
    let r: contour_v1::Route = serde_norway::from_str(
        "{failurePolicy: {count: 101, perTryTimeout: soon}, timeoutPolicy: {request: 5s}}",
    )
    .expect("test route parses");
    let mut v = Verdict::default();
    validate_v1_policies(&mut v, RouteAt(2), &r);
    let e: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(
        e[0],
        "spec.routes[2].failurePolicy.count: 101 must be between 0 and 100"
    );
    assert!(
        e[1].starts_with("spec.routes[2].failurePolicy.perTryTimeout"),
        "{e:?}"
    );
}
