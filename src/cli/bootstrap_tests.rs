//! Unit tests of the bootstrap: its clusters, listeners, TLS files and overload settings.

use super::*;

pub(crate) fn mk_args(addr: &str) -> BootstrapArgs {
    BootstrapArgs {
        xds_address: addr.to_string(),
        out: PathBuf::from("/dev/null"),
        xds_ca: None,
        xds_cert: None,
        xds_key: None,
        admin_port: None,
        admin_socket: None,
        node_id: "envoy".into(),
        node_cluster: "sluice".into(),
        xds_protocol: XdsProtocol::default(),
        stats_address: None,
        overload: OverloadArgs::default(),
    }
}

#[test]
fn addresses() {
    assert_eq!(
        parse_host_port("127.0.0.1:8001"),
        Ok(("127.0.0.1".into(), 8001))
    );
    assert_eq!(parse_host_port("[::1]:8001"), Ok(("::1".into(), 8001)));
    assert_eq!(
        parse_host_port("sluice.sluice-system.svc:8001"),
        Ok(("sluice.sluice-system.svc".into(), 8001))
    );
    assert_eq!(
        parse_host_port("::1:8001").unwrap_err().to_string(),
        "--xds-address: \"::1:8001\" must be HOST:PORT (a host name, an IPv4 address or a bracketed IPv6 address, and a port 1-65535)"
    );
    assert!(parse_host_port("host").is_err());
    assert!(parse_host_port("host:0").is_err());
    assert!(parse_host_port(":80").is_err());
    assert!(parse_host_port("host:99999").is_err());
}

