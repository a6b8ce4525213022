//! TLS of the xDS server (`--xds-cert`, `--xds-key`, `--xds-ca`): the serving certificate is
//! re-read when its files change, as the webhook's is ([`ReloadingCert`]), so cert-manager or a
//! rotated Secret volume takes effect at the next handshake without a restart; connections
//! already open keep their session. With a CA, only clients presenting a certificate it signed
//! are served; the CA file is re-read when it changes too ([`ReloadingCa`]), so a new CA (a
//! bundle of the old and the new one while Envoys move over) needs no restart either.
//!
//! Handshakes run on tasks of their own, at most [`HANDSHAKE_TIMEOUT`] each, so a client that
//! connects and says nothing holds up no other client.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use tokio_stream::StreamExt;

use sluice_tls::{ReloadingCert, TlsError};

/// How long a client has to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the certificate files are looked at.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The xDS server's TLS: the certificate (reloaded) and the rustls configuration serving it.
#[derive(Clone)]
pub struct XdsTls {
    cert: Arc<ReloadingCert>,
    client_ca: Option<Arc<ReloadingCa>>,
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for XdsTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsTls").finish_non_exhaustive()
    }
}

impl XdsTls {
    /// Loads the certificate and key, and the client CA when given; fails when a file cannot be
    /// read or used, so a bad start is loud.
    pub fn load(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<XdsTls, TlsError> {
        let reloading = ReloadingCert::load(cert, key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let client_ca = match client_ca {
            Some(path) => Some(Arc::new(ReloadingCa::load(path, Arc::clone(&provider))?)),
            None => None,
        };
        let builder = match &client_ca {
            Some(ca) => builder.with_client_cert_verifier(Arc::clone(ca) as _),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::clone(&reloading) as _);
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(XdsTls {
            cert: reloading,
            client_ca,
            config: Arc::new(config),
        })
    }

    /// The TLS connections of `tcp`, handshakes done, while the returned stream is held; the
    /// certificate files are looked at every `reload` meanwhile.
    pub fn incoming<S, E>(
        &self,
        mut tcp: S,
        reload: Duration,
    ) -> tokio_stream::wrappers::ReceiverStream<
        Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>, std::io::Error>,
    >
    where
        S: tokio_stream::Stream<Item = Result<tokio::net::TcpStream, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + Send,
    {
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&self.config));
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let watcher_tx = tx.clone();
        if let Some(ca) = &self.client_ca {
            let tx = tx.clone();
            tokio::spawn(Arc::clone(ca).watch(reload, async move { tx.closed().await }));
        }
        tokio::spawn(
            Arc::clone(&self.cert).watch(reload, "xDS", async move { watcher_tx.closed().await }),
        );
        tokio::spawn(async move {
            loop {
                let conn = tokio::select! {
                    _ = tx.closed() => return,
                    conn = tcp.next() => conn,
                };
                let stream = match conn {
                    Some(Ok(stream)) => stream,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "xDS connection not accepted");
                        continue;
                    }
                    None => return,
                };
                let peer = stream.peer_addr().ok();
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send(Ok(tls)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(?peer, error = %e, "xDS TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(?peer, "xDS TLS handshake timed out"),
                    }
                });
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }
}

/// The CA of `--xds-ca` as rustls's verifier of client certificates, replaced whole when the
/// file's content changes. Content that cannot be used (no certificate, a broken one) is not
/// taken: the CA before it goes on verifying. It sends clients no list of acceptable CAs (Envoy
/// has one certificate to present either way).
#[derive(Debug)]
pub struct ReloadingCa {
    path: PathBuf,
    provider: Arc<CryptoProvider>,
    /// The file's content last looked at, and the verifier of the content last taken.
    state: RwLock<(Vec<u8>, Arc<dyn ClientCertVerifier>)>,
}

impl ReloadingCa {
    pub fn load(path: &Path, provider: Arc<CryptoProvider>) -> Result<ReloadingCa, TlsError> {
        let pem = sluice_tls::read(path)?;
        let verifier = verifier(path, &pem, Arc::clone(&provider))?;
        Ok(ReloadingCa {
            path: path.to_path_buf(),
            provider,
            state: RwLock::new((pem, verifier)),
        })
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&state.1)
    }

    /// Reads the file; true when new content was taken, an error when new content cannot be used
    /// (it is remembered, so the same content is not tried again).
    fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let pem = sluice_tls::read(&self.path)?;
        if self.state.read().unwrap_or_else(PoisonError::into_inner).0 == pem {
            return Ok(false);
        }
        let result = verifier(&self.path, &pem, Arc::clone(&self.provider));
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.0 = pem;
        state.1 = result?;
        Ok(true)
    }

    /// Looks at the file every `interval` until `shutdown` resolves.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: impl Future<Output = ()>) {
        let path = self.path.display().to_string();
        sluice_tls::poll_files(
            interval,
            shutdown,
            move || self.reload_if_changed(),
            |outcome| match outcome {
                Ok(()) => tracing::info!(ca = %path, "xDS client CA reloaded"),
                Err(e) => tracing::warn!(error = %e, "xDS client CA not reloaded; the previous one keeps verifying"),
            },
        )
        .await
    }
}

/// A verifier requiring a client certificate signed by a CA of `pem` (the file at `path`).
fn verifier(
    path: &Path,
    pem: &[u8],
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let name = path.display().to_string();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &pem[..]) {
        let cert = cert.map_err(|e| TlsError::Pem {
            path: name.clone(),
            message: e.to_string(),
        })?;
        roots.add(cert).map_err(TlsError::Config)?;
    }
    if roots.is_empty() {
        return Err(TlsError::NoCertificate { path: name });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::Pem {
            path: name,
            message: e.to_string(),
        })
}

impl ClientCertVerifier for ReloadingCa {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}
