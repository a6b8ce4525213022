//! Real Envoy fed by sluice standalone from Gateway API TLSRoutes: a `TLS` listener (mode
//! `Passthrough`) of a Gateway of sluice's is served on sluice's HTTPS listener, where each
//! hostname of a TLSRoute attached to it gets a filter chain matched by SNI that forwards the
//! connection, still encrypted, to the route's backends (weighted). The backends terminate TLS;
//! a host an HTTPS listener terminates beside it keeps Envoy's certificate; an SNI no route names
//! gets no filter chain (Envoy closes the connection).
//!
//! The backends are TLS servers on 127.0.0.1 with certificates of the test's CA: after the
//! handshake each writes its name and a newline, then echoes. The TLS client trusts that CA only,
//! so a completed handshake with the backend's certificate proves Envoy did not terminate TLS.
//! `Harness::start` and `Harness::write` check every configuration with `envoy --mode validate`.

mod envoy_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::echo::EchoBackend;
use envoy_support::harness::{Harness, docs, service, services, slice};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use sluice::cli::bootstrap::XdsProtocol;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector, client::TlsStream};

/// How long a test waits for a configuration to reach Envoy.
const CONVERGE: Duration = Duration::from_secs(20);
/// The Service port the TLSRoute's backendRefs name.
const SVC_PORT: u16 = 8443;
/// The names the backends' certificates are for (the TLSRoute's passthrough hosts).
const PASSED: [&str; 2] = ["db.example.com", "*.passthrough.example.com"];

fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate of the test's CA and its key.
struct Leaf {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// The test's CA: the TLS client trusts it alone; it issues the backends' certificates and the
/// one of the HTTPS listener's Secret.
struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        (params.distinguished_name).push(DnType::CommonName, "sluice passthrough test CA");
        let key = KeyPair::generate().expect("CA key");
        Ca(CertifiedIssuer::self_signed(params, key).expect("self-signed CA"))
    }

    /// A serving certificate for `names`, with common name `cn`.
    fn leaf(&self, cn: &str, names: &[&str]) -> Leaf {
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).expect("leaf parameters");
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.0).expect("leaf certificate");
        Leaf { cert, key }
    }

    /// A TLS client trusting this CA only, every handshake a full one (a resumed session would
    /// not show the server's certificate).
    fn connector(&self) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        let ca = CertificateDer::from(self.0.der().to_vec());
        roots.add(ca).expect("trust the test CA");
        let mut config = rustls::ClientConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.resumption = rustls::client::Resumption::disabled();
        TlsConnector::from(Arc::new(config))
    }
}

/// A `kubernetes.io/tls` Secret `gw/<name>` holding `leaf` and its key.
fn tls_secret(name: &str, leaf: &Leaf) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: gw}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(&leaf.cert.pem()),
        b64(&leaf.key.serialize_pem())
    )
}

/// A TLS connection through Envoy's HTTPS port: the certificate the server showed, and the
/// stream.
struct Conn {
    cert: Vec<u8>,
    stream: BufReader<TlsStream<TcpStream>>,
}

/// A TLS server configuration with `leaf` for a passthrough backend.
fn acceptor(leaf: &Leaf) -> TlsAcceptor {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key.serialize_der()));
    let chain = vec![CertificateDer::from(leaf.cert.der().to_vec())];
    let config = rustls::ServerConfig::builder_with_provider(ring())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("backend certificate");
    TlsAcceptor::from(Arc::new(config))
}

/// Connects to Envoy's HTTPS port with SNI `sni` and completes a TLS handshake trusting the
/// test's CA; Err says what failed (Envoy closes a connection whose SNI matches no filter chain).
async fn handshake(h: &Harness, tls: &TlsConnector, sni: &str) -> Result<Conn, String> {
    let step = Duration::from_secs(3);
    let connect = TcpStream::connect(("127.0.0.1", h.https_port));
    let tcp = (tokio::time::timeout(step, connect).await)
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let name = ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
    let stream = (tokio::time::timeout(step, tls.connect(name, tcp)).await)
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| format!("handshake: {e}"))?;
    let certs = stream.get_ref().1.peer_certificates();
    let cert = certs
        .and_then(|c| c.first())
        .ok_or("no server certificate")?;
    let (cert, stream) = (cert.to_vec(), BufReader::new(stream));
    Ok(Conn { cert, stream })
}

