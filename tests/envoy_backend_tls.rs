//! Real Envoy fed by sluice standalone from Gateway API objects whose backends a
//! BackendTLSPolicy covers: Envoy speaks TLS to them with the policy's hostname as SNI and
//! verifies their certificates against the CA certificates of the policy's ConfigMap and the
//! hostname, or the policy's subject alternative names. A certificate that fails either is a
//! 503. A Gateway's client certificate (`spec.tls.backend.clientCertificateRef`) is presented to
//! a backend that asks for one; a Gateway without one is refused by it.
//!
//! The backends are HTTP servers on 127.0.0.1 that terminate TLS themselves with a certificate
//! of the test's CA for `api.example.com` and `spiffe://example.com/api`, and answer every
//! request with what they saw: the SNI and whether a client certificate was presented.

mod envoy_support;

use envoy_support::gateway::CLASS;
use envoy_support::harness::{Harness, docs, service, slice};
use envoy_support::tls::{Ca, Seen, tls_backend};
use rcgen::SanType;
use sluice::cli::bootstrap::XdsProtocol;
use tokio_rustls::TlsAcceptor;

/// The DNS name the backends' certificates are for.
const SUBJECT: &str = "api.example.com";
/// The URI their certificates carry too.
const URI: &str = "spiffe://example.com/api";

/// A TLS server configuration with a certificate of `ca` for [`SUBJECT`] and [`URI`]; with
/// `clients`, it requires a client certificate of that CA.
fn acceptor(ca: &Ca, clients: Option<&Ca>) -> TlsAcceptor {
    let sans = vec![
        SanType::DnsName(SUBJECT.try_into().expect("DNS name")),
        SanType::URI(URI.try_into().expect("URI")),
    ];
    ca.acceptor(sans, clients, &["http/1.1"])
}

/// A backend's answer: `sni=<SNI> client=<yes|no>`.
fn sni_and_client(seen: &Seen) -> String {
    let client = if seen.client_certificate { "yes" } else { "no" };
    format!("sni={} client={client}", seen.sni)
}

/// Gateway `web/<name>` with one HTTP listener, presenting `client` (a Secret's name, or none)
/// to its TLS backends.
fn gateway(name: &str, client: Option<&str>) -> String {
    let tls = client.map_or(String::new(), |c| {
        format!("  tls: {{backend: {{clientCertificateRef: {{name: {c}}}}}}}\n")
    });
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}, namespace: web}}\nspec:\n  gatewayClassName: sluice\n  listeners: [{{name: http, protocol: HTTP, port: 80}}]\n{tls}"
    )
}

/// HTTPRoute `web/<name>` on Gateway `gateway` for `<name>.example.com` to Service `service`.
fn route(name: &str, gateway: &str, service: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: web}}\nspec:\n  parentRefs: [{{name: {gateway}}}]\n  hostnames: [{name}.example.com]\n  rules: [{{backendRefs: [{{name: {service}, port: 443}}]}}]\n"
    )
}

