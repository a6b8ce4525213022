//! Every translated snapshot must be accepted by `envoy --mode validate`: a hand-built model using
//! every translation feature (TLS, wildcard, TCP proxy, h2/TLS upstreams, health checks, header
//! conditions, weights, timeouts, retries, 503 routes).

mod envoy_support;

use std::time::Duration;

use sluice::api::{Kind, LbStrategy, ObjectRef, TlsVersion};
use sluice::dag::*;
use sluice::translate;
use sluice::validate::common::Timeout;

fn route(path: PathMatch, clusters: &[(&str, u32)]) -> Route {
    Route {
        path,
        headers: vec![],
        action: RouteAction::Forward(
            clusters
                .iter()
                .map(|(c, w)| WeightedCluster {
                    cluster: (*c).into(),
                    weight: *w,
                })
                .collect(),
        ),
        permit_insecure: false,
        timeout: None,
        retry: None,
        extras: None,
        source: ObjectRef::new(Kind::IngressRouteV1, "default", "root"),
    }
}

fn cluster(name: &str, protocol: UpstreamProtocol, lb: LbStrategy) -> Cluster {
    Cluster {
        name: name.into(),
        service: Default::default(),
        port: 80,
        protocol,
        lb,
        health_check: Some(Box::new(health_check_policy(&sluice::api::HealthCheck {
            path: "/healthz".into(),
            ..Default::default()
        }))),
        outlier_detection: Some(OutlierDetection { consecutive_5xx: 5 }),
        upstream_tls: None,
        endpoints: vec![
            Endpoint {
                address: "127.0.0.1".parse().unwrap(),
                port: 9001,
            },
            Endpoint {
                address: "::1".parse().unwrap(),
                port: 9002,
            },
        ]
        .into(),
    }
}

