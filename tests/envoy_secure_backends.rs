//! Real Envoy fed by sluice standalone from IngressRoutes `projectcontour.io/v1` whose backends
//! are reached over TLS (`https`, `https2`): Envoy sends SNI (the validation's subject name, else
//! the Service's in-cluster name `<service>.<namespace>.svc`) and, with `validation`, verifies
//! the backend's certificate against the CA certificates of a Secret (`ca.crt`, by SDS) and the
//! subject name. A certificate that fails either is a 503; the IngressRoute's status names the
//! CA Secret and subject name in force, or says that a backend is not verified.
//!
//! The backend is an HTTP server on 127.0.0.1 that terminates TLS itself with a certificate of
//! the test's CA for `api.example.com`, and answers every request with what it saw: the SNI,
//! the ALPN protocol and the HTTP version. `Harness::start` and `Harness::write` check every
//! configuration with `envoy --mode validate`.

mod envoy_support;

use envoy_support::harness::{Harness, docs, service, slice};
use envoy_support::tls::{Ca, Seen, tls_backend};
use rcgen::SanType;
use sluice::api::{Kind, ObjectRef};
use sluice::cli::bootstrap::XdsProtocol;

/// The name the backend's certificate is for.
const SUBJECT: &str = "api.example.com";

/// A backend's answer: `sni=<SNI> alpn=<protocol> version=<HTTP version>` (`-` for none).
fn sni_alpn_and_version(seen: &Seen) -> String {
    format!(
        "sni={} alpn={} version={:?}",
        seen.sni, seen.alpn, seen.version
    )
}

/// A root IngressRoute v1 `web/<name>` for `<name>.example.com` sending everything to
/// `backend` (a YAML flow mapping).
fn root(name: &str, backend: &str) -> String {
    format!(
        "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: web}}\nspec:\n  virtualhost: {{fqdn: {name}.example.com}}\n  routes:\n  - services: [{backend}]\n"
    )
}

/// A backend `api` on the Service port 443, as `key` (https or https2), with `validation`
/// (YAML, or empty for none).
fn api(key: &str, validation: &str) -> String {
    if validation.is_empty() {
        format!("{{{key}: api, port: 443}}")
    } else {
        format!("{{{key}: api, port: 443, validation: {validation}}}")
    }
}

/// The `BackendTLSVerified` condition the status writer would write on IngressRoute `web/<name>`
/// now (the model of the manifest directory, as `sluice serve` builds it): (status, reason,
/// message).
fn backend_tls_condition(h: &Harness, name: &str) -> (String, String, String) {
    let options = sluice::dag::Options::default();
    let snapshot =
        sluice::app::standalone::load_manifests(&h.manifests, &options.ingress_class_name)
            .expect("manifests load");
    let dag = sluice::dag::build(&snapshot, &options);
    let obj = ObjectRef::new(Kind::IngressRouteV1, "web", name);
    let status = &dag.statuses[&obj];
    assert_eq!(
        status.state,
        sluice::dag::State::Valid,
        "{obj}: {:?}",
        status.messages
    );
    let observed = sluice::k8s::state::Observed::default();
    let verdict = sluice::k8s::status::Verdict::Dag(status);
    let now = "2025-01-01T00:00:00Z";
    let plan = sluice::k8s::status::plan(Kind::IngressRouteV1, verdict, &observed, None, now);
    let sluice::k8s::status::Plan::Apply(written) = plan else {
        panic!("{obj}: no status to write")
    };
    let conditions = written["conditions"].as_array().expect("conditions");
    let c = (conditions.iter())
        .find(|c| c["type"] == "BackendTLSVerified")
        .unwrap_or_else(|| panic!("{obj}: no BackendTLSVerified in {conditions:?}"));
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    (s("status"), s("reason"), s("message"))
}