/// BackendTLSPolicy `web/<service>` on port `https` of Service `service`, trusting ConfigMap
/// `ca_map`, with `hostname` and `sans` (a YAML flow sequence, or empty).
fn policy(service: &str, ca_map: &str, hostname: &str, sans: &str) -> String {
    let sans = match sans {
        "" => String::new(),
        s => format!(", subjectAltNames: {s}"),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {service}, namespace: web}}\nspec:\n  targetRefs: [{{group: \"\", kind: Service, name: {service}, sectionName: https}}]\n  validation: {{caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: {ca_map}}}], hostname: {hostname}{sans}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_tls_policies_are_enforced_sotw() {
    backend_tls(XdsProtocol::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_tls_policies_are_enforced_delta() {
    backend_tls(XdsProtocol::Delta).await;
}

async fn backend_tls(protocol: XdsProtocol) {
    let (ca, other_ca, client_ca) = (
        Ca::new("backend CA"),
        Ca::new("other CA"),
        Ca::new("client CA"),
    );
    let (port, _backend) = tls_backend(acceptor(&ca, None), sni_and_client).await;
    let (mtls_port, _mtls) = tls_backend(acceptor(&ca, Some(&client_ca)), sni_and_client).await;
    // Each case its own Service (a policy applies to a Service port): name, backend port,
    // policy (None: no policy).
    let cases: [(&str, u16, Option<String>); 9] = [
        ("ok", port, Some(policy("ok", "ca", SUBJECT, ""))),
        (
            "wrong-ca",
            port,
            Some(policy("wrong-ca", "other-ca", SUBJECT, "")),
        ),
        (
            "wrong-name",
            port,
            Some(policy("wrong-name", "ca", "other.example.com", "")),
        ),
        (
            "san-uri",
            port,
            Some(policy(
                "san-uri",
                "ca",
                SUBJECT,
                &format!("[{{type: URI, uri: \"{URI}\"}}]"),
            )),
        ),
        (
            "san-wrong-uri",
            port,
            Some(policy(
                "san-wrong-uri",
                "ca",
                SUBJECT,
                "[{type: URI, uri: \"spiffe://example.com/other\"}]",
            )),
        ),
        (
            "san-dns",
            port,
            Some(policy(
                "san-dns",
                "ca",
                "sni.example.com",
                &format!("[{{type: Hostname, hostname: {SUBJECT}}}]"),
            )),
        ),
        (
            "san-wrong-dns",
            port,
            Some(policy(
                "san-wrong-dns",
                "ca",
                SUBJECT,
                "[{type: Hostname, hostname: other.example.com}]",
            )),
        ),
        (
            "missing-ca",
            port,
            Some(policy("missing-ca", "gone", SUBJECT, "")),
        ),
        ("mtls", mtls_port, Some(policy("mtls", "ca", SUBJECT, ""))),
    ];
    let mut objects = vec![
        CLASS.to_string(),
        gateway("edge", Some("client")),
        gateway("bare", None),
        ca.config_map("web", "ca"),
        other_ca.config_map("web", "other-ca"),
        client_ca.client_secret("web", "client", "envoy"),
        // The mTLS backend through a Gateway that presents no client certificate.
        route("mtls-bare", "bare", "mtls"),
    ];
    for (name, backend_port, p) in &cases {
        objects.push(service("web", name, 443, "https"));
        objects.push(slice("web", name, "https", *backend_port, "0"));
        objects.push(route(name, "edge", name));
        objects.extend(p.clone());
    }
    let files = [("all.yaml", docs(&objects))];
    let h = Harness::start(&files, protocol).await;

    // The right CA and hostname: TLS with the hostname as SNI; the Gateway's client
    // certificate is presented only to a backend that asks for one.
    let ok = format!("sni={SUBJECT} client=no");
    h.expect("ok.example.com", "/", &[], &ok).await;
    h.expect("san-uri.example.com", "/", &[], &ok).await;
    // The SANs, not the hostname, are what is verified; the hostname is still the SNI.
    h.expect(
        "san-dns.example.com",
        "/",
        &[],
        "sni=sni.example.com client=no",
    )
    .await;
    h.expect(
        "mtls.example.com",
        "/",
        &[],
        &format!("sni={SUBJECT} client=yes"),
    )
    .await;
    // Refused: a CA that did not sign the certificate, a name or SAN it does not carry, a
    // policy whose CA does not resolve (500: Envoy does not speak to the backend at all), and
    // the mTLS backend without a client certificate.
    for (host, want) in [
        ("wrong-ca", "503"),
        ("wrong-name", "503"),
        ("san-wrong-uri", "503"),
        ("san-wrong-dns", "503"),
        ("missing-ca", "500"),
        ("mtls-bare", "503"),
    ] {
        let host = format!("{host}.example.com");
        h.expect(&host, "/", &[], want).await;
        for _ in 0..3 {
            assert_eq!(h.get(&host, "/", &[]).await, want, "{host}");
        }
    }
    let stats = h.admin("/stats?filter=ssl.fail_verify").await;
    let failed = |what: &str| {
        (stats.lines())
            .filter(|l| l.contains(what))
            .filter_map(|l| l.rsplit_once(": ")?.1.parse::<u64>().ok())
            .sum::<u64>()
    };
    assert!(failed("fail_verify_error") > 0, "{stats}");
    assert!(failed("fail_verify_san") > 0, "{stats}");

    // The ConfigMap of the missing CA created: the policy is accepted and the backend reached.
    let mut more = objects.clone();
    more.push(ca.config_map("web", "gone"));
    h.write("all.yaml", &docs(&more));
    h.expect("missing-ca.example.com", "/", &[], &ok).await;
    // The wrong CA's ConfigMap now holds the right one: sent by SDS, the backend is reached.
    let other_at = (more
        .iter()
        .position(|o| *o == other_ca.config_map("web", "other-ca")))
    .expect("the other CA's ConfigMap");
    more[other_at] = ca.config_map("web", "other-ca");
    h.write("all.yaml", &docs(&more));
    h.expect("wrong-ca.example.com", "/", &[], &ok).await;
    h.expect("wrong-name.example.com", "/", &[], "503").await;
}
