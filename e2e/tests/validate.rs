//! `sluice validate` against the API server's own validation: every built-in object below is
//! refused by a real kube-apiserver (a server-side dry run, with no webhook of sluice's), and
//! `sluice validate` refuses it too, naming the field. A manifest `sluice validate` passes in CI
//! is then not refused by `kubectl apply` for these reasons.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::env;

/// (what, the object, what sluice's message says).
fn refused_by_the_apiserver(ns: &str) -> Vec<(&'static str, String, &'static str)> {
    let ingress = |name: &str, host: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  ingressClassName: sluice\n  rules:\n  - host: {host}\n    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n"
        )
    };
    let service = |name: &str, spec: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
        )
    };
    vec![
        ("an upper-case Ingress host", ingress("upper", "Shop.example.com"), r#"spec.rules[0].host: "Shop.example.com" must be in lower case"#),
        ("an IP address as Ingress host", ingress("ip", "192.0.2.1"), r#"spec.rules[0].host: "192.0.2.1""#),
        ("an Ingress name with upper case", ingress("Upper", "shop.example.com"), r#"metadata.name: "Upper""#),
        (
            "an Ingress path of Prefix type not starting with /",
            ingress("rel", "rel.example.com").replace("path: /,", "path: shop,"),
            r#"spec.rules[0].http.paths[0].path: "shop""#,
        ),
        (
            "an Ingress backend port out of range",
            ingress("port", "port.example.com").replace("number: 80", "number: 70000"),
            "spec.rules[0].http.paths[0].backend.service.port",
        ),
        (
            "an IngressClass controller that is not a domain-prefixed path",
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: e2e-bad-controller}\nspec: {controller: sluice}\n".to_string(),
            "spec.controller",
        ),
        ("a Service port out of range", service("big", "{ports: [{port: 70000}]}"), r#"spec.ports[0].port: "70000""#),
        ("two unnamed Service ports", service("two", "{ports: [{port: 80}, {port: 81}]}"), "spec.ports[0].name: is required"),
        ("a Service port name with upper case", service("named", "{ports: [{name: Http, port: 80}]}"), r#"spec.ports[0].name: "Http""#),
        ("a Service protocol that is not TCP, UDP or SCTP", service("proto", "{ports: [{port: 80, protocol: HTTP}]}"), r#"spec.ports[0].protocol: "HTTP""#),
        ("a Service targetPort name that is not a port name", service("target", "{ports: [{port: 80, targetPort: http_port}]}"), r#"spec.ports[0].targetPort: "http_port""#),
        ("a Service without ports", service("empty", "{ports: []}"), "spec.ports: is required"),
        ("an ExternalName Service without its name", service("ext", "{type: ExternalName}"), "spec.externalName: is required"),
    ]
}

fn sluice_validate(yaml: &str) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn what_the_apiserver_refuses_in_built_in_kinds_sluice_validate_refuses() {
    let env = env();
    let ns = env.namespace("e2e-validate");
    for (what, yaml, message) in refused_by_the_apiserver(&ns) {
        let out = env.kubectl_in(&["apply", "--dry-run=server", "-f", "-"], Some(&yaml));
        assert!(!out.ok, "{what}: the apiserver accepted it:\n{yaml}");
        let (ok, report) = sluice_validate(&yaml);
        assert!(!ok, "{what}: sluice validate passed it:\n{report}");
        assert!(
            report.contains(message),
            "{what}: want {message:?} in sluice validate's report:\n{report}\n(the apiserver said: {})",
            out.stderr.trim()
        );
    }
    // The same objects made right pass both.
    let fine = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: NS}\nspec: {ports: [{name: http, port: 80, targetPort: 8080}, {name: https, port: 443, targetPort: https}]}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: NS}\nspec:\n  ingressClassName: sluice\n  rules:\n  - host: shop.example.com\n    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}\n".replace("NS", &ns);
    let out = env.kubectl_in(&["apply", "--dry-run=server", "-f", "-"], Some(&fine));
    assert!(
        out.ok,
        "the apiserver refused the fixed objects: {}",
        out.stderr
    );
    let (ok, report) = sluice_validate(&fine);
    assert!(ok, "sluice validate refused the fixed objects:\n{report}");
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn the_apiserver_refuses_endpoint_slices_aimed_at_loopback_or_link_local_addresses() {
    // docs/cluster-mode.md, "Trust rules": a hand-made EndpointSlice can aim a Service anywhere
    // but at these, which matters when Envoy shares its node's network.
    let env = env();
    let ns = env.namespace("e2e-slices");
    let slice = |name: &str, address: &str| {
        format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{port: 80}}]\nendpoints: [{{addresses: [\"{address}\"]}}]\n"
        )
    };
    for (name, address) in [("loopback", "127.0.0.1"), ("metadata", "169.254.169.254")] {
        let out = env.kubectl_in(
            &["apply", "--dry-run=server", "-f", "-"],
            Some(&slice(name, address)),
        );
        assert!(!out.ok, "an EndpointSlice to {address} was accepted");
    }
    let out = env.kubectl_in(
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&slice("pod", "10.1.2.3")),
    );
    assert!(out.ok, "an EndpointSlice to a Pod address: {}", out.stderr);
}
