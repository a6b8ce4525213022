//! Test PKI: a CA made with rcgen, leaf certificates for 127.0.0.1 signed by it, and PEM files
//! replaced the way a Secret volume update or cert-manager replaces them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "sluice test CA");
        let key = KeyPair::generate().unwrap();
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for 127.0.0.1: (cert PEM, key PEM, cert DER).
    pub fn leaf(&self, cn: &str) -> (String, String, Vec<u8>) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

pub struct Files {
    _dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Files {
    pub fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        Files {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            _dir: dir,
        }
    }

    /// Replaces both files the way a Secret volume update or cert-manager does: new content
    /// written aside, then renamed into place (the key first, then the certificate).
    pub fn write(&self, cert_pem: &str, key_pem: &str) {
        replace(&self.key, key_pem);
        replace(&self.cert, cert_pem);
    }
}

pub fn replace(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
