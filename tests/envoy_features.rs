//! Real Envoy fed by sluice standalone: weighted splits, active health checks, TLS termination
//! with a generated certificate, and route updates under load without errors.

mod envoy_support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, XdsLink, docs, ingressroute, service, services, slice};
use sluice::cli::bootstrap::XdsProtocol;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_split_80_20_within_tolerance() {
    let a = Backend::start("w/a").await;
    let b = Backend::start("w/b").await;
    let route = ingressroute(
        "w",
        "split",
        "split.example.com",
        "  - match: /\n    services: [{name: a, port: 80, weight: 80}, {name: b, port: 80, weight: 20}]\n",
    );
    let h = Harness::start(
        &[
            ("svc.yaml", services("w", &[&a, &b])),
            ("route.yaml", route),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    h.expect("split.example.com", "/", &[], "w/a").await;
    const N: usize = 500;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..N {
        *counts
            .entry(h.get("split.example.com", "/", &[]).await)
            .or_default() += 1;
    }
    let share_a = counts.get("w/a").copied().unwrap_or(0) as f64 / N as f64;
    let share_b = counts.get("w/b").copied().unwrap_or(0) as f64 / N as f64;
    // Binomial(500, 0.8): one standard deviation is 1.8%; allow 4.
    assert!(
        (0.72..=0.88).contains(&share_a) && (share_a + share_b - 1.0).abs() < 1e-9,
        "80/20 split: got {counts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_backend_is_ejected_by_health_checks() {
    let pool: Vec<Backend> = vec![
        Backend::start("hc/one").await,
        Backend::start("hc/two").await,
        Backend::start("hc/three").await,
    ];
    let mut parts = vec![service("hc", "app", 80, "")];
    for (i, b) in pool.iter().enumerate() {
        parts.push(slice("hc", "app", "", b.port, &i.to_string()));
    }
    let route = ingressroute(
        "hc",
        "app",
        "hc.example.com",
        "  - match: /\n    services:\n    - name: app\n      port: 80\n      healthCheck: {path: /healthz, intervalSeconds: 1, timeoutSeconds: 1, unhealthyThresholdCount: 1, healthyThresholdCount: 1}\n",
    );
    let h = Harness::start(
        &[("svc.yaml", docs(&parts)), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("hc.example.com", "/", &[], "hc/one").await;
    // Seed 000: a health check naming no host sends Host "contour-envoy-healthcheck".
    assert_eq!(
        pool[0].health_check_host().as_deref(),
        Some("contour-envoy-healthcheck")
    );
    pool[2].set_healthy(false);
    // Bounded: within the convergence time, 60 requests in a row must avoid the failing host.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut streak = 0;
    while streak < 60 {
        let got = h.get("hc.example.com", "/", &[]).await;
        if got == "hc/three" {
            streak = 0;
        } else {
            assert!(
                got == "hc/one" || got == "hc/two",
                "unexpected answer {got:?}"
            );
            streak += 1;
        }
        assert!(
            Instant::now() < deadline,
            "hc/three still receives traffic 20s after failing its health check; clusters:\n{}",
            h.admin("/clusters").await
        );
    }
    let before = pool[2].hits();
    for _ in 0..30 {
        let got = h.get("hc.example.com", "/", &[]).await;
        assert_ne!(got, "hc/three", "ejected host answered");
    }
    assert_eq!(pool[2].hits(), before);
    // Healthy again: it gets traffic back.
    pool[2].set_healthy(true);
    let deadline = Instant::now() + Duration::from_secs(20);
    while h.get("hc.example.com", "/", &[]).await != "hc/three" {
        assert!(Instant::now() < deadline, "hc/three never came back");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_termination_with_a_generated_certificate() {
    let app = Backend::start("tls/app").await;
    let acme = Backend::start("tls/acme").await;
    let ck = rcgen::generate_simple_self_signed(vec!["secure.example.com".to_string()]).unwrap();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: tls}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    let route = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: secure, namespace: tls}\nspec:\n  virtualhost:\n    fqdn: secure.example.com\n    tls: {secretName: cert, minimumProtocolVersion: \"1.2\"}\n  routes:\n  - match: /\n    services: [{name: app, port: 80}]\n  - match: /.well-known/acme-challenge\n    services: [{name: acme, port: 80}]\n    permitInsecure: true\n".to_string();
    let h = Harness::start(
        &[
            ("svc.yaml", services("tls", &[&app, &acme])),
            ("secret.yaml", secret),
            ("route.yaml", route),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    h.expect_tls("secure.example.com", "/x", "tls/app").await;
    let (_, version) = h.get_tls("secure.example.com", "/x").await;
    assert_eq!(version, Some(reqwest::Version::HTTP_2), "ALPN offers h2");
    h.expect_tls(
        "SECURE.example.com",
        "/.well-known/acme-challenge/t",
        "tls/acme",
    )
    .await;
    // Plain HTTP: 301 to HTTPS, except the permitInsecure route.
    assert_eq!(
        h.get("secure.example.com:8080", "/x?q=1", &[]).await,
        "301 https://secure.example.com/x?q=1"
    );
    assert_eq!(
        h.get("secure.example.com", "/.well-known/acme-challenge/t", &[])
            .await,
        "tls/acme"
    );
    // An unknown SNI gets no certificate: the handshake fails.
    let (got, _) = h.get_tls("other.example.com", "/").await;
    assert!(got.starts_with("error:"), "unknown SNI answered {got:?}");
}

/// Regular expressions past Envoy's default RE2 limit of 100 instructions, which the bootstrap
/// sluice writes raises: an IngressRoute v1 header condition of an ordinary version pattern
/// (~270 instructions), and the single-label check of a wildcard host with the longest name a host
/// may have (253 characters). Under Envoy's default, the route configuration holding them is
/// refused and neither host is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regexes_past_envoys_default_limit_are_served() {
    let versioned = Backend::start("re/versioned").await;
    let other = Backend::start("re/other").await;
    let wild = Backend::start("re/wild").await;
    let route = "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {name: api, namespace: re}\nspec:\n  virtualhost: {fqdn: api.example.com}\n  routes:\n  - match:\n      path: /\n      headers: [{header: x-client, regex: '^v[0-9]+(\\.[0-9]+){1,3}/[a-z0-9-]{1,64}$'}]\n    services: [{http: versioned, port: 80}]\n  - match: {path: /}\n    services: [{http: other, port: 80}]\n";
    // `*.` then labels of 63 characters: 253 in all.
    let suffix = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(59)
    );
    let wildcard = format!("*.{suffix}");
    assert_eq!(wildcard.len(), 253);
    let ingress = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: wild, namespace: re}}\nspec:\n  ingressClassName: sluice\n  rules:\n  - host: \"{wildcard}\"\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: wild, port: {{number: 80}}}}}}}}\n"
    );
    let h = Harness::start(
        &[
            ("svc.yaml", services("re", &[&versioned, &other, &wild])),
            ("route.yaml", route.to_string()),
            ("ingress.yaml", ingress),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect(
        "api.example.com",
        "/",
        &[("x-client", "v2.1.7/cli")],
        "re/versioned",
    )
    .await;
    assert_eq!(
        h.get("api.example.com", "/", &[("x-client", "v2/cli")])
            .await,
        "re/other"
    );
    h.expect(&format!("x.{suffix}"), "/", &[], "re/wild").await;
    // One label only: a second one is not this host's.
    assert_ne!(h.get(&format!("x.y.{suffix}"), "/", &[]).await, "re/wild");
}

/// Routes change under a bounded request loop; requests to routes that exist before and after
/// every change all succeed.
async fn updates_under_load(protocol: XdsProtocol) {
    let a = Backend::start("up/a").await;
    let b = Backend::start("up/b").await;
    let c = Backend::start("up/c").await;
    let d = Backend::start("up/d").await;
    let svcs = services("up", &[&a, &b, &c, &d]);
    let route = |routes: &str| ingressroute("up", "r", "up.example.com", routes);
    let v1 = route(
        "  - match: /a\n    services: [{name: a, port: 80}]\n  - match: /b\n    services: [{name: b, port: 80}]\n",
    );
    let h = std::sync::Arc::new(
        Harness::start(&[("svc.yaml", svcs), ("route.yaml", v1)], protocol).await,
    );
    h.expect("up.example.com", "/a", &[], "up/a").await;
    h.expect("up.example.com", "/b", &[], "up/b").await;

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..3 {
        let (h, stop) = (h.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut n = 0usize;
            let started = Instant::now();
            // Bounded in count and time.
            while !stop.load(std::sync::atomic::Ordering::SeqCst)
                && n < 20_000
                && started.elapsed() < Duration::from_secs(60)
            {
                let path = if (n + w).is_multiple_of(2) {
                    "/a"
                } else {
                    "/b"
                };
                let got = h.get("up.example.com", path, &[]).await;
                if !got.starts_with("up/") {
                    failures.push(format!("{path}: {got}"));
                }
                n += 1;
            }
            (n, failures)
        }));
    }
    let steps = [
        // A new route to a new cluster.
        "  - match: /a\n    services: [{name: a, port: 80}]\n  - match: /b\n    services: [{name: b, port: 80}]\n  - match: /c\n    services: [{name: c, port: 80}]\n",
        // /b moves to another service: cluster b goes away after the routes moved.
        "  - match: /a\n    services: [{name: a, port: 80}]\n  - match: /b\n    services: [{name: d, port: 80}]\n  - match: /c\n    services: [{name: c, port: 80}]\n",
        // /a is split and its cluster settings change (new clusters, old ones removed).
        "  - match: /a\n    services: [{name: a, port: 80, weight: 50, strategy: Random}, {name: c, port: 80, weight: 50}]\n  - match: /b\n    services: [{name: d, port: 80}]\n",
        // Back to the start.
        "  - match: /a\n    services: [{name: a, port: 80}]\n  - match: /b\n    services: [{name: b, port: 80}]\n",
    ];
    let expect_b = ["up/b", "up/d", "up/d", "up/b"];
    for (step, want_b) in steps.iter().zip(expect_b) {
        h.write("route.yaml", &route(step));
        h.expect("up.example.com", "/b", &[], want_b).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut total = 0;
    let mut failures = Vec::new();
    for w in workers {
        let (n, f) = w.await.unwrap();
        total += n;
        failures.extend(f);
    }
    assert!(total > 50, "only {total} requests made");
    assert!(
        failures.is_empty(),
        "{} of {total} requests failed during updates, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_updates_under_load_give_no_errors_sotw() {
    updates_under_load(XdsProtocol::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_updates_under_load_give_no_errors_delta() {
    updates_under_load(XdsProtocol::Delta).await;
}

/// A route configuration far over the size from which resource bodies go out as the snapshot's
/// own bytes (`xds::wire::SHARED_BODY_MIN`): 400 hosts, ~29 KB. Envoy takes it whole, serves its
/// first and last host, and then a change of one host in its middle. It goes out in DATA frames
/// larger than HTTP/2's default of 16 KiB, which Envoy takes because sluice's bootstrap has it
/// announce a larger SETTINGS_MAX_FRAME_SIZE (seen through a relay on plain TCP; over mutual
/// TLS the same frames are cut into TLS records).
async fn large_route_configuration(protocol: XdsProtocol, link: XdsLink) {
    let a = Backend::start("big/a").await;
    let b = Backend::start("big/b").await;
    let roots = |changed: &str| {
        let parts: Vec<String> = (0..400)
            .map(|i| {
                let svc = if i == 200 { changed } else { "a" };
                ingressroute(
                    "big",
                    &format!("r{i}"),
                    &format!("host-{i:03}.big.example.com"),
                    &format!("  - match: /\n    services: [{{name: {svc}, port: 80}}]\n"),
                )
            })
            .collect();
        docs(&parts)
    };
    let files = [
        ("svc.yaml", services("big", &[&a, &b])),
        ("routes.yaml", roots("a")),
    ];
    let h = Harness::start_over(&files, protocol, link).await;
    h.expect("host-000.big.example.com", "/", &[], "big/a")
        .await;
    h.expect("host-399.big.example.com", "/", &[], "big/a")
        .await;
    let config = h.admin("/config_dump?resource=dynamic_route_configs").await;
    assert!(
        config.len() > 40_000,
        "{} bytes of route configuration",
        config.len()
    );
    h.write("routes.yaml", &roots("b"));
    h.expect("host-200.big.example.com", "/", &[], "big/b")
        .await;
    h.expect("host-399.big.example.com", "/", &[], "big/a")
        .await;
    // Only a relay sees the frames.
    if link != XdsLink::Relayed {
        return;
    }
    let largest = (h.largest_xds_data_frame.as_ref())
        .expect("a relayed harness reads the frames")
        .load(Ordering::Relaxed);
    assert!(
        largest > 16_384 && largest <= sluice::cli::bootstrap::XDS_MAX_FRAME_SIZE,
        "largest DATA frame to Envoy: {largest} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_route_configuration_reaches_envoy_sotw() {
    large_route_configuration(XdsProtocol::Sotw, XdsLink::Relayed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_route_configuration_reaches_envoy_delta() {
    large_route_configuration(XdsProtocol::Delta, XdsLink::Relayed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_route_configuration_reaches_envoy_over_mtls() {
    large_route_configuration(XdsProtocol::Delta, XdsLink::Mtls).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xds_over_mutual_tls() {
    let a = Backend::start("m/a").await;
    let route = ingressroute(
        "m",
        "r",
        "mtls.example.com",
        "  - match: /\n    services: [{name: a, port: 80}]\n",
    );
    let h = Harness::start_mtls(
        &[("svc.yaml", services("m", &[&a])), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("mtls.example.com", "/", &[], "m/a").await;
    // The same xDS client gets clusters with Envoy's client certificate, and nothing without one.
    use envoy_types::pb::envoy::service::discovery::v3::{
        DiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
    };
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let read = |f: &str| std::fs::read(h.dir.path().join(f)).unwrap();
    let fetch = |identity: Option<Identity>| {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("ca.pem")))
            .domain_name("127.0.0.1");
        if let Some(id) = identity {
            tls = tls.identity(id);
        }
        let url = format!("https://127.0.0.1:{}", h.xds_port);
        async move {
            let channel = Endpoint::from_shared(url)
                .map_err(|e| e.to_string())?
                .tls_config(tls)
                .map_err(|e| e.to_string())?
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            let req = DiscoveryRequest {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                ..Default::default()
            };
            let mut stream = AggregatedDiscoveryServiceClient::new(channel)
                .stream_aggregated_resources(tokio_stream::iter(vec![req]))
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            let resp = stream.message().await.map_err(|e| e.to_string())?;
            Ok::<usize, String>(resp.map(|r| r.resources.len()).unwrap_or(0))
        }
    };
    let with_cert = tokio::time::timeout(
        Duration::from_secs(10),
        fetch(Some(Identity::from_pem(
            read("client.pem"),
            read("client-key.pem"),
        ))),
    )
    .await;
    assert!(
        matches!(with_cert, Ok(Ok(1))),
        "with a client certificate: {with_cert:?}"
    );
    // Without a certificate the server refuses the connection. In TLS 1.3 the client finishes
    // its side of the handshake first and reads the refusal (an alert, or the connection closed)
    // next, so the check is a TLS client of its own that writes the HTTP/2 preface and reads:
    // a gRPC channel, which reconnects, could hold the request waiting for a connection instead
    // of failing it (seen under load).
    let without = tokio::time::timeout(Duration::from_secs(10), async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut &read("ca.pem")[..]) {
            roots.add(cert?).map_err(std::io::Error::other)?;
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(std::io::Error::other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", h.xds_port)).await?;
        let name =
            rustls::pki_types::ServerName::try_from("127.0.0.1").map_err(std::io::Error::other)?;
        let mut tls = connector.connect(name, tcp).await?;
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await?;
        tls.flush().await?;
        let mut buf = [0u8; 64];
        tls.read(&mut buf).await
    })
    .await;
    assert!(
        matches!(without, Ok(Err(_)) | Ok(Ok(0))),
        "a client without a certificate was not refused: {without:?}"
    );
    // The gRPC client without a certificate gets no xDS either (an error, or no connection).
    let grpc = tokio::time::timeout(Duration::from_secs(2), fetch(None)).await;
    assert!(
        !matches!(grpc, Ok(Ok(_))),
        "a client without a certificate got xDS: {grpc:?}"
    );
}

/// sluice restarts: Envoy keeps serving its last configuration meanwhile, reconnects (telling the
/// versions it holds) and picks up a change made while sluice was away.
/// The value of counter `name` on Envoy's admin `/stats` (0 when it is not there).
async fn counter(h: &Harness, name: &str) -> u64 {
    let stats = h.admin(&format!("/stats?filter=^{name}$")).await;
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until Envoy's admin `/certs` lists (or no longer lists) a certificate of `serial`.
async fn wait_for_serial(h: &Harness, serial: &str, listed: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let certs = h.admin("/certs").await;
        if certs.contains(&format!("\"serial_number\": \"{serial}\"")) == listed {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Envoy's /certs {} serial {serial}:\n{certs}",
            if listed {
                "never listed"
            } else {
                "still lists"
            }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Envoy's client certificate for xDS is replaced as Kubernetes updates a mounted Secret (new
/// files renamed into place; `sluice bootstrap` hands the certificate to Envoy through a file of
/// secrets): Envoy takes it without a restart and presents it on its next connection. One of a
/// CA sluice does not trust is refused there; the certificate put back is taken again, and the
/// next connection gets the configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_takes_a_replaced_xds_client_certificate_without_a_restart() {
    let a = Backend::start("rn/a").await;
    let b = Backend::start("rn/b").await;
    let route = |svc: &str| {
        ingressroute(
            "rn",
            "r",
            "renew.example.com",
            &format!("  - match: /\n    services: [{{name: {svc}, port: 80}}]\n"),
        )
    };
    let mut h = Harness::start_mtls(
        &[
            ("svc.yaml", services("rn", &[&a, &b])),
            ("route.yaml", route("a")),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("renew.example.com", "/", &[], "rn/a").await;
    let dir = h.dir.path().to_path_buf();
    let replace = |name: &str, content: &[u8]| {
        let tmp = dir.join(format!(".{name}.new"));
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    };
    let original_key = std::fs::read(dir.join("client-key.pem")).unwrap();
    let original_cert = std::fs::read(dir.join("client.pem")).unwrap();

    // A certificate of another CA, with a serial to find it by.
    let mut params = rcgen::CertificateParams::new(vec!["envoy".to_string()]).unwrap();
    params.serial_number = Some(rcgen::SerialNumber::from(vec![0x5a, 0x11, 0xce, 0x01]));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let foreign = params.self_signed(&key).unwrap();
    replace("client-key.pem", key.serialize_pem().as_bytes());
    replace("client.pem", foreign.pem().as_bytes());
    wait_for_serial(&h, "5a11ce01", true).await;

    // sluice restarted with a new route: Envoy connects again (twice, at least) with that
    // certificate, sluice refuses it, and Envoy keeps the route it had.
    h.stop_sluice().await;
    let connections = counter(&h, "cluster.sluice_xds.upstream_cx_total").await;
    h.write("route.yaml", &route("b"));
    h.start_sluice();
    let deadline = Instant::now() + Duration::from_secs(30);
    while counter(&h, "cluster.sluice_xds.upstream_cx_total").await < connections + 2 {
        assert!(
            Instant::now() < deadline,
            "Envoy did not connect to sluice again:\n{}",
            h.envoy_log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(h.get("renew.example.com", "/", &[]).await, "rn/a");

    // The certificate put back: taken, presented, accepted.
    replace("client-key.pem", &original_key);
    replace("client.pem", &original_cert);
    wait_for_serial(&h, "5a11ce01", false).await;
    h.expect("renew.example.com", "/", &[], "rn/b").await;
}

async fn restart(protocol: XdsProtocol) {
    let a = Backend::start("rs/a").await;
    let b = Backend::start("rs/b").await;
    let route = |svc: &str| {
        ingressroute(
            "rs",
            "r",
            "restart.example.com",
            &format!("  - match: /\n    services: [{{name: {svc}, port: 80}}]\n"),
        )
    };
    let mut h = Harness::start(
        &[
            ("svc.yaml", services("rs", &[&a, &b])),
            ("route.yaml", route("a")),
        ],
        protocol,
    )
    .await;
    h.expect("restart.example.com", "/", &[], "rs/a").await;
    h.stop_sluice().await;
    // While sluice is away, Envoy keeps answering from its last configuration.
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(h.get("restart.example.com", "/", &[]).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        answers.iter().all(|a| a == "rs/a"),
        "while sluice is away: {answers:?}"
    );
    h.write("route.yaml", &route("b"));
    h.start_sluice();
    h.expect("restart.example.com", "/", &[], "rs/b").await;
    // And it follows changes on the new stream.
    h.write("route.yaml", &route("a"));
    h.expect("restart.example.com", "/", &[], "rs/a").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_reconnects_after_a_sluice_restart_sotw() {
    restart(XdsProtocol::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_reconnects_after_a_sluice_restart_delta() {
    restart(XdsProtocol::Delta).await;
}

/// A WebSocket through Envoy: the upgrade reaches the route's backend and messages go both ways,
/// also after the route's request timeout (1 s here) has passed, which bounds a request, not an
/// upgraded connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_are_proxied_to_the_routes_backend() {
    let port = envoy_support::websocket::backend("ws/chat").await;
    let route = "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {name: chat, namespace: ws}\nspec:\n  virtualhost: {fqdn: ws.example.com}\n  routes:\n  - match: {path: /chat}\n    services: [{http: chat, port: 80}]\n    timeoutPolicy: {request: 1s}\n".to_string();
    let h = Harness::start(
        &[
            (
                "svc.yaml",
                docs(&[
                    service("ws", "chat", 80, ""),
                    slice("ws", "chat", "", port, "0"),
                ]),
            ),
            ("route.yaml", route),
        ],
        XdsProtocol::Delta,
    )
    .await;
    let mut ws = envoy_support::websocket::connect(&h, "ws.example.com", "/chat/room-1").await;
    envoy_support::websocket::exchange(&mut ws, "hello", "ws/chat: hello").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    envoy_support::websocket::exchange(&mut ws, "still there", "ws/chat: still there").await;
    ws.close(None).await.unwrap();
}

/// Sends `bytes` on a new connection to 127.0.0.1:`port` and returns all it answers until the
/// connection closes (at most 5 s).
async fn raw_exchange(port: u16, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    conn.write_all(bytes).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// `--use-proxy-protocol` and `--num-trusted-hops`: behind a load balancer that sends a PROXY
/// protocol header, the client address Envoy logs and passes on is the header's; with one
/// trusted hop, it is the last address a trusted proxy put in `X-Forwarded-For`. A connection
/// without the header gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_address_comes_from_the_proxy_protocol_and_trusted_hops() {
    let (h, _app) = Harness::start_one_host("pp", "pp.example.com", |o| {
        o.proxy_protocol = true;
        o.num_trusted_hops = 1;
    })
    .await;
    let request = |path: &str, xff: &str| {
        format!(
            "PROXY TCP4 203.0.113.7 127.0.0.1 40001 {port}\r\nGET {path} HTTP/1.1\r\nHost: pp.example.com\r\n{xff}Connection: close\r\n\r\n",
            port = h.http_port
        )
    };
    // Until sluice's route reaches Envoy, the host is a 404.
    let deadline = Instant::now() + envoy_support::harness::CONVERGE;
    loop {
        let answer = raw_exchange(h.http_port, request("/", "").as_bytes()).await;
        if answer.starts_with("HTTP/1.1 200") && answer.ends_with("pp/app") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no 200 through Envoy: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let direct = raw_exchange(h.http_port, request("/direct", "").as_bytes()).await;
    assert!(direct.starts_with("HTTP/1.1 200"), "{direct}");
    let forwarded = request("/forwarded", "X-Forwarded-For: 198.51.100.9\r\n");
    let answer = raw_exchange(h.http_port, forwarded.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // No PROXY header: the connection is closed unanswered.
    let bare = "GET /bare HTTP/1.1\r\nHost: pp.example.com\r\nConnection: close\r\n\r\n";
    assert_eq!(raw_exchange(h.http_port, bare.as_bytes()).await, "");
    let deadline = Instant::now() + Duration::from_secs(20);
    let (direct, forwarded) = loop {
        let lines = h.access_log();
        let find = |path: &str| lines.iter().find(|l| l["path"] == path).cloned();
        if let (Some(d), Some(f)) = (find("/direct"), find("/forwarded")) {
            break (d, f);
        }
        assert!(Instant::now() < deadline, "access log: {lines:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        direct["downstream_remote_address"], "203.0.113.7:40001",
        "{direct}"
    );
    assert_eq!(direct["x_forwarded_for"], "203.0.113.7", "{direct}");
    let client = forwarded["downstream_remote_address"]
        .as_str()
        .unwrap_or_default();
    assert!(client.starts_with("198.51.100.9"), "{forwarded}");
    assert_eq!(
        forwarded["x_forwarded_for"], "198.51.100.9,203.0.113.7",
        "{forwarded}"
    );
    assert!(h.access_log().iter().all(|l| l["path"] != "/bare"));
}

/// A client that trickles its request headers (slowloris) gets a 408 once the headers timeout
/// (10 s) has passed, and its connection is closed; a normal request on the listener still
/// works meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (h, _app) = Harness::start_one_host("slow", "slow.example.com", |_| {}).await;
    h.expect("slow.example.com", "/", &[], "slow/app").await;
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", h.http_port))
        .await
        .unwrap();
    let started = Instant::now();
    conn.write_all(b"GET / HTTP/1.1\r\nHost: slow.example.com\r\n")
        .await
        .unwrap();
    assert_eq!(h.get("slow.example.com", "/", &[]).await, "slow/app");
    let mut answer = Vec::new();
    // Bounded: Envoy closes the connection after its timeout; 30 s would mean it never does.
    let read = tokio::time::timeout(Duration::from_secs(30), conn.read_to_end(&mut answer)).await;
    let waited = started.elapsed();
    assert!(read.is_ok(), "the connection is still open after 30 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "after {waited:?}: {answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_and_http2_backends_are_spoken_to_over_http2_and_http_over_http1() {
    // Seed 002's backend protocols: `h2c` (and its alias `http2`) is HTTP/2 in cleartext, `http`
    // HTTP/1.1, whatever the client speaks to Envoy.
    let plain = Backend::start("proto/plain").await;
    let h2c = Backend::start("proto/h2c").await;
    let http2 = Backend::start("proto/http2").await;
    let route = "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {name: proto, namespace: proto}\nspec:\n  virtualhost: {fqdn: proto.example.com}\n  routes:\n  - match: {path: /plain}\n    services: [{http: plain, port: 80}]\n  - match: {path: /h2c}\n    services: [{h2c: h2c, port: 80}]\n  - match: {path: /http2}\n    services: [{http2: http2, port: 80}]\n".to_string();
    let h = Harness::start(
        &[
            ("svc.yaml", services("proto", &[&plain, &h2c, &http2])),
            ("route.yaml", route),
        ],
        XdsProtocol::Delta,
    )
    .await;
    for (path, backend, version) in [
        ("/plain", &plain, "HTTP/1.1"),
        ("/h2c", &h2c, "HTTP/2.0"),
        ("/http2", &http2, "HTTP/2.0"),
    ] {
        h.expect("proto.example.com", path, &[], &backend.name)
            .await;
        assert_eq!(
            backend.last_header(":version"),
            [version],
            "{path}: the backend's HTTP version"
        );
    }
}
