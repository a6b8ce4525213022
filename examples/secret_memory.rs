//! What the TLS Secrets cluster mode stores cost when no routing object names them: N Secrets of
//! type `kubernetes.io/tls` (a leaf certificate with its CA in `tls.crt`, an ECDSA P-256 key,
//! the CA in `ca.crt`, as cert-manager writes them) go through `k8s::state::prepare` and into a
//! `ClusterState` as the watch puts them; the resident memory before and after is printed.
//!
//! `cargo run --release --example secret_memory -- 10000` (docs/cluster-mode.md, "Blast
//! radius"); with `SECRET_PEM_DIR=DIR`, the Secrets hold DIR's `tls.crt`, `tls.key` and `ca.crt`
//! instead. The example runs on the system allocator, not the jemalloc of the `sluice` binary.

use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use sluice::api::Kind;
use sluice::k8s::state::{ClusterState, prepare};

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "ca");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    // One certificate for all: every Secret is decoded into its own copies, as distinct ones are.
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["app.example.com".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let (mut crt, mut key, mut ca_crt) = (cert.pem() + &ca.pem(), key.serialize_pem(), ca.pem());
    // Or the files of a directory (e.g. an RSA key and a longer chain made with openssl).
    if let Some(dir) = std::env::var_os("SECRET_PEM_DIR").map(std::path::PathBuf::from) {
        let read =
            |f: &str| std::fs::read_to_string(dir.join(f)).expect("tls.crt, tls.key, ca.crt");
        (crt, key, ca_crt) = (read("tls.crt"), read("tls.key"), read("ca.crt"));
    }
    let pem_bytes = crt.len() + key.len() + ca_crt.len();
    let data =
        serde_json::json!({"tls.crt": b64(&crt), "tls.key": b64(&key), "ca.crt": b64(&ca_crt)});
    let mut state = ClusterState::default();
    let before = rss_kib();
    let started = std::time::Instant::now();
    for i in 0..n {
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": format!("app-{i}-tls"), "namespace": format!("team-{}", i % 100),
                         "resourceVersion": (1000 + i).to_string(), "uid": format!("uid-{i}"),
                         "labels": {"controller.cert-manager.io/fao": "true"},
                         "annotations": {"cert-manager.io/certificate-name": format!("app-{i}")}},
            "data": data.clone()
        });
        state.apply(prepare(Kind::Secret, secret).unwrap());
    }
    let took = started.elapsed();
    let after = rss_kib();
    println!(
        "{n} TLS Secrets ({} bytes of PEM each): resident +{} KiB ({} bytes per Secret); stored in {:?} ({:?} per Secret)",
        pem_bytes,
        after.saturating_sub(before),
        after.saturating_sub(before) * 1024 / n.max(1) as u64,
        took,
        took / n.max(1) as u32,
    );
    let secrets = &state.snapshot().secrets;
    assert_eq!(secrets.len(), n);
    let usable = secrets
        .iter()
        .filter(|(_, s)| matches!(s.tls, sluice::store::TlsSecretData::Usable { .. }))
        .count();
    println!("{usable} of them usable for TLS");
}