/// What Envoy answered for `host`: 200's body, else the status.
async fn answer(h: &Harness, host: &str) -> String {
    h.get(host, "/", &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_backends_get_sni_and_their_certificates_verified_sotw() {
    secure_backends(XdsProtocol::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_backends_get_sni_and_their_certificates_verified_delta() {
    secure_backends(XdsProtocol::Delta).await;
}

async fn secure_backends(protocol: XdsProtocol) {
    let (ca, other_ca) = (Ca::new("backend CA"), Ca::new("another CA"));
    let (port, _backend) = tls_backend(
        ca.acceptor(
            vec![SanType::DnsName(SUBJECT.try_into().expect("DNS name"))],
            None,
            &["h2", "http/1.1"],
        ),
        sni_alpn_and_version,
    )
    .await;
    let verified = format!("{{caSecret: backend-ca, subjectName: {SUBJECT}}}");
    let wrong_ca = format!("{{caSecret: other-ca, subjectName: {SUBJECT}}}");
    let wrong_name = "{caSecret: backend-ca, subjectName: other.example.com}";
    let routes = docs(&[
        // (a) the right CA and subject name.
        root("ok", &api("https", &verified)),
        // (b) a CA that did not sign the backend's certificate.
        root("wrong-ca", &api("https", &wrong_ca)),
        // (c) a name the backend's certificate does not carry.
        root("wrong-name", &api("https", wrong_name)),
        // (d) no validation.
        root("plain", &api("https", "")),
        // (e) HTTP/2 over TLS, verified.
        root("h2", &api("https2", &verified)),
    ]);
    let files = [
        (
            "svc.yaml",
            docs(&[
                service("web", "api", 443, "https"),
                slice("web", "api", "https", port, "0"),
            ]),
        ),
        (
            "secrets.yaml",
            docs(&[
                ca.ca_secret("web", "backend-ca"),
                other_ca.ca_secret("web", "other-ca"),
            ]),
        ),
        ("routes.yaml", routes),
    ];
    let h = Harness::start(&files, protocol).await;

    // (a) Reached, with the subject name as SNI, over HTTP/1.1.
    let sni_subject = format!("sni={SUBJECT} alpn=http/1.1 version=HTTP/1.1");
    h.expect("ok.example.com", "/", &[], &sni_subject).await;
    let (status, reason, message) = backend_tls_condition(&h, "ok");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Verified"));
    assert!(
        message.contains(&format!(
            "against CA Secret web/backend-ca (ca.crt) and subject name {SUBJECT}"
        )),
        "{message}"
    );

    // (e) Reached over h2, verified, with the subject name as SNI.
    let h2 = format!("sni={SUBJECT} alpn=h2 version=HTTP/2.0");
    h.expect("h2.example.com", "/", &[], &h2).await;

    // (d) Reached, with the Service's in-cluster name as SNI; the status says it is not verified.
    let plain = "sni=api.web.svc alpn=http/1.1 version=HTTP/1.1";
    h.expect("plain.example.com", "/", &[], plain).await;
    let (status, reason, message) = backend_tls_condition(&h, "plain");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NotVerified"));
    assert_eq!(
        message,
        "Envoy accepts any certificate from spec.routes[0].services[0] (api, SNI api.web.svc): add validation {caSecret, subjectName} to verify it"
    );
    // `sluice validate` warns about it too.
    let loaded = sluice::manifest::load_paths(&[h.manifests.display().to_string()]).unwrap();
    let reports =
        sluice::cli::validate::validate_documents(loaded, &sluice::dag::Options::default());
    let plain_report = (reports.iter())
        .find(|r| r.kind == "IngressRoute" && r.name == "plain")
        .expect("a report of web/plain");
    assert_eq!(plain_report.status, "valid");
    assert!(
        (plain_report.warnings.iter()).any(|w| w.contains("is not verified")),
        "{:?}",
        plain_report.warnings
    );

    // (b), (c) Envoy refuses the backend's certificate: 503, and the status says what it was
    // checked against.
    for (host, name, against, failure) in [
        (
            "wrong-ca.example.com",
            "wrong-ca",
            format!("CA Secret web/other-ca (ca.crt) and subject name {SUBJECT}"),
            "ssl.fail_verify_error",
        ),
        (
            "wrong-name.example.com",
            "wrong-name",
            "CA Secret web/backend-ca (ca.crt) and subject name other.example.com".to_string(),
            "ssl.fail_verify_san",
        ),
    ] {
        h.expect(host, "/", &[], "503").await;
        for _ in 0..3 {
            assert_eq!(answer(&h, host).await, "503", "{host}");
        }
        // Refused by the verification itself (not a cluster still warming).
        let stats = h.admin(&format!("/stats?filter={failure}")).await;
        let failed = (stats.lines())
            .filter_map(|l| l.rsplit_once(": ")?.1.parse::<u64>().ok())
            .sum::<u64>();
        assert!(failed > 0, "{host}: no {failure}:\n{stats}");
        let (status, reason, message) = backend_tls_condition(&h, name);
        assert_eq!((status.as_str(), reason.as_str()), ("True", "Verified"));
        assert!(message.contains(&against), "{host}: {message}");
    }

    // The CA Secret changed to the CA that did sign the backend's certificate: sent by SDS, the
    // cluster unchanged, and the backend is reached.
    let clusters_before = h.admin("/clusters?format=json").await;
    h.write(
        "secrets.yaml",
        &docs(&[
            ca.ca_secret("web", "backend-ca"),
            ca.ca_secret("web", "other-ca"),
        ]),
    );
    h.expect("wrong-ca.example.com", "/", &[], &sni_subject)
        .await;
    let name_of = |dump: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(dump).unwrap_or_default();
        let mut names: Vec<String> = (v["cluster_statuses"].as_array().into_iter().flatten())
            .filter_map(|c| c["name"].as_str().map(String::from))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        name_of(&clusters_before),
        name_of(&h.admin("/clusters?format=json").await),
        "the same clusters"
    );
    // The others are served as before.
    h.expect("ok.example.com", "/", &[], &sni_subject).await;
    h.expect("wrong-name.example.com", "/", &[], "503").await;
}
