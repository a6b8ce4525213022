//! The xDS server over TLS (`--xds-cert`, `--xds-key`, `--xds-ca`): a client must present a
//! certificate the CA signed; the serving certificate and the CA are re-read when their files
//! change, so the next handshake presents the new certificate, or takes clients of the new CA,
//! while an open connection goes on being served; a client that connects and says nothing holds
//! up no other client.

mod tls_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::xds::server::{AdsServer, serve};
use sluice::xds::{Snapshot, XdsTls};
use tls_support::{Ca, Files};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

struct Server {
    addr: SocketAddr,
    _stop: tokio::sync::watch::Sender<bool>,
    _snapshots: tokio::sync::watch::Sender<Arc<Snapshot>>,
}

async fn start(files: &Files, ca: &std::path::Path) -> Server {
    let tls = XdsTls::load(&files.cert, &files.key, Some(ca)).unwrap();
    let (snapshots, rx) = tokio::sync::watch::channel(Arc::new(Snapshot::default()));
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut shutdown = stop_rx.clone();
    tokio::spawn(serve(
        listener,
        AdsServer::new(rx, stop_rx),
        Some(tls),
        async move {
            let _ = shutdown.wait_for(|s| *s).await;
        },
    ));
    Server {
        addr,
        _stop: stop,
        _snapshots: snapshots,
    }
}

/// A TLS client trusting `ca_pem`, presenting `identity` (cert PEM, key PEM) when given.
fn connector(ca_pem: &str, identity: Option<(&str, &str)>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain = rustls_pemfile::certs(&mut cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = rustls_pemfile::private_key(&mut key.as_bytes())
                .unwrap()
                .unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    // Every handshake a full one: a resumed session reports the certificate of the session it
    // resumes, not the one the server serves now.
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn connect(connector: &tokio_rustls::TlsConnector, addr: SocketAddr) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(Duration::from_secs(5), connector.connect(name, tcp))
        .await
        .expect("handshake within 5 s")
        .expect("handshake")
}

fn peer_certificate(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    let (_, session) = tls.get_ref();
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]));
    session
        .peer_certificates()
        .expect("the server's certificate")[0]
        .to_vec()
}

/// Sends the HTTP/2 client preface and an empty SETTINGS frame; true when the server answers
/// with its own SETTINGS frame (the gRPC server serves this connection).
async fn speaks_http2(tls: &mut TlsStream<TcpStream>) -> bool {
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    if tls.write_all(&hello).await.is_err() || tls.flush().await.is_err() {
        return false;
    }
    let mut head = [0u8; 9];
    match tokio::time::timeout(Duration::from_secs(5), tls.read_exact(&mut head)).await {
        Ok(Ok(_)) => head[3] == 4, // frame type SETTINGS
        _ => false,
    }
}

#[tokio::test]
async fn the_serving_certificate_is_reloaded_and_clients_need_one_of_the_ca() {
    let ca = Ca::new();
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.crt");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    let files = Files::new();
    let (a_cert, a_key, a_der) = ca.leaf("first");
    files.write(&a_cert, &a_key);
    let server = start(&files, &ca_path).await;
    let (envoy_cert, envoy_key, _) = ca.leaf("envoy");
    let envoy = connector(&ca.pem(), Some((&envoy_cert, &envoy_key)));

    // A client that connects and never starts its handshake holds up no one.
    let _silent = TcpStream::connect(server.addr).await.unwrap();

    let mut first = connect(&envoy, server.addr).await;
    assert_eq!(peer_certificate(&first), a_der);

    // Without a client certificate the server ends the connection (TLS 1.3 tells the client
    // after its side of the handshake, so it shows on the first exchange).
    let anonymous = connector(&ca.pem(), None);
    assert!(
        !served(&anonymous, server.addr).await,
        "a client without a certificate was served"
    );
    // Nor with one of another CA.
    let other = Ca::new();
    let (o_cert, o_key, _) = other.leaf("intruder");
    let intruder = connector(&ca.pem(), Some((&o_cert, &o_key)));
    assert!(
        !served(&intruder, server.addr).await,
        "a client with another CA's certificate was served"
    );

    // A rotation: the next handshake presents the new certificate.
    let (b_cert, b_key, b_der) = ca.leaf("second");
    files.write(&b_cert, &b_key);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let tls = connect(&envoy, server.addr).await;
        if peer_certificate(&tls) == b_der {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The connection opened before it is still served.
    assert!(
        speaks_http2(&mut first).await,
        "the open connection was not served"
    );

    // A pair that does not parse is not taken: the new certificate keeps serving.
    std::fs::write(&files.cert, "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut tls = connect(&envoy, server.addr).await;
    assert_eq!(peer_certificate(&tls), b_der);
    assert!(speaks_http2(&mut tls).await);
}

/// True when the server serves a connection of `client` (TLS 1.3 tells a refused client after its
/// side of the handshake, so the first exchange decides).
async fn served(client: &tokio_rustls::TlsConnector, addr: SocketAddr) -> bool {
    let Ok(tcp) = TcpStream::connect(addr).await else {
        return false;
    };
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    match client.connect(name, tcp).await {
        Ok(mut tls) => speaks_http2(&mut tls).await,
        Err(_) => false,
    }
}

#[tokio::test]
async fn the_client_ca_is_reloaded_when_its_file_changes() {
    let server_ca = Ca::new();
    let (old_ca, new_ca) = (Ca::new(), Ca::new());
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.crt");
    std::fs::write(&ca_path, old_ca.pem()).unwrap();
    let files = Files::new();
    let (cert, key, _) = server_ca.leaf("xds");
    files.write(&cert, &key);
    let server = start(&files, &ca_path).await;
    let client = |ca: &Ca| {
        let (cert, key, _) = ca.leaf("envoy");
        connector(&server_ca.pem(), Some((&cert, &key)))
    };
    let (old_client, new_client) = (client(&old_ca), client(&new_ca));
    assert!(served(&old_client, server.addr).await);
    assert!(!served(&new_client, server.addr).await);

    // The new CA replaces the old one in the file: the new CA's clients are served, the old
    // one's no longer.
    tls_support::replace(&ca_path, &new_ca.pem());
    let deadline = Instant::now() + Duration::from_secs(15);
    while !served(&new_client, server.addr).await {
        assert!(
            Instant::now() < deadline,
            "the new CA was not taken within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!served(&old_client, server.addr).await);

    // Both in one file (a CA moving over): clients of either are served.
    tls_support::replace(&ca_path, &format!("{}{}", old_ca.pem(), new_ca.pem()));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !served(&old_client, server.addr).await {
        assert!(
            Instant::now() < deadline,
            "the bundle was not taken within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(served(&new_client, server.addr).await);

    // Content that is no CA is not taken: the bundle goes on verifying.
    tls_support::replace(&ca_path, "not a certificate");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(served(&old_client, server.addr).await);
    assert!(served(&new_client, server.addr).await);
}

#[test]
fn unusable_files_fail_at_start_with_the_path() {
    let ca = Ca::new();
    let files = Files::new();
    let (cert, key, _) = ca.leaf("x");
    files.write(&cert, &key);
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.crt");
    let err = XdsTls::load(&files.cert, &files.key, Some(&missing)).unwrap_err();
    assert!(err.to_string().contains("missing.crt"), "{err}");
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "").unwrap();
    let err = XdsTls::load(&files.cert, &files.key, Some(&empty)).unwrap_err();
    assert!(err.to_string().contains("no PEM certificate"), "{err}");
    let err = XdsTls::load(&files.cert, &missing, None).unwrap_err();
    assert!(err.to_string().contains("missing.crt"), "{err}");
}