#[test]
fn plain_bootstrap_uses_ads_and_an_admin_socket() {
    let b = build_bootstrap(&mk_args("127.0.0.1:8001")).unwrap();
    assert_eq!(
        b["dynamic_resources"]["ads_config"]["api_type"],
        "DELTA_GRPC"
    );
    assert_eq!(b["dynamic_resources"]["lds_config"]["ads"], json!({}));
    assert_eq!(b["dynamic_resources"]["cds_config"]["ads"], json!({}));
    assert_eq!(b["admin"]["address"]["pipe"]["path"], DEFAULT_ADMIN_SOCKET);
    let c = &b["static_resources"]["clusters"][0];
    assert_eq!(c["type"], "STATIC");
    assert!(c.get("transport_socket").is_none());
    // Envoy takes xDS responses in frames of up to 1 MiB.
    let h2 = &c["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
        ["explicit_http_config"]["http2_protocol_options"];
    assert_eq!(
        h2["custom_settings_parameters"],
        json!([{ "identifier": 5, "value": 1048576 }])
    );
    // Statistics flushed when read through the admin interface, not on a timer.
    assert_eq!(b["stats_flush_on_admin"], true);
    assert!(b.get("stats_flush_interval").is_none());
    // Envoy's RE2 limit raised to the one sluice's regexes are checked against, the admin
    // runtime layer kept.
    assert_eq!(
        b["layered_runtime"],
        json!({ "layers": [
            { "name": "sluice", "static_layer": {
                "re2.max_program_size.error_level": crate::translate::RE2_MAX_PROGRAM_SIZE
            } },
            { "name": "admin", "admin_layer": {} }
        ] })
    );
}

#[test]
fn the_stats_listener_routes_its_get_pages_alone_to_the_admin_interface() {
    let plain = build_bootstrap(&mk_args("127.0.0.1:8001")).unwrap();
    assert_eq!(plain["static_resources"]["listeners"], json!([]));
    assert_eq!(
        plain["static_resources"]["clusters"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut a = mk_args("127.0.0.1:8001");
    a.stats_address = Some("0.0.0.0:8002".parse().unwrap());
    let b = build_bootstrap(&a).unwrap();
    let l = &b["static_resources"]["listeners"][0];
    assert_eq!(l["name"], STATS_LISTENER);
    assert_eq!(
        l["address"]["socket_address"],
        json!({ "address": "0.0.0.0", "port_value": 8002 })
    );
    let hcm = &l["filter_chains"][0]["filters"][0]["typed_config"];
    let routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap();
    let paths: Vec<&str> = routes
        .iter()
        .map(|r| r["match"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, STATS_PATHS);
    for r in routes {
        assert_eq!(r["route"]["cluster"], ADMIN_CLUSTER);
        assert_eq!(r["match"]["headers"][0]["string_match"]["exact"], "GET");
        assert!(r["match"].get("prefix").is_none());
    }
    // The xDS cluster first, then the one to the admin socket.
    let clusters = b["static_resources"]["clusters"].as_array().unwrap();
    assert_eq!(clusters[0]["name"], XDS_CLUSTER);
    assert_eq!(clusters[1]["name"], ADMIN_CLUSTER);
    let endpoint = &clusters[1]["load_assignment"]["endpoints"][0]["lb_endpoints"][0];
    assert_eq!(endpoint["endpoint"]["address"], b["admin"]["address"]);
}

#[test]
fn the_overload_manager_limits_connections_by_default_and_the_heap_when_asked() {
    let monitor = |b: &Value, name: &str| {
        let monitors = b["overload_manager"]["resource_monitors"]
            .as_array()
            .unwrap();
        monitors.iter().find(|m| m["name"] == name).cloned()
    };
    // Default: a connection limit of 50,000, no heap limit, no action.
    let b = build_bootstrap(&mk_args("127.0.0.1:8001")).unwrap();
    let connections = monitor(&b, CONNECTIONS_MONITOR).unwrap();
    assert_eq!(
        connections["typed_config"]["max_active_downstream_connections"],
        50_000
    );
    assert!(monitor(&b, FIXED_HEAP_MONITOR).is_none());
    assert_eq!(b["overload_manager"]["actions"], json!([]));
    // A heap limit: its monitor and the two actions at 95% and 98% of it.
    let mut a = mk_args("127.0.0.1:8001");
    a.overload.overload_max_heap_bytes = 1 << 30;
    a.overload.overload_max_connections = 20;
    let b = build_bootstrap(&a).unwrap();
    assert_eq!(
        monitor(&b, FIXED_HEAP_MONITOR).unwrap()["typed_config"],
        json!({
            "@type": "type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
            "max_heap_size_bytes": 1u64 << 30
        })
    );
    assert_eq!(
        monitor(&b, CONNECTIONS_MONITOR).unwrap()["typed_config"]["max_active_downstream_connections"],
        20
    );
    assert_eq!(
        b["overload_manager"]["actions"],
        json!([
            { "name": "envoy.overload_actions.shrink_heap", "triggers": [
                { "name": FIXED_HEAP_MONITOR, "threshold": { "value": 0.95 } }
            ] },
            { "name": "envoy.overload_actions.stop_accepting_requests", "triggers": [
                { "name": FIXED_HEAP_MONITOR, "threshold": { "value": 0.98 } }
            ] }
        ])
    );
    // Both off: no overload manager.
    a.overload.overload_max_heap_bytes = 0;
    a.overload.overload_max_connections = 0;
    assert!(
        build_bootstrap(&a)
            .unwrap()
            .get("overload_manager")
            .is_none()
    );
    // The statistics listener stays reachable at the connection limit.
    a.stats_address = Some("0.0.0.0:8002".parse().unwrap());
    let b = build_bootstrap(&a).unwrap();
    assert_eq!(
        b["static_resources"]["listeners"][0]["ignore_global_conn_limit"],
        true
    );
    assert_eq!(b["admin"]["ignore_global_conn_limit"], true);
}

#[test]
fn the_command_line_takes_the_overload_limits() {
    use clap::Parser;
    let parse = |extra: &[&str]| {
        let args = [
            "sluice",
            "bootstrap",
            "--xds-address",
            "127.0.0.1:8001",
            "--out",
            "b.json",
        ];
        let cli = crate::cli::Cli::try_parse_from(args.iter().chain(extra)).unwrap();
        match cli.command {
            crate::cli::Command::Bootstrap(a) => a.overload,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(parse(&[]), OverloadArgs::default());
    assert_eq!(
        parse(&[
            "--overload-max-heap-bytes",
            "2147483648",
            "--overload-max-connections",
            "0"
        ]),
        OverloadArgs {
            overload_max_heap_bytes: 2 << 30,
            overload_max_connections: 0,
        }
    );
}

#[test]
fn the_command_line_defaults_to_delta_and_takes_sotw() {
    use clap::Parser;
    let parse = |extra: &[&str]| {
        let args = [
            "sluice",
            "bootstrap",
            "--xds-address",
            "127.0.0.1:8001",
            "--out",
            "b.json",
        ];
        let cli = crate::cli::Cli::try_parse_from(args.iter().chain(extra)).unwrap();
        match cli.command {
            crate::cli::Command::Bootstrap(a) => a.xds_protocol,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(parse(&[]), XdsProtocol::Delta);
    assert_eq!(parse(&["--xds-protocol", "sotw"]), XdsProtocol::Sotw);
}

#[test]
fn admin_port_is_loopback_and_mtls_and_sotw_are_optional() {
    let mut a = mk_args("sluice.example:8001");
    a.admin_port = Some(9901);
    a.xds_protocol = XdsProtocol::Sotw;
    a.xds_ca = Some("/ca.pem".into());
    a.xds_cert = Some("/cert.pem".into());
    a.xds_key = Some("/key.pem".into());
    let b = build_bootstrap(&a).unwrap();
    assert_eq!(
        b["admin"]["address"]["socket_address"],
        json!({"address": "127.0.0.1", "port_value": 9901})
    );
    assert_eq!(b["dynamic_resources"]["ads_config"]["api_type"], "GRPC");
    let c = &b["static_resources"]["clusters"][0];
    assert_eq!(c["type"], "STRICT_DNS");
    let tls = &c["transport_socket"]["typed_config"];
    assert_eq!(tls["sni"], "sluice.example");
    // The certificate and the CA come from files of secrets beside the bootstrap, which
    // Envoy reads again when the certificates' folder changes.
    let context = &tls["common_tls_context"];
    assert_eq!(context["alpn_protocols"], json!(["h2"]));
    assert_eq!(
        context["tls_certificate_sds_secret_configs"],
        json!([{ "name": SDS_CLIENT_CERTIFICATE, "sds_config": {
            "path_config_source": { "path": "/dev/null-sds-client-certificate.json" },
            "resource_api_version": "V3"
        } }])
    );
    assert_eq!(
        context["validation_context_sds_secret_config"]["sds_config"]["path_config_source"]["path"],
        "/dev/null-sds-trusted-ca.json"
    );
    let sds = sds_files(&a).unwrap();
    assert_eq!(
        sds.certificate.1["resources"][0]["tls_certificate"],
        json!({
            "certificate_chain": { "filename": "/cert.pem" },
            "private_key": { "filename": "/key.pem" },
            "watched_directory": { "path": "/" }
        })
    );
    assert_eq!(
        sds.trusted_ca.1["resources"][0]["validation_context"],
        json!({ "trusted_ca": { "filename": "/ca.pem" }, "watched_directory": { "path": "/" } })
    );
    assert!(sds_files(&mk_args("127.0.0.1:1")).is_none());
}

#[test]
fn write_bootstrap_puts_the_secret_files_beside_the_bootstrap_with_absolute_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = mk_args("127.0.0.1:8001");
    a.out = dir.path().join("envoy.json");
    a.xds_ca = Some(dir.path().join("xds/ca.crt"));
    a.xds_cert = Some(dir.path().join("xds/tls.crt"));
    a.xds_key = Some(dir.path().join("xds/tls.key"));
    write_bootstrap(&a).unwrap();
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(name)).unwrap()).unwrap()
    };
    let bootstrap = read("envoy.json");
    assert_eq!(bootstrap, build_bootstrap(&a).unwrap());
    let cert = read("envoy-sds-client-certificate.json");
    let xds = dir.path().join("xds");
    assert_eq!(
        cert["resources"][0]["tls_certificate"]["watched_directory"]["path"],
        xds.display().to_string()
    );
    assert_eq!(
        cert["resources"][0]["name"],
        bootstrap["static_resources"]["clusters"][0]["transport_socket"]["typed_config"]["common_tls_context"]
            ["tls_certificate_sds_secret_configs"][0]["name"]
    );
    let ca = read("envoy-sds-trusted-ca.json");
    assert_eq!(
        ca["resources"][0]["validation_context"]["trusted_ca"]["filename"],
        xds.join("ca.crt").display().to_string()
    );
    // No TLS, no files of secrets; a folder that is not there is an error naming the file.
    let mut plain = mk_args("127.0.0.1:8001");
    plain.out = dir.path().join("missing/envoy.json");
    let err = write_bootstrap(&plain).unwrap_err();
    assert!(err.contains("missing/envoy.json"), "{err}");
}

#[test]
fn the_xds_transport_socket_sends_sni_only_for_a_dns_name() {
    let sds = SdsFiles {
        certificate: (PathBuf::from("/etc/envoy/cert.json"), Value::Null),
        trusted_ca: (PathBuf::from("/etc/envoy/ca.json"), Value::Null),
    };
    let named = xds_transport_socket(&sds, Some("sluice.example"));
    assert_eq!(named["typed_config"]["sni"], "sluice.example");
    let ip = xds_transport_socket(&sds, None);
    assert!(ip["typed_config"].get("sni").is_none());
    assert_eq!(
        ip["typed_config"]["common_tls_context"]["validation_context_sds_secret_config"]["sds_config"]
            ["path_config_source"]["path"],
        "/etc/envoy/ca.json"
    );
}
