//! Gateways with addresses of their own (`--gateway-addresses`) through a real Envoy: two
//! Gateways in two namespaces, each with an HTTP listener on the same port, and a route on each
//! for the same hostname to a backend of its own; each Gateway's address answers with its own
//! backend, and deleting one Gateway leaves the other serving.

mod envoy_support;

use std::net::SocketAddr;

use envoy_support::backend::Backend;
use envoy_support::free_port;
use envoy_support::gateway::{CLASS, addressed_gateway};
use envoy_support::harness::{Harness, docs, services};
use envoy_support::tls::self_signed_secret;

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
    let h = Harness::start_with_addresses(&files, "127.0.88.0/29").await;
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

/// An HTTPS request to Envoy at `addr` with SNI `sni` (none when empty) and Host `host`: the
/// answer's status and body, or the error. HTTP/1.1, where the Host header is sent as given
/// (over HTTP/2 the client takes `:authority` from the URL, the SNI's name).
async fn get_tls_at(addr: SocketAddr, sni: &str, host: &str) -> String {
    let name = if sni.is_empty() { "localhost" } else { sni };
    let client = reqwest::Client::builder()
        .no_proxy()
        .danger_accept_invalid_certs(true)
        .tls_sni(!sni.is_empty())
        .http1_only()
        .timeout(std::time::Duration::from_secs(5))
        .resolve(name, addr)
        .build()
        .expect("client");
    let url = format!("https://{name}:{}/", addr.port());
    match client.get(&url).header("host", host).send().await {
        Ok(r) => {
            let code = r.status().as_u16();
            format!("{code} {}", r.text().await.unwrap_or_default())
        }
        Err(e) => format!("error: {e}"),
    }
}

/// Whether a connection to `addr` is accepted and then closed by the server without a byte
/// (a port listened on with nowhere to send it), rather than refused.
async fn accepted_then_closed(addr: SocketAddr) -> bool {
    use tokio::io::AsyncReadExt;
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf));
    matches!(read.await, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test]
async fn a_gateways_tls_ports_answer_every_sni_and_ports_with_nowhere_to_go_close() {
    let web = Backend::start("gw/web").await;
    let secret = self_signed_secret("gw", "cert", "example.org");
    let (https, passthrough, tcp) = (free_port(), free_port(), free_port());
    let ip = "127.0.88.9";
    let listeners = format!(
        "  listeners:
  - name: https
    protocol: HTTPS
    port: {https}
    tls: {{certificateRefs: [{{name: cert}}]}}
  - name: pass
    protocol: TLS
    port: {passthrough}
    tls: {{mode: Passthrough}}
  - {{name: tcp, protocol: TCP, port: {tcp}}}
"
    );
    let gateway = format!(
        "{CLASS}---
{}---
{secret}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: gw}}
spec:
  parentRefs: [{{name: edge, sectionName: https}}]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
",
        addressed_gateway("gw", "edge", ip, &listeners)
    );
    let files = [
        ("gateway.yaml", gateway),
        ("web.yaml", services("gw", &[&web])),
    ];
    let _h = Harness::start_with_addresses(&files, "127.0.88.8/29").await;
    let at = |port| SocketAddr::new(ip.parse().unwrap(), port);

    // A route without hostnames on an HTTPS listener without one: served whatever the SNI (the
    // port's default filter chain, the listener's certificate), with none too.
    let deadline = std::time::Instant::now() + envoy_support::harness::CONVERGE;
    for (sni, host) in [
        ("example.org", "example.org"),
        ("unknown.example.net", "unknown.example.net"),
        ("", "plain"),
    ] {
        loop {
            let got = get_tls_at(at(https), sni, host).await;
            if got == "200 gw/web" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "SNI {sni:?}: {got}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    // A TLS passthrough port with no route and a TCP port with no route: listened on, each
    // connection accepted and closed.
    // (The TLS port reads a ClientHello first: a TLS client sees its handshake cut off.)
    assert!(
        tokio::net::TcpStream::connect(at(passthrough))
            .await
            .is_ok()
    );
    let got = get_tls_at(at(passthrough), "abc.example.com", "abc.example.com").await;
    assert!(got.starts_with("error"), "{got}");
    assert!(accepted_then_closed(at(tcp)).await);
}

/// Four HTTPS listeners on one port (none, an exact hostname, a wildcard, an exact name under
/// the wildcard), a route on each: a request is routed only when its Host belongs to the
/// listener its SNI picked; a Host of another listener (or, under a listener with a hostname,
/// of none) is answered 421, a Host of the same listener that no route serves 404. A connection
/// whose SNI names no host is routed by Host alone.
#[tokio::test]
async fn a_request_whose_host_belongs_to_another_listener_than_its_sni_gets_421() {
    let web = Backend::start("mis/web").await;
    let secret = self_signed_secret("mis", "cert", "example.org");
    let port = free_port();
    let ip = "127.0.88.17";
    let tls = "tls: {certificateRefs: [{name: cert}]}";
    let route = |name: &str, section: &str, hostnames: &str| {
        format!(
            "---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: mis}}
spec:
  parentRefs: [{{name: edge, sectionName: {section}}}]
  hostnames: [{hostnames}]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
"
        )
    };
    let listeners = format!(
        "  listeners:
  - {{name: any, protocol: HTTPS, port: {port}, {tls}}}
  - {{name: second, protocol: HTTPS, port: {port}, hostname: second.example.org, {tls}}}
  - {{name: wild, protocol: HTTPS, port: {port}, hostname: \"*.w.example.org\", {tls}}}
  - {{name: four, protocol: HTTPS, port: {port}, hostname: four.w.example.org, {tls}}}
"
    );
    let gateway = format!(
        "{CLASS}---
{}---
{secret}{}{}{}{}",
        addressed_gateway("mis", "edge", ip, &listeners),
        route("first", "any", "first.example.org"),
        route("second", "second", ""),
        route("wild", "wild", ""),
        route("four", "four", ""),
    );
    let files = [
        ("gateway.yaml", gateway),
        ("web.yaml", services("mis", &[&web])),
    ];
    let _h = Harness::start_with_addresses(&files, "127.0.88.16/29").await;
    let addr = SocketAddr::new(ip.parse().unwrap(), port);
    let status = |got: String| got.split(' ').next().unwrap_or_default().to_string();
    let cases = [
        ("first.example.org", "first.example.org", "200"),
        ("first.example.org", "second.example.org", "421"),
        ("first.example.org", "unknown.example.org", "404"),
        ("second.example.org", "second.example.org", "200"),
        ("second.example.org", "first.example.org", "421"),
        ("second.example.org", "unknown.example.org", "421"),
        ("x.w.example.org", "y.w.example.org", "200"),
        ("x.w.example.org", "four.w.example.org", "421"),
        ("x.w.example.org", "first.example.org", "421"),
        ("four.w.example.org", "four.w.example.org", "200"),
        ("four.w.example.org", "y.w.example.org", "421"),
        ("unknown.example.org", "first.example.org", "200"),
        ("unknown.example.org", "unknown.example.org", "404"),
    ];
    // Converged when the first case answers; then every case at once.
    let deadline = std::time::Instant::now() + envoy_support::harness::CONVERGE;
    while status(get_tls_at(addr, cases[0].0, cases[0].1).await) != "200" {
        assert!(std::time::Instant::now() < deadline, "never served");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for (sni, host, want) in cases {
        let got = get_tls_at(addr, sni, host).await;
        assert_eq!(status(got.clone()), want, "SNI {sni}, Host {host}: {got}");
    }
}