fn full_model() -> Dag {
    let ck = rcgen::generate_simple_self_signed(vec!["secure.example.com".to_string()]).unwrap();
    let mut dag = Dag::default();
    for (name, proto, lb) in [
        (
            "default/a/80",
            UpstreamProtocol::Http,
            LbStrategy::RoundRobin,
        ),
        (
            "default/b/80/h2",
            UpstreamProtocol::H2,
            LbStrategy::WeightedLeastRequest,
        ),
        (
            "default/c/80/h2c",
            UpstreamProtocol::H2c,
            LbStrategy::Random,
        ),
        (
            "default/d/443/tls",
            UpstreamProtocol::Https,
            LbStrategy::RoundRobin,
        ),
        (
            "default/t/9000/tcp",
            UpstreamProtocol::Tcp,
            LbStrategy::RoundRobin,
        ),
    ] {
        dag.clusters
            .insert(name.into(), cluster(name, proto, lb).into());
    }
    // TLS backends: SNI alone, and SNI with the certificate verified (CA secret by SDS).
    let mut sni = cluster(
        "default/d/443/tls",
        UpstreamProtocol::Https,
        LbStrategy::RoundRobin,
    );
    sni.upstream_tls = Some(
        UpstreamTls {
            sni: "d.default.svc".into(),
            validation: None,
            client_secret: None,
        }
        .into(),
    );
    dag.clusters.insert("default/d/443/tls".into(), sni.into());
    let mut verified = cluster("default/e/443/ca", UpstreamProtocol::H2, LbStrategy::Random);
    verified.upstream_tls = Some(
        UpstreamTls {
            sni: "e.example.com".into(),
            validation: Some(UpstreamValidation {
                ca_secret: "default/ca/ca.crt".into(),
                subject_name: "e.example.com".into(),
                subject_alt_names: Vec::new(),
            }),
            client_secret: None,
        }
        .into(),
    );
    dag.clusters
        .insert("default/e/443/ca".into(), verified.into());
    // A BackendTLSPolicy's: subject alternative names of both types, and a Gateway's client
    // certificate presented (by SDS).
    let mut mtls = cluster(
        "default/f/443/mtls",
        UpstreamProtocol::Https,
        LbStrategy::RoundRobin,
    );
    mtls.upstream_tls = Some(
        UpstreamTls {
            sni: "f.example.com".into(),
            validation: Some(UpstreamValidation {
                ca_secret: "default/ca/ca.crt".into(),
                subject_name: "f.example.com".into(),
                subject_alt_names: vec![
                    SubjectAltName::Dns("f.example.com".into()),
                    SubjectAltName::Uri("spiffe://example.com/f".into()),
                ],
            }),
            client_secret: Some("default/cert/client".into()),
        }
        .into(),
    );
    dag.clusters
        .insert("default/f/443/mtls".into(), mtls.into());
    dag.secrets.insert(
        "default/cert/client".into(),
        TlsSecret {
            name: "default/cert/client".into(),
            kind: SecretKind::ClientCertificate,
            cert_pem: ck.cert.pem().into(),
            key_pem: ck.signing_key.serialize_pem().into(),
        },
    );
    dag.secrets.insert(
        "default/ca/ca.crt".into(),
        TlsSecret {
            name: "default/ca/ca.crt".into(),
            kind: SecretKind::TrustedCa,
            cert_pem: ck.cert.pem().into(),
            key_pem: "".into(),
        },
    );
    dag.secrets.insert(
        "default/cert".into(),
        TlsSecret {
            name: "default/cert".into(),
            kind: SecretKind::Certificate,
            cert_pem: ck.cert.pem().into(),
            key_pem: ck.signing_key.serialize_pem().into(),
        },
    );
    let mut headers = route(PathMatch::prefix("/h"), &[("default/a/80", 1)]);
    headers.headers = vec![
        HeaderMatch {
            name: "x-a".into(),
            op: HeaderOp::Exact("100%d".into()),
        },
        HeaderMatch {
            name: "x-b".into(),
            op: HeaderOp::Contains("b".into()),
        },
        HeaderMatch {
            name: "x-c".into(),
            op: HeaderOp::NotContains("c".into()),
        },
        HeaderMatch {
            name: "x-d".into(),
            op: HeaderOp::Present,
        },
        HeaderMatch {
            name: "x-e".into(),
            op: HeaderOp::Absent,
        },
        HeaderMatch {
            name: "user-agent".into(),
            op: HeaderOp::Regex(".*Firefox.*".into()),
        },
    ];
    let mut timed = route(
        PathMatch::Exact("/t".into()),
        &[
            ("default/a/80", 80),
            ("default/b/80/h2", 20),
            ("default/c/80/h2c", 0),
        ],
    );
    timed.timeout = Some(Timeout::After(Duration::from_millis(1500)));
    timed.retry = Some(RetryPolicy::new(2, Some(Duration::from_millis(300))));
    let mut infinite = route(
        PathMatch::StringPrefix("/inf".into()),
        &[("default/d/443/tls", 1), ("default/e/443/ca", 1)],
    );
    infinite.timeout = Some(Timeout::Infinite);
    // An HTTPRoute rule's retry: status codes and a backoff.
    infinite.retry = Some(RetryPolicy {
        count: 3,
        per_try_timeout: None,
        on: RetryOn::Codes(vec![500, 503]),
        backoff: Some(Duration::from_millis(100)),
    });
    let mut gone = route(PathMatch::prefix("/gone"), &[]);
    gone.action = RouteAction::Unavailable("missing".into());
    let mut insecure = route(PathMatch::prefix("/.well-known"), &[("default/a/80", 1)]);
    insecure.permit_insecure = true;
    let vhosts = vec![
        VirtualHost {
            host: "plain.example.com".into(),
            routes: vec![
                timed,
                headers,
                infinite,
                gone,
                route(PathMatch::prefix("/"), &[("default/a/80", 1)]),
            ],
            ..Default::default()
        },
        VirtualHost {
            host: "*.wild.example.com".into(),
            routes: vec![route(PathMatch::prefix("/"), &[("default/c/80/h2c", 1)])],
            ..Default::default()
        },
        VirtualHost {
            host: "*".into(),
            routes: vec![route(PathMatch::prefix("/"), &[("default/a/80", 1)])],
            ..Default::default()
        },
        VirtualHost {
            host: "secure.example.com".into(),
            tls: Some(VhostTls {
                secret: "default/cert".into(),
                min_version: TlsVersion::V1_3,
            }),
            routes: vec![
                insecure,
                route(PathMatch::prefix("/"), &[("default/b/80/h2", 1)]),
            ],
            ..Default::default()
        },
        VirtualHost {
            host: "*.tls.example.com".into(),
            tls: Some(VhostTls {
                secret: "default/cert".into(),
                min_version: TlsVersion::V1_1,
            }),
            routes: vec![route(PathMatch::prefix("/"), &[("default/a/80", 1)])],
            ..Default::default()
        },
        VirtualHost {
            host: "tcp.example.com".into(),
            tls: Some(VhostTls {
                secret: "default/cert".into(),
                min_version: TlsVersion::V1_2,
            }),
            tcp_proxy: Some(smallvec::smallvec![WeightedCluster {
                cluster: "default/t/9000/tcp".into(),
                weight: 1,
            }]),
            ..Default::default()
        },
    ];
    for v in vhosts {
        dag.vhosts.insert(v.host.clone(), v.into());
    }
    dag
}

