//! Gateways with addresses of their own (`--gateway-addresses`) through a real Envoy: two
//! Gateways in two namespaces, each with an HTTP listener on the same port, and a route on each
//! for the same hostname to a backend of its own; each Gateway's address answers with its own
//! backend, and deleting one Gateway leaves the other serving.

mod envoy_support;

use std::net::SocketAddr;

use envoy_support::backend::Backend;
use envoy_support::free_port;
use envoy_support::harness::{Harness, docs, services};
use sluice::cli::bootstrap::XdsProtocol;

const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
";

/// A Gateway `ns/name` asking for address `ip`, with an HTTP listener on `port`.
fn gateway(ns: &str, name: &str, ip: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {ns}}}
spec:
  gatewayClassName: sluice
  addresses: [{{type: IPAddress, value: {ip}}}]
  listeners: [{{name: http, protocol: HTTP, port: {port}}}]
"
    )
}

/// An HTTPRoute `ns/app` on Gateway `ns/gateway` for app.example.com, to Service `ns/<service>`.
fn route(ns: &str, gateway: &str, service: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {ns}}}
spec:
  parentRefs: [{{name: {gateway}}}]
  hostnames: [app.example.com]
  rules:
  - backendRefs: [{{name: {service}, port: 80}}]
"
    )
}

#[tokio::test]
async fn each_gateway_answers_at_its_own_address_with_its_own_routes() {
    let a = Backend::start("team-a/a").await;
    let b = Backend::start("team-b/b").await;
    // Addresses of a loopback network no other test uses, on a port free on 127.0.0.1 (other
    // tests bind that address only).
    let port = free_port();
    let (ip_a, ip_b) = ("127.0.88.1", "127.0.88.2");
    let gateways = |both: bool| {
        let mut parts = vec![CLASS.to_string(), gateway("team-b", "gb", ip_b, port)];
        if both {
            parts.push(gateway("team-a", "ga", ip_a, port));
        }
        docs(&parts)
    };
    let files = [
        ("gateways.yaml", gateways(true)),
        (
            "routes.yaml",
            docs(&[route("team-a", "ga", "a"), route("team-b", "gb", "b")]),
        ),
        ("a.yaml", services("team-a", &[&a])),
        ("b.yaml", services("team-b", &[&b])),
    ];
    let options = sluice::dag::Options {
        gateway_addresses: Some("127.0.88.0/29".parse().unwrap()),
        ..sluice::dag::Options::default()
    };
    let h = Harness::start_with(&files, XdsProtocol::Delta, options).await;
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);

    h.expect_at(at(ip_a), "app.example.com", "/", "team-a/a")
        .await;
    h.expect_at(at(ip_b), "app.example.com", "/", "team-b/b")
        .await;
    // Nothing of theirs on Envoy's shared listener.
    assert_eq!(h.get("app.example.com", "/", &[]).await, "404");

    // Team a's Gateway deleted: its address stops answering, team b's keeps serving.
    h.write("gateways.yaml", &gateways(false));
    let deadline = std::time::Instant::now() + envoy_support::harness::CONVERGE;
    loop {
        let got = h.get_at(at(ip_a), "app.example.com", "/").await;
        if got.starts_with("error") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "team a's address still answers {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(h.get_at(at(ip_b), "app.example.com", "/").await, "team-b/b");
}