/// [`handshake`], then the backend's greeting: (backend name, connection).
async fn dial(h: &Harness, tls: &TlsConnector, sni: &str) -> Result<(String, Conn), String> {
    let mut conn = handshake(h, tls, sni).await?;
    let mut line = String::new();
    let read = conn.stream.read_line(&mut line);
    match tokio::time::timeout(Duration::from_secs(3), read).await {
        Err(_) => Err("no greeting within 3 s".into()),
        Ok(Err(e)) => Err(format!("read: {e}")),
        Ok(Ok(0)) => Err("closed before a greeting".into()),
        Ok(Ok(_)) => Ok((line.trim_end().to_string(), conn)),
    }
}

/// Sends `sent` on `conn` and checks the backend echoes it back (within 5 s).
async fn assert_echoes(h: &Harness, conn: &mut Conn, sent: &[u8]) {
    let mut back = vec![0u8; sent.len()];
    let echoed = tokio::time::timeout(Duration::from_secs(5), async {
        conn.stream.write_all(sent).await?;
        conn.stream.flush().await?;
        conn.stream.read_exact(&mut back).await
    });
    let echoed = echoed.await;
    assert!(
        matches!(echoed, Ok(Ok(_))),
        "no echo: {echoed:?}\n{}",
        envoy_state(h).await
    );
    assert_eq!(back, sent, "the echo differs from what was sent");
}

/// Envoy's log tail and its HTTPS listener's configuration, for failure messages.
async fn envoy_state(h: &Harness) -> String {
    let dump = h.admin("/config_dump?resource=dynamic_listeners").await;
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap_or_default();
    let https = (dump["configs"].as_array().into_iter().flatten())
        .filter(|l| l["name"] == "ingress_https")
        .map(|l| serde_json::to_string_pretty(l).unwrap_or_default())
        .collect::<Vec<_>>();
    format!(
        "ingress_https:\n{}\nEnvoy log:\n{}",
        https.join("\n"),
        h.envoy_log_tail()
    )
}

/// The name of the backend a connection with SNI `sni` reached, or what failed.
async fn reached(h: &Harness, tls: &TlsConnector, sni: &str) -> Result<String, String> {
    dial(h, tls, sni).await.map(|(name, _)| name)
}

/// Dials `sni` until backend `want` greets, then checks that the handshake showed certificate
/// `cert` (for passthrough `want`'s own: Envoy did not terminate TLS) and returns the connection;
/// panics after [`CONVERGE`] naming the last outcome.
async fn expect_backend(
    h: &Harness,
    tls: &TlsConnector,
    sni: &str,
    want: &str,
    cert: &Leaf,
) -> Conn {
    let deadline = Instant::now() + CONVERGE;
    loop {
        match dial(h, tls, sni).await {
            Ok((name, conn)) if name == want => {
                assert!(
                    *conn.cert == **cert.cert.der(),
                    "SNI {sni}: {want} greets, but the handshake showed another certificate"
                );
                return conn;
            }
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!(
                "SNI {sni}: want {want}, still {:?} after {CONVERGE:?}\n{}",
                other.map(|(name, _)| name),
                envoy_state(h).await
            ),
        }
    }
}

/// The backends `gw/db-a` and `gw/db-b` (Services on [`SVC_PORT`]) and the HTTP backend `gw/web`.
fn backend_services(a: &EchoBackend, b: &EchoBackend, web: &Backend) -> String {
    let tls = [("db-a", a), ("db-b", b)].map(|(name, backend)| {
        let slice = slice("gw", name, "", backend.port, "0");
        docs(&[service("gw", name, SVC_PORT, ""), slice])
    });
    docs(&[tls[0].clone(), tls[1].clone(), services("gw", &[web])])
}

