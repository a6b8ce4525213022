//! Frontend client certificate validation (a Gateway's `spec.tls.frontend`) through a real
//! Envoy: a Gateway with an address of its own and two HTTPS ports, one `AllowValidOnly` (the
//! default), one `AllowInsecureFallback` (perPort), both trusting the test's client CA. On the
//! first only a client with a certificate of that CA gets through; on the second every client
//! does, with or without a certificate, of that CA or another, as the Gateway API's
//! AllowInsecureFallback says ("accept connections even if the client certificate is not
//! presented or fails verification").

mod envoy_support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use envoy_support::backend::Backend;
use envoy_support::free_port;
use envoy_support::gateway::{CLASS, addressed_gateway};
use envoy_support::harness::{CONVERGE, Harness, docs, services};
use envoy_support::tls::{Ca, self_signed_secret};

/// An HTTPS request for `https://app.example.com/` to `addr`, presenting `identity`: the body
/// of a 200, the status otherwise, or `error` when the connection fails (a handshake refused).
async fn get(addr: SocketAddr, identity: Option<&reqwest::Identity>) -> String {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .resolve("app.example.com", addr);
    if let Some(id) = identity {
        builder = builder.identity(id.clone());
    }
    let client = builder.build().expect("client");
    let url = format!("https://app.example.com:{}/", addr.port());
    match client.get(&url).send().await {
        Ok(r) if r.status().as_u16() == 200 => r.text().await.unwrap_or_default(),
        Ok(r) => r.status().as_u16().to_string(),
        Err(_) => "error".to_string(),
    }
}

/// Waits until `addr` answers `want` to a client presenting `identity`, then checks it does so
/// three times more.
async fn expect(addr: SocketAddr, identity: Option<&reqwest::Identity>, what: &str, want: &str) {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let got = get(addr, identity).await;
        if got == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{what} at {addr}: want {want:?}, still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..3 {
        assert_eq!(get(addr, identity).await, want, "{what} at {addr}");
    }
}

#[tokio::test]
async fn client_certificates_are_required_or_asked_for_as_each_port_says() {
    let web = Backend::start("gw/web").await;
    let (client_ca, other_ca) = (Ca::new("client CA"), Ca::new("other CA"));
    let secret = self_signed_secret("gw", "cert", "app.example.com");
    let (strict, fallback) = (free_port(), free_port());
    let ip = "127.0.89.1";
    let spec = format!(
        "  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: client-ca}}]
      perPort:
      - port: {fallback}
        tls:
          validation:
            mode: AllowInsecureFallback
            caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: client-ca}}]
  listeners:
  - {{name: strict, protocol: HTTPS, port: {strict}, tls: {{certificateRefs: [{{name: cert}}]}}}}
  - {{name: fallback, protocol: HTTPS, port: {fallback}, tls: {{certificateRefs: [{{name: cert}}]}}}}
"
    );
    let gateway = format!(
        "{}---
{secret}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: gw}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [app.example.com]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
",
        addressed_gateway("gw", "edge", ip, &spec)
    );
    let files = [
        (
            "gateway.yaml",
            docs(&[
                CLASS.to_string(),
                gateway,
                client_ca.config_map("gw", "client-ca"),
            ]),
        ),
        ("web.yaml", services("gw", &[&web])),
    ];
    let h = Harness::start_with_addresses(&files, "127.0.89.0/29").await;
    let at = |port| SocketAddr::new(ip.parse().unwrap(), port);
    let (good, other) = (
        client_ca.client_identity("client"),
        other_ca.client_identity("client"),
    );

    // AllowValidOnly: a certificate of the trusted CA gets through; none, or one of another CA,
    // does not get past the handshake.
    expect(at(strict), Some(&good), "trusted certificate", "gw/web").await;
    expect(at(strict), None, "no certificate", "error").await;
    expect(
        at(strict),
        Some(&other),
        "another CA's certificate",
        "error",
    )
    .await;

    // AllowInsecureFallback: every client gets through.
    expect(at(fallback), Some(&good), "trusted certificate", "gw/web").await;
    expect(at(fallback), None, "no certificate", "gw/web").await;
    expect(
        at(fallback),
        Some(&other),
        "another CA's certificate",
        "gw/web",
    )
    .await;

    // The refusals were Envoy's verification: the other CA's certificate failed it, and a
    // client came without one where one is required.
    let stats = h.admin("/stats?filter=ssl\\.").await;
    let sum = |what: &str| {
        (stats.lines())
            .filter(|l| l.contains(what))
            .filter_map(|l| l.rsplit_once(": ")?.1.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert!(sum("fail_verify_error") > 0, "{stats}");
    assert!(sum("fail_verify_no_cert") > 0, "{stats}");
}
