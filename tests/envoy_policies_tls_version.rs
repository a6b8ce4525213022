//! Real Envoy fed by sluice standalone: a TLS virtual host's `minimumProtocolVersion`, against
//! real TLS 1.1, 1.2 and 1.3 clients.

mod envoy_support;

use std::time::Duration;

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, docs, services};
use sluice::cli::bootstrap::XdsProtocol;

// ---- minimumProtocolVersion ----

/// How a TLS 1.1 handshake went.
#[derive(Debug, PartialEq)]
enum Tls11 {
    /// Negotiated TLS 1.1.
    Done,
    /// Envoy refused it with this TLS alert: 70 protocol_version (the version is below the
    /// host's minimum), 40 handshake_failure (no cipher suite in common), ...
    Alert(u32),
    /// Failed otherwise; openssl's output.
    Failed(String),
}

/// A TLS handshake by `openssl s_client` offering only TLS 1.1 (at security level 0, without
/// which OpenSSL 3 does not offer it), to 127.0.0.1:`port` with SNI `host`.
fn tls11_handshake(port: u16, host: &str) -> Tls11 {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
        .args([
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            host,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let negotiated = stdout.contains("Protocol  : TLSv1.1") && !stdout.contains("Cipher is (NONE)");
    if out.status.success() && negotiated {
        return Tls11::Done;
    }
    match stderr.split("SSL alert number ").nth(1) {
        Some(n) => Tls11::Alert(n.trim().parse().unwrap_or(0)),
        None => Tls11::Failed(format!("{stdout}\n{stderr}")),
    }
}

/// An HTTPS request with SNI and Host `host`, the client offering only TLS `version`; the
/// backend's name, or the error.
async fn get_tls_version(h: &Harness, host: &str, version: reqwest::tls::Version) -> String {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .danger_accept_invalid_certs(true)
        .min_tls_version(version)
        .max_tls_version(version)
        .resolve(
            host,
            format!("127.0.0.1:{}", h.https_port).parse().expect("addr"),
        )
        .build()
        .expect("tls client");
    let url = format!("https://{host}:{}/", h.https_port);
    match client.get(&url).send().await {
        Ok(r) if r.status() == 200 => r.text().await.unwrap_or_default(),
        Ok(r) => r.status().to_string(),
        Err(e) => format!("error: {e:?}"),
    }
}

/// IngressRoute v1beta1 TLS virtual hosts demanding TLS 1.3, TLS 1.2 and (by default) TLS
/// 1.1: a TLS 1.3 client is served by all three; a client limited to TLS 1.2 (rustls) is
/// refused by the first and served by the others; a TLS 1.1 client (`openssl s_client`) is
/// refused by the first two for its version, and not for its version by the third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimum_protocol_version_refuses_older_clients() {
    let app = Backend::start("mpv/app").await;
    let ck = rcgen::generate_simple_self_signed(vec![
        "v13.example.com".to_string(),
        "v12.example.com".to_string(),
        "v11.example.com".to_string(),
        "default.example.com".to_string(),
    ])
    .unwrap();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: mpv}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    let root = |name: &str, tls: &str| {
        format!(
            "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: mpv}}\nspec:\n  virtualhost:\n    fqdn: {name}.example.com\n    tls: {tls}\n  routes:\n  - match: /\n    services: [{{name: app, port: 80}}]\n"
        )
    };
    let routes = docs(&[
        root("v13", "{secretName: cert, minimumProtocolVersion: \"1.3\"}"),
        root("v12", "{secretName: cert, minimumProtocolVersion: \"1.2\"}"),
        root("v11", "{secretName: cert, minimumProtocolVersion: \"1.1\"}"),
        root("default", "{secretName: cert}"),
    ]);
    let h = Harness::start(
        &[
            ("svc.yaml", services("mpv", &[&app])),
            ("secret.yaml", secret),
            ("route.yaml", routes),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    use reqwest::tls::Version;
    let all = [
        "v13.example.com",
        "v12.example.com",
        "v11.example.com",
        "default.example.com",
    ];
    for host in all {
        h.expect_tls(host, "/", "mpv/app").await;
        assert_eq!(
            get_tls_version(&h, host, Version::TLS_1_3).await,
            "mpv/app",
            "{host}: TLS 1.3"
        );
    }
    let got = get_tls_version(&h, "v13.example.com", Version::TLS_1_2).await;
    assert!(
        got.contains("AlertReceived(ProtocolVersion)"),
        "TLS 1.2 client served by a 1.3 vhost: {got}"
    );
    for host in ["v12.example.com", "v11.example.com", "default.example.com"] {
        let got = get_tls_version(&h, host, Version::TLS_1_2).await;
        assert_eq!(got, "mpv/app", "{host}: TLS 1.2");
    }
    // TLS 1.1: the 1.2 and 1.3 hosts, and a host naming no minimum (sluice's default is 1.2),
    // refuse the version itself (alert 70, protocol_version); the host asking for 1.1 completes
    // the handshake (it offers the CBC suites a TLS 1.1 client has).
    for host in ["v13.example.com", "v12.example.com", "default.example.com"] {
        let got = tls11_handshake(h.https_port, host);
        assert_eq!(got, Tls11::Alert(70), "{host}: TLS 1.1");
    }
    let got = tls11_handshake(h.https_port, "v11.example.com");
    assert_eq!(got, Tls11::Done, "v11.example.com: TLS 1.1");
}
