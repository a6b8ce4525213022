//! What routing reads of a Secret (`tls.crt`/`tls.key`, `ca.crt`), checked once when the Secret is
//! stored.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;

/// What routing reads of a Secret: its PEM certificate chain and private key, checked once when
/// the Secret is stored, or why they cannot serve TLS. Envoy refuses a certificate it cannot
/// parse and a key that is not the certificate's; sluice finds both here rather than send them.
/// (A build reads a TLS Secret per host that names it; parsing certificates and loading keys
/// there would cost a full build milliseconds per TLS host.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsSecretData {
    /// The PEM texts are shared with the models built from them, not copied into each.
    Usable {
        cert_pem: Arc<str>,
        key_pem: Arc<str>,
    },
    /// What is wrong, for the status of the objects that name the Secret.
    Unusable(&'static str),
}

/// What routing reads of a Secret: the certificate and key it terminates TLS with
/// (`tls.crt`, `tls.key`), and the CA certificates it verifies TLS backends with (`ca.crt`),
/// each checked once, when the Secret is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretData {
    pub tls: TlsSecretData,
    pub ca: CaBundle,
}

/// A Secret's `ca.crt`: the CA certificates a backend's certificate must chain to
/// (docs/ingressroute.md, "Secure backends").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaBundle {
    /// PEM certificates, each of which parses as X.509 (the text as stored, shared with the
    /// models built from it).
    Usable(Arc<str>),
    /// Missing, or what is wrong with it, for the status of the objects that name the Secret.
    Unusable(&'static str),
}

impl From<&Secret> for SecretData {
    fn from(secret: &Secret) -> Self {
        SecretData {
            tls: TlsSecretData::from(secret),
            ca: CaBundle::from(secret),
        }
    }
}

/// The text of a Secret's key, from `data` or else `stringData`; None when absent or not UTF-8.
fn secret_text(secret: &Secret, k: &str) -> Option<String> {
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|b| &b.0[..]);
    let string_data = secret
        .string_data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|s| s.as_bytes());
    data.or(string_data)
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_string)
}

impl From<&Secret> for CaBundle {
    fn from(secret: &Secret) -> Self {
        let Some(pem) = secret_text(secret, "ca.crt") else {
            return CaBundle::Unusable("it has no ca.crt");
        };
        match check_ca_bundle(&pem) {
            Ok(()) => CaBundle::Usable(pem.into()),
            Err(what) => CaBundle::Unusable(what),
        }
    }
}

/// What routing reads of a ConfigMap: its `ca.crt` (a BackendTLSPolicy's CA certificates), as
/// a Secret's is read. A change to anything else of a ConfigMap compares equal and rebuilds
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapCa {
    pub ca: CaBundle,
}

impl From<&k8s_openapi::api::core::v1::ConfigMap> for ConfigMapCa {
    fn from(cm: &k8s_openapi::api::core::v1::ConfigMap) -> Self {
        let ca = match cm.data.as_ref().and_then(|d| d.get("ca.crt")) {
            None => CaBundle::Unusable("it has no ca.crt"),
            Some(pem) => match check_ca_bundle(pem) {
                Ok(()) => CaBundle::Usable(pem.as_str().into()),
                Err(what) => CaBundle::Unusable(what),
            },
        };
        ConfigMapCa { ca }
    }
}

/// Whether a PEM text holds CA certificates Envoy can load: at least one PEM certificate, and
/// nothing in a certificate block that does not parse as X.509 (Envoy refuses the whole
/// validation context for one bad certificate).
fn check_ca_bundle(pem: &str) -> Result<(), &'static str> {
    use rustls::pki_types::CertificateDer;
    let mut found = false;
    for cert in rustls_pemfile::certs(&mut pem.as_bytes()) {
        let Ok(cert): Result<CertificateDer<'static>, _> = cert else {
            return Err("ca.crt holds a PEM certificate block that does not decode");
        };
        if rustls::server::ParsedCertificate::try_from(&cert).is_err() {
            return Err("ca.crt holds a certificate that is not a valid X.509 certificate");
        }
        found = true;
    }
    if found {
        Ok(())
    } else {
        Err("ca.crt holds no PEM certificate")
    }
}

impl From<&Secret> for TlsSecretData {
    fn from(secret: &Secret) -> Self {
        let field = |k: &str| secret_text(secret, k);
        let Some(cert_pem) = field("tls.crt") else {
            return TlsSecretData::Unusable("it has no tls.crt");
        };
        let Some(key_pem) = field("tls.key") else {
            return TlsSecretData::Unusable("it has no tls.key");
        };
        match check_tls_pair(&cert_pem, &key_pem) {
            Ok(()) => TlsSecretData::Usable {
                cert_pem: cert_pem.into(),
                key_pem: key_pem.into(),
            },
            Err(what) => TlsSecretData::Unusable(what),
        }
    }
}

/// Whether a PEM certificate chain and key can serve TLS in Envoy, as far as sluice can tell:
/// a certificate that parses as X.509 first, and a key that is that certificate's. A key of a
/// type sluice cannot load (it loads RSA, ECDSA P-256 and P-384, and Ed25519 keys) is left for
/// Envoy to judge.
fn check_tls_pair(cert_pem: &str, key_pem: &str) -> Result<(), &'static str> {
    use rustls::pki_types::CertificateDer;
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .filter_map(Result::ok)
        .collect();
    let Some(first) = chain.first() else {
        return Err("tls.crt holds no PEM certificate");
    };
    let Ok(Some(key)) = rustls_pemfile::private_key(&mut key_pem.as_bytes()) else {
        return Err("tls.key holds no PEM private key");
    };
    if rustls::server::ParsedCertificate::try_from(first).is_err() {
        return Err("the first certificate in tls.crt is not a valid X.509 certificate");
    }
    let Ok(signing_key) = rustls::crypto::ring::sign::any_supported_type(&key) else {
        return Ok(());
    };
    match rustls::sign::CertifiedKey::new(chain, signing_key).keys_match() {
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err("tls.key is not the private key of the first certificate in tls.crt")
        }
        _ => Ok(()),
    }
}