/// sluice's GatewayClass; a Gateway `gw/edge` with a passthrough TLS listener and an HTTPS
/// listener for `web.example.com` (certificate Secret `web-cert`), both on port 443; an
/// HTTPRoute of that host to `gw/web`; then `route`, when given.
fn manifests(route: Option<String>) -> String {
    let gateway = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: gw}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: tls, protocol: TLS, port: 443, tls: {mode: Passthrough}}
  - {name: https, protocol: HTTPS, port: 443, hostname: web.example.com, tls: {certificateRefs: [{name: web-cert}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: gw}
spec:
  parentRefs: [{name: edge, sectionName: https}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
";
    let mut parts = vec![gateway.to_string()];
    parts.extend(route);
    docs(&parts)
}

/// A TLSRoute `gw/db` on the TLS listener passing its hosts through to `backends` (name,
/// weight). `web.example.com` is among its hosts, but the HTTPS listener terminates that one.
fn tls_route(backends: &[(&str, u32)]) -> Option<String> {
    let refs = (backends.iter())
        .map(|(name, w)| format!("{{name: {name}, port: {SVC_PORT}, weight: {w}}}"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: db, namespace: gw}}
spec:
  parentRefs: [{{name: edge, sectionName: tls}}]
  hostnames: [db.example.com, \"*.passthrough.example.com\", web.example.com]
  rules: [{{backendRefs: [{refs}]}}]
"
    ))
}

/// A TLSRoute's hosts reach their backends through Envoy still encrypted (the backend's
/// certificate, by exact and wildcard hostname), beside a host Envoy terminates on the same
/// port; route changes move new connections (one backend, then another, then both weighted);
/// once the route is removed, its hosts' connections are closed and reach no backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tlsroute_passes_its_hosts_through_by_sni_and_follows_changes() {
    let ca = Ca::new();
    let (leaf_a, leaf_b) = (ca.leaf("db-a", &PASSED), ca.leaf("db-b", &PASSED));
    let web_leaf = ca.leaf("web", &["web.example.com"]);
    let a = EchoBackend::start_with("db-a", Some(acceptor(&leaf_a))).await;
    let b = EchoBackend::start_with("db-b", Some(acceptor(&leaf_b))).await;
    let web = Backend::start("gw/web").await;
    let secret = tls_secret("web-cert", &web_leaf);
    let h = Harness::start(
        &[
            ("svc.yaml", backend_services(&a, &b, &web)),
            ("secret.yaml", secret),
            ("gateway.yaml", manifests(tls_route(&[("db-a", 1)]))),
        ],
        XdsProtocol::Delta,
    )
    .await;
    let tls = ca.connector();
    let db = "db.example.com";

    // The route's exact host: the handshake is A's own and bytes go through Envoy and back.
    let mut conn = expect_backend(&h, &tls, db, "db-a", &leaf_a).await;
    assert_echoes(&h, &mut conn, b"sluice passes TLS through\n").await;
    // A name under the wildcard hostname goes to A too.
    expect_backend(&h, &tls, "x.passthrough.example.com", "db-a", &leaf_a).await;

    // The HTTPS listener's host stays Envoy's (its Secret's certificate, HTTP routed to gw/web)
    // though the TLSRoute names it too; an SNI no route names gets no filter chain.
    let conn = (handshake(&h, &tls, "web.example.com").await).expect("handshake with Envoy");
    assert!(
        *conn.cert == **web_leaf.cert.der(),
        "web.example.com: not the Secret's certificate"
    );
    h.expect_tls("web.example.com", "/", "gw/web").await;
    let other = reached(&h, &tls, "other.example.com").await;
    assert!(other.is_err(), "SNI other.example.com reached {other:?}");

    // The route rewritten to B: new connections reach B, and only B.
    h.write("gateway.yaml", &manifests(tls_route(&[("db-b", 1)])));
    expect_backend(&h, &tls, db, "db-b", &leaf_b).await;
    for _ in 0..10 {
        assert_eq!(reached(&h, &tls, db).await, Ok("db-b".to_string()));
    }

    // Weights 1:1: once A answers again, at most 60 connections see both (all on one side once
    // in 2^59 runs).
    let both = tls_route(&[("db-a", 1), ("db-b", 1)]);
    h.write("gateway.yaml", &manifests(both));
    expect_backend(&h, &tls, db, "db-a", &leaf_a).await;
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..60 {
        *seen
            .entry(reached(&h, &tls, db).await.unwrap_or_else(|e| e))
            .or_default() += 1;
        if seen.contains_key("db-a") && seen.contains_key("db-b") {
            break;
        }
    }
    let outcomes = seen.keys().collect::<Vec<_>>();
    assert_eq!(
        outcomes,
        ["db-a", "db-b"],
        "{seen:?}\n{}",
        envoy_state(&h).await
    );

    // The route removed: its hosts' connections fail and reach no backend; the HTTPS listener's
    // host is still served.
    h.write("gateway.yaml", &manifests(None));
    let deadline = Instant::now() + CONVERGE;
    while let Ok(name) = reached(&h, &tls, db).await {
        if Instant::now() >= deadline {
            panic!("SNI {db} still reaches {name}\n{}", envoy_state(&h).await);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let counts = || [&a, &b].map(EchoBackend::connections);
    let before = counts();
    for sni in [db, "x.passthrough.example.com"].repeat(3) {
        let got = reached(&h, &tls, sni).await;
        assert!(
            got.is_err(),
            "SNI {sni} reached {got:?} after the TLSRoute was removed"
        );
    }
    assert_eq!(
        counts(),
        before,
        "a backend got a connection after the TLSRoute was removed"
    );
    h.expect_tls("web.example.com", "/", "gw/web").await;
}

/// A TLS listener in mode `Terminate`: Envoy's HTTPS listener terminates TLS for the TLSRoute's
/// host with the listener's Secret (the handshake shows that certificate) and forwards the
/// decrypted bytes over plain TCP to the route's backend, which greets and echoes. Beside it on
/// the same port, a TLS listener in mode `Passthrough` passes another TLSRoute's host through
/// (TLSRouteModeMixed): that handshake is the backend's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tlsroute_on_a_terminate_listener_forwards_decrypted_tcp() {
    let ca = Ca::new();
    let leaf = ca.leaf("term", &["term.example.com"]);
    let plain = EchoBackend::start("term-plain").await;
    let pass_leaf = ca.leaf("pass", &["pass.example.com"]);
    let passed = EchoBackend::start_with("pass-tls", Some(acceptor(&pass_leaf))).await;
    let svc = docs(&[
        service("gw", "term-plain", 9000, ""),
        slice("gw", "term-plain", "", plain.port, "0"),
        service("gw", "pass-tls", 9000, ""),
        slice("gw", "pass-tls", "", passed.port, "0"),
    ]);
    let gateway = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: term-gw, namespace: gw}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: term, protocol: TLS, port: 443, hostname: term.example.com, tls: {mode: Terminate, certificateRefs: [{name: term-cert}]}}
  - {name: pass, protocol: TLS, port: 443, hostname: pass.example.com, tls: {mode: Passthrough}}
";
    // A TLSRoute `name` on the listener of that name, for `<name>.example.com`, to `backend`.
    let route = |name: &str, backend: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: {name}, namespace: gw}}
spec:
  parentRefs: [{{name: term-gw, sectionName: {name}}}]
  hostnames: [{name}.example.com]
  rules: [{{backendRefs: [{{name: {backend}, port: 9000}}]}}]
"
        )
    };
    let gateway = docs(&[
        gateway.to_string(),
        route("term", "term-plain"),
        route("pass", "pass-tls"),
    ]);
    let h = Harness::start(
        &[
            ("svc.yaml", svc),
            ("secret.yaml", tls_secret("term-cert", &leaf)),
            ("gateway.yaml", gateway),
        ],
        XdsProtocol::Delta,
    )
    .await;
    let tls = ca.connector();

    // The handshake shows the Secret's certificate and the plain backend greets: Envoy terminated.
    let mut conn = expect_backend(&h, &tls, "term.example.com", "term-plain", &leaf).await;
    assert_echoes(&h, &mut conn, b"sluice terminates TLS\n").await;

    // The passthrough listener's host on the same port: the backend's own certificate.
    expect_backend(&h, &tls, "pass.example.com", "pass-tls", &pass_leaf).await;
}
