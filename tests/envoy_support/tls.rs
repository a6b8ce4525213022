//! Certificates and TLS servers of the real-Envoy TLS tests: CAs made with rcgen, their leaf,
//! client and self-signed certificates as the Secrets and ConfigMaps sluice reads, and TLS
//! backends on 127.0.0.1 that answer with what their handshake saw.

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
    SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Base64 of `text`, as a Secret's data holds it.
pub fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A `kubernetes.io/tls` Secret `ns/name` holding `cert` and `key` (PEM), and `ca` under
/// `ca.crt` when given.
pub fn tls_secret(ns: &str, name: &str, cert: &str, key: &str, ca: Option<&str>) -> String {
    let ca = ca.map_or(String::new(), |ca| format!("  ca.crt: {}\n", b64(ca)));
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\ndata:\n{ca}  tls.crt: {}\n  tls.key: {}\n",
        b64(cert),
        b64(key)
    )
}

/// A `kubernetes.io/tls` Secret `ns/name` with a new self-signed certificate for `host`.
pub fn self_signed_secret(ns: &str, name: &str, host: &str) -> String {
    let cert = rcgen::generate_simple_self_signed(vec![host.to_string()]).expect("certificate");
    let key = cert.signing_key.serialize_pem();
    tls_secret(ns, name, &cert.cert.pem(), &key, None)
}

/// A CA of the test.
pub struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    /// A new self-signed CA named `cn`.
    pub fn new(cn: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("CA key");
        Ca(CertifiedIssuer::self_signed(params, key).expect("self-signed CA"))
    }

    /// The CA's certificate, DER.
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from(self.0.der().to_vec())
    }

    /// A ConfigMap `ns/name` with this CA's certificate under `ca.crt`.
    pub fn config_map(&self, ns: &str, name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {ns}}}\ndata:\n  ca.crt: {:?}\n",
            self.0.pem()
        )
    }

    /// A `kubernetes.io/tls` Secret `ns/name` as cert-manager keeps a CA: its certificate and
    /// key, and the certificate again under `ca.crt`.
    pub fn ca_secret(&self, ns: &str, name: &str) -> String {
        let cert = self.0.pem();
        tls_secret(ns, name, &cert, &self.0.key().serialize_pem(), Some(&cert))
    }

    /// A certificate of this CA named `cn`, for `sans`, and its key.
    fn sign(&self, cn: &str, sans: Vec<SanType>) -> (Certificate, KeyPair) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf parameters");
        params.subject_alt_names = sans;
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.0).expect("leaf certificate");
        (cert, key)
    }

    /// A certificate of this CA named `cn`, for `sans`, and its key (DER).
    pub fn leaf(
        &self,
        cn: &str,
        sans: Vec<SanType>,
    ) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let (cert, key) = self.sign(cn, sans);
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (CertificateDer::from(cert.der().to_vec()), key)
    }

    /// A `kubernetes.io/tls` Secret `ns/name` with a client certificate of this CA named `cn`.
    pub fn client_secret(&self, ns: &str, name: &str, cn: &str) -> String {
        let (cert, key) = self.sign(cn, Vec::new());
        tls_secret(ns, name, &cert.pem(), &key.serialize_pem(), None)
    }

    /// A client certificate of this CA named `cn` and its key, as reqwest's identity.
    pub fn client_identity(&self, cn: &str) -> reqwest::Identity {
        let (cert, key) = self.sign(cn, Vec::new());
        let pem = format!("{}{}", cert.pem(), key.serialize_pem());
        reqwest::Identity::from_pem(pem.as_bytes()).expect("client identity")
    }

    /// A TLS server configuration with a certificate of this CA for `sans`, offering `alpn`;
    /// with `clients`, it requires a client certificate of that CA.
    pub fn acceptor(&self, sans: Vec<SanType>, clients: Option<&Ca>, alpn: &[&str]) -> TlsAcceptor {
        let (cert, key) = self.leaf("backend", sans);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("TLS versions");
        let builder = match clients {
            None => builder.with_no_client_auth(),
            Some(client_ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(client_ca.der()).expect("client CA");
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots.into(),
                    provider,
                )
                .build()
                .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(vec![cert], key)
            .expect("backend certificate");
        config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        TlsAcceptor::from(Arc::new(config))
    }
}

/// What a TLS backend saw of a request: the handshake's SNI and ALPN protocol (`-` for none),
/// whether the client presented a certificate, and the request's HTTP version.
pub struct Seen {
    pub sni: String,
    pub alpn: String,
    pub client_certificate: bool,
    pub version: Version,
}

/// Starts a TLS backend on 127.0.0.1; returns its port and task. It answers each request with
/// `answer` of what it saw; a handshake Envoy or the backend gives up on ends the connection.
pub async fn tls_backend(
    acceptor: TlsAcceptor,
    answer: fn(&Seen) -> String,
) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("backend address").port();
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (_, session) = tls.get_ref();
                let sni = session.server_name().unwrap_or("-").to_string();
                let alpn = (session.alpn_protocol())
                    .map_or("-".to_string(), |p| String::from_utf8_lossy(p).into_owned());
                let client_certificate = session.peer_certificates().is_some_and(|c| !c.is_empty());
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let seen = Seen {
                        sni: sni.clone(),
                        alpn: alpn.clone(),
                        client_certificate,
                        version: req.version(),
                    };
                    let body = answer(&seen);
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
