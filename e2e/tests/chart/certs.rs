//! The release's certificate Secrets: read into folders and checked with `openssl verify`.

use super::*;

/// Writes the data of Secret `name` as files into `dir`, decoded.
pub fn secret_files(env: &Env, ns: &str, name: &str, dir: &Path) -> BTreeMap<String, String> {
    let secret = json(env, &["get", "secret", "-n", ns, name]);
    assert_eq!(secret["type"], "kubernetes.io/tls", "{name}");
    std::fs::create_dir_all(dir).unwrap();
    let mut data = BTreeMap::new();
    for (key, value) in secret["data"].as_object().unwrap() {
        let value = value.as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value)
            .unwrap();
        std::fs::write(dir.join(key), bytes).unwrap();
        data.insert(key.clone(), value.to_string());
    }
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(data.contains_key(key), "Secret {name} has no {key}");
    }
    data
}

/// `openssl verify` of `dir`/tls.crt against `dir`/ca.crt for `purpose`, and for `host` when given.
pub fn verify_certificate(dir: &Path, purpose: &str, host: Option<&str>) {
    let mut cmd = Command::new("openssl");
    cmd.arg("verify")
        .arg("-CAfile")
        .arg(dir.join("ca.crt"))
        .args(["-purpose", purpose]);
    if let Some(host) = host {
        cmd.args(["-verify_hostname", host]);
    }
    cmd.arg(dir.join("tls.crt"));
    output_ok(&mut cmd, &format!("openssl verify of {}", dir.display()));
}

/// The release's three certificate Secrets, as written into folders of `dir` and as the
/// Secrets' data.
pub struct Certs {
    pub webhook_dir: PathBuf,
    pub server_dir: PathBuf,
    pub client_dir: PathBuf,
    pub webhook: BTreeMap<String, String>,
    pub server: BTreeMap<String, String>,
    pub client: BTreeMap<String, String>,
}

/// Reads the release's certificate Secrets into `dir` and checks them: each certificate verifies
/// against its Secret's CA for its use and names, the two xDS Secrets share one CA and the
/// webhook's CA is another.
pub fn check_certificates(env: &Env, rel: &Rel, ns: &str, dir: &Path) -> Certs {
    let fullname = rel.fullname;
    let webhook_dir = dir.join("webhook");
    let server_dir = dir.join("xds-server");
    let client_dir = dir.join("xds-client");
    let webhook = secret_files(env, ns, &format!("{fullname}-webhook"), &webhook_dir);
    let server = secret_files(env, ns, &format!("{fullname}-xds-server"), &server_dir);
    let client = secret_files(env, ns, &format!("{fullname}-xds-client"), &client_dir);
    verify_certificate(
        &webhook_dir,
        "sslserver",
        Some(&format!("{fullname}-webhook.{ns}.svc")),
    );
    verify_certificate(
        &server_dir,
        "sslserver",
        Some(&format!("{fullname}.{ns}.svc")),
    );
    verify_certificate(&client_dir, "sslclient", None);
    assert_eq!(server["ca.crt"], client["ca.crt"], "one xDS CA");
    assert_ne!(
        server["ca.crt"], webhook["ca.crt"],
        "the webhook's CA is its own"
    );
    Certs {
        webhook_dir,
        server_dir,
        client_dir,
        webhook,
        server,
        client,
    }
}

/// The release's certificate Secrets are still `certs`.
pub fn same_certificates(env: &Env, rel: &Rel, ns: &str, dir: &Path, certs: &Certs) {
    let fullname = rel.fullname;
    for (name, data) in [
        ("webhook", &certs.webhook),
        ("xds-server", &certs.server),
        ("xds-client", &certs.client),
    ] {
        let now = secret_files(env, ns, &format!("{fullname}-{name}"), dir);
        assert_eq!(&now, data, "Secret {fullname}-{name} changed");
    }
}
