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

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use envoy_support::harness::{Harness, docs, service, slice};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sluice::cli::bootstrap::XdsProtocol;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The DNS name the backends' certificates are for.
const SUBJECT: &str = "api.example.com";
/// The URI their certificates carry too.
const URI: &str = "spiffe://example.com/api";

/// A CA of the test.
struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new(cn: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("CA key");
        Ca(CertifiedIssuer::self_signed(params, key).expect("self-signed CA"))
    }

    /// A ConfigMap `web/<name>` with this CA's certificate under `ca.crt`.
    fn config_map(&self, name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: web}}\ndata:\n  ca.crt: {:?}\n",
            self.0.pem()
        )
    }

    /// A certificate of this CA for `sans` and its key (DER).
    fn leaf(&self, sans: Vec<SanType>) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf parameters");
        params.subject_alt_names = sans;
        params.distinguished_name.push(DnType::CommonName, "leaf");
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.0).expect("leaf certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (CertificateDer::from(cert.der().to_vec()), key)
    }

    /// A `kubernetes.io/tls` Secret `web/<name>` with a client certificate of this CA.
    fn client_secret(&self, name: &str) -> String {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client parameters");
        params.distinguished_name.push(DnType::CommonName, "envoy");
        let key = KeyPair::generate().expect("client key");
        let cert = params.signed_by(&key, &self.0).expect("client certificate");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: web}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
            b64(&cert.pem()),
            b64(&key.serialize_pem())
        )
    }
}

/// A TLS server configuration with a certificate of `ca` for [`SUBJECT`] and [`URI`]; with
/// `clients`, it requires a client certificate of that CA.
fn acceptor(ca: &Ca, clients: Option<&Ca>) -> TlsAcceptor {
    let sans = vec![
        SanType::DnsName(SUBJECT.try_into().expect("DNS name")),
        SanType::URI(URI.try_into().expect("URI")),
    ];
    let (cert, key) = ca.leaf(sans);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(client_ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from(client_ca.0.der().to_vec()))
                .expect("client CA");
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(vec![cert], key)
        .expect("backend certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsAcceptor::from(Arc::new(config))
}

/// Starts a TLS backend; returns its port. Each answer is `sni=<SNI> client=<yes|no>`.
async fn tls_backend(acceptor: TlsAcceptor) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("backend address").port();
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A handshake Envoy or the backend gives up on ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (_, session) = tls.get_ref();
                let sni = session.server_name().unwrap_or("-").to_string();
                let client = match session.peer_certificates() {
                    Some(c) if !c.is_empty() => "yes",
                    _ => "no",
                };
                let svc = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    let body = format!("sni={sni} client={client}");
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, task)
}

const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
";

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
    let (port, _backend) = tls_backend(acceptor(&ca, None)).await;
    let (mtls_port, _mtls) = tls_backend(acceptor(&ca, Some(&client_ca))).await;
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
        ca.config_map("ca"),
        other_ca.config_map("other-ca"),
        client_ca.client_secret("client"),
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
    more.push(ca.config_map("gone"));
    h.write("all.yaml", &docs(&more));
    h.expect("missing-ca.example.com", "/", &[], &ok).await;
    // The wrong CA's ConfigMap now holds the right one: sent by SDS, the backend is reached.
    let other_at = (more
        .iter()
        .position(|o| *o == other_ca.config_map("other-ca")))
    .expect("the other CA's ConfigMap");
    more[other_at] = ca.config_map("other-ca");
    h.write("all.yaml", &docs(&more));
    h.expect("wrong-ca.example.com", "/", &[], &ok).await;
    h.expect("wrong-name.example.com", "/", &[], "503").await;
}
