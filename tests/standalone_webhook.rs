//! `sluice serve --manifests DIR --webhook-address …`: the real binary serves the admission webhook
//! over HTTPS in standalone mode, its cross-object index is the manifest directory and follows it
//! when files change, `/metrics` counts its verdicts, and SIGTERM stops it cleanly.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use serde_json::{Value, json};

#[path = "envoy_support/ports.rs"]
mod ports;

use ports::free_port;

/// Writes a serving certificate for 127.0.0.1 into `dir`; returns the CA's PEM.
fn write_pki(dir: &Path) -> String {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "sluice test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    ca.pem()
}

/// `sluice serve` in standalone mode over `manifests` with the webhook on `webhook_port`, its
/// certificate and key in `pki` (`tls.crt`, `tls.key`).
fn serve_command(manifests: &Path, webhook_port: u16, pki: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--manifests"])
        .arg(manifests)
        .args(["--xds-address", &format!("127.0.0.1:{}", free_port())])
        .args(["--webhook-address", &format!("127.0.0.1:{webhook_port}")])
        .arg("--webhook-cert")
        .arg(pki.join("tls.crt"))
        .arg("--webhook-key")
        .arg(pki.join("tls.key"));
    cmd
}

fn root(namespace: &str, name: &str, fqdn: &str) -> Value {
    json!({"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"virtualhost": {"fqdn": fqdn},
                 "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}})
}

fn review(uid: &str, object: &Value) -> Value {
    let gvk = json!({"group": "contour.heptio.com", "version": "v1beta1", "kind": "IngressRoute"});
    let gvr =
        json!({"group": "contour.heptio.com", "version": "v1beta1", "resource": "ingressroutes"});
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
        "operation": "CREATE", "userInfo": {"username": "test"},
        "object": object, "oldObject": null, "dryRun": false}})
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn post(client: &reqwest::Client, port: u16, body: &Value) -> Value {
    let resp = client
        .post(format!("https://127.0.0.1:{port}/validate"))
        .json(body)
        .send()
        .await
        .expect("the webhook answers");
    assert_eq!(resp.status(), 200);
    resp.json().await.expect("an AdmissionReview")
}

/// Polls `check` every 50 ms until it holds or 30 s pass.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_serve_runs_the_webhook_over_the_manifest_directory() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let owner = root("shop", "www", "www.example.com");
    std::fs::write(
        manifests.join("www.json"),
        serde_json::to_vec(&owner).unwrap(),
    )
    .unwrap();
    let ca = write_pki(dir.path());
    let port = free_port();
    let metrics_port = free_port();
    let child = serve_command(&manifests, port, dir.path())
        .args(["--metrics-address", &format!("127.0.0.1:{metrics_port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let mut serve = Serve(child);
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    eventually("/readyz", || async {
        match client
            .get(format!("https://127.0.0.1:{port}/readyz"))
            .send()
            .await
        {
            Ok(r) => r.status() == 200,
            Err(_) => false,
        }
    })
    .await;

    // A second root for the fqdn the directory's root owns is denied, naming the owner.
    let answer = post(
        &client,
        port,
        &review("u-1", &root("other", "copy", "www.example.com")),
    )
    .await;
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("www.example.com"), "{message}");
    assert!(message.contains("shop/www"), "{message}");

    // A fresh fqdn is allowed.
    let answer = post(
        &client,
        port,
        &review("u-2", &root("other", "new", "new.example.com")),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    // A root added to the directory: the index follows the reload.
    std::fs::write(
        manifests.join("new.json"),
        serde_json::to_vec(&root("team", "new", "new.example.com")).unwrap(),
    )
    .unwrap();
    eventually("the index to follow the directory", || async {
        let a = post(
            &client,
            port,
            &review("u-3", &root("other", "new", "new.example.com")),
        )
        .await;
        a["response"]["allowed"] == false
            && a["response"]["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("team/new"))
    })
    .await;

    // The verdicts are counted on /metrics, next to the xDS counters.
    let metrics = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .unwrap();
    let denied = metrics
        .lines()
        .find(|l| {
            l.starts_with(r#"sluice_webhook_admission_requests_total{endpoint="validate",kind="IngressRoute.contour.heptio.com",operation="CREATE",verdict="denied"}"#)
        })
        .unwrap_or_else(|| panic!("no denied count in:\n{metrics}"));
    let count: f64 = denied.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 2.0, "{denied}");
    assert!(metrics.contains("sluice_xds_nacks_total 0"), "{metrics}");
    assert!(
        metrics.contains("sluice_http_route_shards 1\n"),
        "{metrics}"
    );

    // SIGTERM: a clean stop.
    let pid = serve.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = serve.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "sluice did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    if let Some(mut e) = serve.0.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("admission webhook listening"), "{stderr}");
}

/// An unusable webhook certificate stops `sluice serve` at start, naming the file; it does not
/// run on without its webhook.
#[test]
fn serve_exits_at_start_when_the_webhook_certificate_is_unusable() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let cert = dir.path().join("tls.crt");
    std::fs::write(&cert, "not a certificate").unwrap();
    std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
    let mut child = serve_command(&manifests, free_port(), dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice serve kept running with an unusable webhook certificate");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("admission webhook") && stderr.contains(&cert.display().to_string()),
        "{stderr}"
    );
}
