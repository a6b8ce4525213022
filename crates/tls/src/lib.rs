#![forbid(unsafe_code)]
//! The serving certificate, reloaded when its files change.
//!
//! [`ReloadingCert`] is a rustls certificate resolver holding the current certificate and key in an
//! `Arc` that a background task swaps when the PEM files change (polled: this works for plain
//! files, for editors that replace files, and for Kubernetes Secret volumes that swap a symlink).
//! Every new handshake gets the current pair; connections already open keep theirs, so a rotation
//! drops nothing. A pair that does not parse or whose key does not match the certificate (e.g. the
//! certificate written, the key not yet) is not taken: the old pair keeps serving until a good one
//! appears.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate/key pair could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: String },
    #[error("{path}: no PEM private key found")]
    NoKey { path: String },
    #[error("{path}: {message}")]
    Pem { path: String, message: String },
    #[error("TLS configuration: {0}")]
    Config(rustls::Error),
    #[error("certificate {cert} and key {key} do not form a usable pair: {source}")]
    Pair {
        cert: String,
        key: String,
        source: rustls::Error,
    },
}

/// Parses a PEM certificate chain and private key into a pair rustls can serve.
pub fn build_certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, TlsError> {
    let cert_name = cert_path.display().to_string();
    let key_name = key_path.display().to_string();
    let chain = rustls_pemfile::certs(&mut &cert_pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_name.clone(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_name });
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| TlsError::Pem {
            path: key_name.clone(),
            message: e.to_string(),
        })?
        .ok_or_else(|| TlsError::NoKey {
            path: key_name.clone(),
        })?;
    CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider()).map_err(
        |source| TlsError::Pair {
            cert: cert_name,
            key: key_name,
            source,
        },
    )
}

/// The file's bytes, or [`TlsError::Read`] naming it.
pub fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// A certificate resolver whose pair is swapped when the files change.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// File contents of the pair last looked at (loaded or refused), to notice changes.
    seen: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl ReloadingCert {
    /// Loads the pair; fails when it cannot be used (so a bad start is loud, not silent).
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<ReloadingCert>, TlsError> {
        let cert_pem = read(cert_path)?;
        let key_pem = read(key_path)?;
        let ck = build_certified_key(&cert_pem, &key_pem, cert_path, key_path)?;
        Ok(Arc::new(ReloadingCert {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: RwLock::new(Arc::new(ck)),
            seen: Mutex::new((cert_pem, key_pem)),
        }))
    }

    /// Re-reads the files; when their content changed and forms a good pair, serves it from the next
    /// handshake on. Ok(true) when a new pair was taken.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let cert_pem = read(&self.cert_path)?;
        let key_pem = read(&self.key_path)?;
        {
            let mut seen = match self.seen.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if seen.0 == cert_pem && seen.1 == key_pem {
                return Ok(false);
            }
            *seen = (cert_pem.clone(), key_pem.clone());
        }
        let ck = build_certified_key(&cert_pem, &key_pem, &self.cert_path, &self.key_path);
        match ck {
            Ok(ck) => {
                let ck = Arc::new(ck);
                match self.current.write() {
                    Ok(mut g) => *g = ck,
                    Err(p) => *p.into_inner() = ck,
                }
                Ok(true)
            }
            Err(e) => {
                // Forget this content so the next poll retries it (a half-written pair completes).
                if let Ok(mut seen) = self.seen.lock() {
                    *seen = (Vec::new(), Vec::new());
                }
                Err(e)
            }
        }
    }

    /// The pair served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        match self.current.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Polls the files every `interval` until `shutdown` resolves; `what` names the server in
    /// the log ("webhook", "xDS").
    pub async fn watch(
        self: Arc<Self>,
        interval: Duration,
        what: &'static str,
        shutdown: impl Future<Output = ()>,
    ) {
        let path = self.cert_path.display().to_string();
        poll_files(
            interval,
            shutdown,
            move || self.reload_if_changed(),
            |outcome| match outcome {
                Ok(()) => tracing::info!(cert = %path, "{what} serving certificate reloaded"),
                Err(e) => tracing::warn!(error = %e, "{what} certificate not reloaded; the previous one keeps serving"),
            },
        )
        .await
    }

    /// A rustls server config (TLS 1.2 and 1.3, ALPN h2 and http/1.1) serving this resolver's pair.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let resolver: Arc<dyn ResolvesServerCert> = Arc::clone(self) as _;
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(TlsError::Config)?
                .with_no_client_auth()
                .with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Calls `reload` on a blocking thread every `interval` until `shutdown` resolves: `Ok(true)` when
/// it took new content, `Ok(false)` when nothing changed, an error when what changed cannot be
/// used. `log` hears of each new content taken and of each error once, until another outcome.
pub async fn poll_files<R>(
    interval: Duration,
    shutdown: impl Future<Output = ()>,
    reload: R,
    log: impl Fn(Result<(), &str>),
) where
    R: Fn() -> Result<bool, TlsError> + Send + Sync + 'static,
{
    let reload = Arc::new(reload);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let reload = Arc::clone(&reload);
        match tokio::task::spawn_blocking(move || reload()).await {
            Ok(Ok(true)) => {
                last_error = None;
                log(Ok(()));
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                let text = e.to_string();
                if last_error.as_deref() != Some(text.as_str()) {
                    log(Err(&text));
                    last_error = Some(text);
                }
            }
            Err(e) => log(Err(&format!("the reload task failed: {e}"))),
        }
    }
}
