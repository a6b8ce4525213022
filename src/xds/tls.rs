//! TLS of the xDS server (`--xds-cert`, `--xds-key`, `--xds-ca`): the serving certificate is
//! re-read when its files change, as the webhook's is ([`ReloadingCert`]), so cert-manager or a
//! rotated Secret volume takes effect at the next handshake without a restart; connections
//! already open keep their session. With a CA, only clients presenting a certificate it signed
//! are served (the CA itself is read once, at start).
//!
//! Handshakes run on tasks of their own, at most [`HANDSHAKE_TIMEOUT`] each, so a client that
//! connects and says nothing holds up no other client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio_stream::StreamExt;

use crate::webhook::{ReloadingCert, TlsError};

/// How long a client has to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the certificate files are looked at.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// The xDS server's TLS: the certificate (reloaded) and the rustls configuration serving it.
#[derive(Clone)]
pub struct XdsTls {
    cert: Arc<ReloadingCert>,
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
        let builder = match client_ca {
            Some(path) => {
                let name = path.display().to_string();
                let pem = crate::webhook::tls::read(path)?;
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
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| TlsError::Pem {
                            path: name,
                            message: e.to_string(),
                        })?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::clone(&reloading) as _);
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(XdsTls {
            cert: reloading,
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
