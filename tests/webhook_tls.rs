//! The real HTTPS listener (rustls): reviews over TLS with HTTP/1.1 and HTTP/2, certificate reload
//! without restart (the next handshake presents the new certificate, open connections keep
//! working, no request fails during the swap), refusal of a broken pair, start-up errors, shutdown.

mod tls_support;
mod webhook_support;

use std::net::SocketAddr;

use std::time::{Duration, Instant};

use sluice::dag::Options;
use sluice::webhook::{IndexHandle, ReloadingCert, WebhookConfig, WebhookError, serve_on};
use tls_support::{Ca, Files, replace};
use tokio::sync::oneshot;
use webhook_support::*;

fn client(ca_pem: &str, pooled: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .tls_info(true)
        .timeout(Duration::from_secs(10));
    if !pooled {
        b = b.pool_max_idle_per_host(0);
    }
    b.build().unwrap()
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), WebhookError>>,
}

async fn start(files: &Files) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = ReloadingCert::load(&files.cert, &files.key).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve_on(
        listener,
        cert,
        Duration::from_millis(50),
        mk_state(),
        async move {
            let _ = rx.await;
        },
    ));
    Server {
        addr,
        stop: Some(tx),
        task,
    }
}

/// POSTs a fixture; returns (answer, DER of the certificate the server presented).
async fn review(
    client: &reqwest::Client,
    addr: SocketAddr,
    name: &str,
) -> (serde_json::Value, Vec<u8>, reqwest::Version) {
    let resp = client
        .post(format!("https://127.0.0.1:{}/validate", addr.port()))
        .header("content-type", "application/json")
        .body(fixture_bytes(name))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let version = resp.version();
    let der = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .expect("the peer certificate");
    (resp.json().await.unwrap(), der, version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_over_https_and_certificate_reload_without_restart() {
    let ca = Ca::new();
    let files = Files::new();
    let (a_cert, a_key, a_der) = ca.leaf("first");
    files.write(&a_cert, &a_key);
    let mut server = start(&files).await;

    // HTTP/2 by ALPN, and HTTP/1.1.
    let fresh = client(&ca.pem(), false);
    let (answer, der, version) = review(&fresh, server.addr, "ir_v1beta1_valid").await;
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        answer["response"]["uid"],
        fixture("ir_v1beta1_valid")["request"]["uid"]
    );
    assert_eq!(der, a_der);
    assert_eq!(version, reqwest::Version::HTTP_2);
    let h1 = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .tls_info(true)
        .http1_only()
        .build()
        .unwrap();
    let (answer, _, version) = review(&h1, server.addr, "gateway_conflicting_listeners").await;
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(version, reqwest::Version::HTTP_11);

    // A connection opened before the swap.
    let kept = client(&ca.pem(), true);
    let (_, der, _) = review(&kept, server.addr, "ir_v1beta1_valid").await;
    assert_eq!(der, a_der);

    // Swap while requests are in flight: none fails.
    let (b_cert, b_key, b_der) = ca.leaf("second");
    let load = {
        let addr = server.addr;
        let ca_pem = ca.pem();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..60 {
                // A new client each time: a new connection, a new handshake.
                let c = client(&ca_pem, false);
                let (answer, der, _) = review(&c, addr, "ir_v1beta1_valid").await;
                assert_eq!(answer["response"]["allowed"], true);
                seen.push(der);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            seen
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    files.write(&b_cert, &b_key);
    let seen = load.await.unwrap();
    assert!(seen.iter().all(|d| *d == a_der || *d == b_der));
    assert_eq!(
        seen.last(),
        Some(&b_der),
        "the new certificate was not picked up"
    );

    // The next handshake presents the new certificate.
    let (_, der, _) = review(&client(&ca.pem(), false), server.addr, "ir_v1beta1_valid").await;
    assert_eq!(der, b_der);
    // The connection opened before the swap still works (and still has the old certificate).
    let (answer, der, _) = review(&kept, server.addr, "ir_v1beta1_valid").await;
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(der, a_der);

    // A broken pair is not taken: the current one keeps serving until a good pair appears.
    let (c_cert, c_key, c_der) = ca.leaf("third");
    replace(&files.cert, &c_cert); // the key does not match yet
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, der, _) = review(&client(&ca.pem(), false), server.addr, "ir_v1beta1_valid").await;
    assert_eq!(der, b_der);
    replace(&files.cert, "not a certificate");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, der, _) = review(&client(&ca.pem(), false), server.addr, "ir_v1beta1_valid").await;
    assert_eq!(der, b_der);
    files.write(&c_cert, &c_key);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, der, _) = review(&client(&ca.pem(), false), server.addr, "ir_v1beta1_valid").await;
        if der == c_der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the repaired pair was not picked up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Health over HTTPS, then a clean shutdown.
    let health = fresh
        .get(format!("https://127.0.0.1:{}/healthz", server.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let _ = server.stop.take().unwrap().send(());
    tokio::time::timeout(Duration::from_secs(15), &mut server.task)
        .await
        .expect("server stops")
        .unwrap()
        .unwrap();
    assert!(
        client(&ca.pem(), false)
            .get(format!("https://127.0.0.1:{}/healthz", server.addr.port()))
            .send()
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_is_refused_and_plain_http_gets_nothing() {
    let ca = Ca::new();
    let files = Files::new();
    let (cert, key, _) = ca.leaf("first");
    files.write(&cert, &key);
    let server = start(&files).await;
    let untrusting = reqwest::Client::builder().use_rustls_tls().build().unwrap();
    let url = format!("https://127.0.0.1:{}/healthz", server.addr.port());
    assert!(untrusting.get(&url).send().await.is_err());
    let plain = reqwest::Client::new();
    assert!(
        plain
            .get(format!("http://127.0.0.1:{}/healthz", server.addr.port()))
            .send()
            .await
            .is_err()
    );
    // The server is unaffected.
    assert_eq!(
        client(&ca.pem(), false)
            .get(&url)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

#[tokio::test]
async fn start_fails_loudly_on_an_unusable_certificate_or_address() {
    let files = Files::new();
    std::fs::write(&files.cert, "garbage").unwrap();
    std::fs::write(&files.key, "garbage").unwrap();
    let config = WebhookConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        cert_path: files.cert.clone(),
        key_path: files.key.clone(),
        settings: mk_settings(),
        metrics: sluice::webhook::Metrics::new(),
        reload_interval: Duration::from_secs(1),
        limits: sluice::webhook::Limits::default(),
        health_address: None,
    };
    let index = IndexHandle::new(Options::default());
    let err = sluice::webhook::start(config.clone(), index.clone(), std::future::pending())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "webhook certificate: {}: no PEM certificate found",
            files.cert.display()
        )
    );

    let ca = Ca::new();
    let (cert, key, _) = ca.leaf("x");
    files.write(&cert, &key);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = WebhookConfig {
        address: taken.local_addr().unwrap(),
        ..config
    };
    let err = sluice::webhook::start(config, index, std::future::pending())
        .await
        .unwrap_err();
    assert!(matches!(err, WebhookError::Bind { .. }), "{err}");
}