#[test]
fn envoy_validates_every_translation_feature() {
    let res = translate::build(&full_model(), &translate::Options::default());
    envoy_support::assert_envoy_accepts(&res, "full model");
}

/// The full model (TLS hosts, a TCP proxy) with every access log setting: each format, to Envoy's
/// streams and to a file.
#[test]
fn envoy_validates_every_access_log_setting() {
    use translate::access_log::{AccessLog, AccessLogFormat};
    let model = full_model();
    for format in [
        AccessLogFormat::Json,
        AccessLogFormat::Envoy,
        AccessLogFormat::Off,
    ] {
        for path in [
            "/dev/stdout",
            "/dev/stderr",
            "/tmp/sluice-validate-access.log",
        ] {
            let options = translate::Options {
                access_log: AccessLog {
                    format,
                    path: path.into(),
                },
                ..Default::default()
            };
            let res = translate::build(&model, &options);
            envoy_support::assert_envoy_accepts(&res, &format!("access log {format:?} to {path}"));
        }
    }
}

/// The full model with request tracing to an OTLP collector, by name and by IPv6 address, and
/// with the PROXY protocol and trusted hops (TLS listener included).
#[test]
fn envoy_validates_tracing_and_the_client_address_settings() {
    for (collector, behind_a_balancer) in [
        ("otel-collector.observability:4317", true),
        ("[fd00::1]:4317", false),
    ] {
        let options = translate::Options {
            proxy_protocol: behind_a_balancer,
            num_trusted_hops: if behind_a_balancer { 2 } else { 0 },
            tracing: Some(translate::trace::Tracing {
                collector: collector.into(),
                service_name: "sluice-envoy".into(),
                sampling_per_million: 5_000,
            }),
            ..Default::default()
        };
        let res = translate::build(&full_model(), &options);
        envoy_support::assert_envoy_accepts(&res, &format!("tracing to {collector}"));
    }
}

/// The full model with its plain-HTTP hosts spread over route shards: the scoped routes, the
/// shard filter's Lua and every shard's configuration.
#[test]
fn envoy_validates_route_shards() {
    for shards in [2, 7, translate::MAX_HTTP_ROUTE_SHARDS] {
        let options = translate::Options {
            route_shards: translate::RouteShards::Fixed(shards),
            ..Default::default()
        };
        let res = translate::build(&full_model(), &options);
        let names = (res.routes.iter())
            .filter(|r| r.name.starts_with("ingress_http/"))
            .count();
        assert_eq!(names, usize::from(shards), "a configuration per shard");
        envoy_support::assert_envoy_accepts(&res, &format!("{shards} route shards"));
    }
}

#[test]
fn envoy_validates_an_empty_model() {
    let res = translate::build(&Dag::default(), &translate::Options::default());
    envoy_support::assert_envoy_accepts(&res, "empty model");
}

/// The check above can fail: a snapshot Envoy cannot load is refused.
#[test]
#[should_panic(expected = "envoy --mode validate refused snapshot broken")]
fn envoy_validation_refuses_a_broken_snapshot() {
    let mut dag = full_model();
    let v = std::sync::Arc::make_mut(dag.vhosts.get_mut("plain.example.com").unwrap());
    v.routes[0].headers = vec![HeaderMatch {
        name: "x".into(),
        op: HeaderOp::Regex("(".into()),
    }];
    let res = translate::build(&dag, &translate::Options::default());
    envoy_support::assert_envoy_accepts(&res, "broken");
}

/// `sluice bootstrap` output, plain and with mTLS to the xDS server, with and without the
/// overload manager's heap limit and connection limit, passes `envoy --mode validate`.
#[test]
fn envoy_validates_the_generated_bootstraps() {
    use sluice::cli::bootstrap::{BootstrapArgs, OverloadArgs, XdsProtocol, write_bootstrap};
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["sluice.example".to_string()]).unwrap();
    let (ca, cert, key) = (
        dir.path().join("ca.pem"),
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
    );
    std::fs::write(&ca, ck.cert.pem()).unwrap();
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let mk = |label: &str, addr: &str, mtls: bool, protocol, overload| BootstrapArgs {
        xds_address: addr.into(),
        out: dir.path().join(format!("{label}.json")),
        xds_ca: mtls.then(|| ca.clone()),
        xds_cert: mtls.then(|| cert.clone()),
        xds_key: mtls.then(|| key.clone()),
        admin_port: None,
        admin_socket: Some(dir.path().join("admin.sock")),
        node_id: "n".into(),
        node_cluster: "c".into(),
        xds_protocol: protocol,
        // The statistics listener in front of the admin socket, on IPv4 and IPv6.
        stats_address: Some(
            if mtls { "[::1]:18002" } else { "0.0.0.0:18002" }
                .parse()
                .unwrap(),
        ),
        overload,
    };
    let limits = |heap, connections| OverloadArgs {
        overload_max_heap_bytes: heap,
        overload_max_connections: connections,
    };
    for (label, args) in [
        (
            "plain",
            mk(
                "plain",
                "127.0.0.1:18000",
                false,
                XdsProtocol::Sotw,
                OverloadArgs::default(),
            ),
        ),
        (
            "mtls+delta, heap and connection limits",
            mk(
                "mtls-delta",
                "sluice.example:18000",
                true,
                XdsProtocol::Delta,
                limits(1 << 30, 20),
            ),
        ),
        (
            "heap limit only",
            mk(
                "heap",
                "127.0.0.1:18000",
                false,
                XdsProtocol::Delta,
                limits(1 << 30, 0),
            ),
        ),
        (
            "no overload manager",
            mk(
                "none",
                "127.0.0.1:18000",
                false,
                XdsProtocol::Delta,
                limits(0, 0),
            ),
        ),
    ] {
        let path = args.out.clone();
        write_bootstrap(&args).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let monitors = written["overload_manager"]["resource_monitors"].as_array();
        let expected = usize::from(args.overload.overload_max_heap_bytes > 0)
            + usize::from(args.overload.overload_max_connections > 0);
        assert_eq!(monitors.map_or(0, Vec::len), expected, "{label}: {written}");
        let out = std::process::Command::new(envoy_support::envoy_bin())
            .args(["--mode", "validate", "--disable-hot-restart", "-c"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bootstrap {label} refused:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The check looks at the overload manager: an action triggered by a monitor the bootstrap
    // does not have is refused.
    let path = dir.path().join("mtls-delta.json");
    let mut broken: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    broken["overload_manager"]["actions"][0]["triggers"][0]["name"] = "no.such.monitor".into();
    std::fs::write(&path, broken.to_string()).unwrap();
    let out = std::process::Command::new(envoy_support::envoy_bin())
        .args(["--mode", "validate", "--disable-hot-restart", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a broken overload manager passed");
    assert!(
        said.contains("Unknown trigger resource no.such.monitor"),
        "{said}"
    );
}

/// docs/xds.md "Running Envoy" recommends `--ignore-unknown-dynamic-fields`, which spares Envoy a
/// walk over every field of every xDS resource it receives. What sluice relies on: Envoy still
/// checks dynamic configuration against its constraints and refuses what breaks them (so a bad
/// push is a NACK, not a half-applied route table). A route configuration over RDS whose
/// virtual host has no domains is refused, beside a good one that is applied.
#[test]
fn the_recommended_envoy_flag_keeps_constraint_validation_of_dynamic_routes() {
    let dir = tempfile::tempdir().unwrap();
    let admin = envoy_support::free_port();
    let path = |f: &str| dir.path().join(f).display().to_string();
    let listener = |name: &str, port: u16| {
        format!(
            r#"
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: {name}
  address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: {name}
        http_filters:
        - name: envoy.filters.http.router
          typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
        rds:
          route_config_name: {name}
          config_source: {{path_config_source: {{path: {rds}}}, resource_api_version: V3}}
"#,
            rds = path(&format!("{name}.yaml"))
        )
    };
    let routes = |name: &str, domains: &str| {
        format!(
            r#"resources:
- "@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
  name: {name}
  virtual_hosts:
  - name: {name}
    domains: {domains}
    routes: [{{match: {{prefix: "/"}}, direct_response: {{status: 200}}}}]
"#
        )
    };
    std::fs::write(path("good.yaml"), routes("good", r#"["good.example"]"#)).unwrap();
    std::fs::write(path("bad.yaml"), routes("bad", "[]")).unwrap();
    std::fs::write(
        path("lds.yaml"),
        format!(
            "resources:{}{}",
            listener("good", envoy_support::free_port()),
            listener("bad", envoy_support::free_port())
        ),
    )
    .unwrap();
    std::fs::write(
        path("bootstrap.yaml"),
        format!(
            "node: {{id: t, cluster: t}}\n\
             admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}}}\n\
             dynamic_resources:\n  \
               lds_config: {{path_config_source: {{path: {}}}, resource_api_version: V3}}\n",
            path("lds.yaml")
        ),
    )
    .unwrap();
    let mut envoy = std::process::Command::new(envoy_support::envoy_bin())
        .args(["-c", &path("bootstrap.yaml")])
        .args(["--ignore-unknown-dynamic-fields", "--disable-hot-restart"])
        .args(["--concurrency", "1", "--base-id", &admin.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // Envoy's log, unbuffered (a `--log-path` file is flushed every few seconds).
        .stderr(std::fs::File::create(path("envoy.log")).unwrap())
        .spawn()
        .expect("start envoy");
    let stat = |name: &str| -> Option<u64> {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "2", "--noproxy", "*"])
            .arg(format!(
                "http://127.0.0.1:{admin}/stats?filter=^{}$",
                name.replace('.', "\\.")
            ))
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(": ")?
                .trim()
                .parse()
                .ok()
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (mut good, mut bad) = (None, None);
    while std::time::Instant::now() < deadline {
        good = stat("http.good.rds.good.update_success");
        bad = stat("http.bad.rds.bad.update_rejected");
        if good >= Some(1) && bad >= Some(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = envoy.kill();
    let _ = envoy.wait();
    let log = std::fs::read_to_string(path("envoy.log")).unwrap_or_default();
    assert!(
        good >= Some(1) && bad >= Some(1),
        "good route configuration applied {good:?} times, bad one refused {bad:?} times:\n{log}"
    );
    assert!(
        log.contains("value must contain at least 1 item"),
        "Envoy's log names the broken constraint:\n{log}"
    );
    assert_eq!(stat("http.bad.rds.bad.update_success"), None);
}
