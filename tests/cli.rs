//! The `sluice` binary as a CI pipeline uses it: exit codes, JSON lines, human output, stdin.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn sluice(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

fn find<'a>(
    lines: &'a [serde_json::Value],
    kind: &str,
    ns: &str,
    name: &str,
) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["kind"] == kind && l["namespace"] == ns && l["name"] == name)
        .unwrap_or_else(|| panic!("no line for {kind} {ns}/{name} in {lines:#?}"))
}

const SERVICE: &str =
    "apiVersion: v1\nkind: Service\nmetadata: {name: app}\nspec:\n  ports:\n  - port: 80\n";

#[test]
fn the_seed_examples_validate() {
    let out = sluice(&["validate", "-f", "examples/"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("denied by the admission rules"), "{text}");
}

#[test]
fn json_output_has_one_line_per_routing_object_with_the_documented_keys() {
    let out = sluice(&["validate", "-o", "json", "-f", "examples/seeds/"], None);
    assert_eq!(out.status.code(), Some(0));
    let lines = json_lines(&out);
    let google = find(&lines, "IngressRoute", "prod", "google");
    let keys: Vec<&str> = google
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "allowed",
            "apiVersion",
            "kind",
            "messages",
            "name",
            "namespace",
            "status",
            "warnings"
        ]
    );
    // Seed 000 writes the deprecated `service:`: a warning, not a denial.
    assert_eq!(
        google["warnings"][0],
        "spec.routes[0].service is deprecated; use services"
    );
    // `warnings` is there only when there are some.
    assert!(
        lines
            .iter()
            .any(|l| l["allowed"] == true && l.get("warnings").is_none()),
        "{lines:#?}"
    );
    assert_eq!(google["apiVersion"], "contour.heptio.com/v1beta1");
    assert_eq!(google["allowed"], true);
    assert_eq!(google["status"], "valid");
    // Services are supporting objects, not routing objects: no line of their own.
    assert!(lines.iter().all(|l| l["kind"] != "Service"));
    // Another controller's Ingress is ignored, not judged.
    let foreign = find(&lines, "Ingress", "default", "invalid-both-backends");
    assert_eq!(foreign["allowed"], true);
    assert_eq!(foreign["status"], "ignored");
}

#[test]
fn a_denied_object_exits_1_with_the_field_path_value_and_fix() {
    let bad = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: bad}\nspec:\n  virtualhost: {fqdn: bad.example.com}\n  routes:\n  - match: /a\n    services: [{name: app, port: 80}]\n  - match: /b\n    services: [{name: app, port: 80}]\n  - match: finance\n    services: [{name: app, port: 80}]\n";
    let out = sluice(
        &["validate", "-o", "json", "-f", "-"],
        Some(&format!("{SERVICE}---\n{bad}")),
    );
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let l = find(&lines, "IngressRoute", "default", "bad");
    assert_eq!(l["allowed"], false);
    assert_eq!(l["status"], "invalid");
    let messages: Vec<&str> = l["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        messages.contains(&"spec.routes[2].match: \"finance\" must start with \"/\""),
        "{messages:?}"
    );
}

#[test]
fn dangling_references_are_allowed_but_show_in_status() {
    let root = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: root, namespace: a}\nspec:\n  virtualhost: {fqdn: a.example.com}\n  routes:\n  - match: /\n    delegate: {name: missing, namespace: b}\n";
    let out = sluice(&["validate", "-o", "json", "-f", "-"], Some(root));
    let lines = json_lines(&out);
    let l = find(&lines, "IngressRoute", "a", "root");
    assert_eq!(
        l["allowed"], true,
        "GitOps applies in any order: a dangling delegate is not a denial"
    );
    assert_eq!(l["status"], "invalid");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn orphans_are_a_warning_not_a_failure() {
    let vertex = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: lonely}\nspec:\n  routes:\n  - match: /\n    services: [{name: app, port: 80}]\n";
    let out = sluice(
        &["validate", "-f", "-"],
        Some(&format!("{SERVICE}---\n{vertex}")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("orphaned IngressRoute default/lonely"),
        "{text}"
    );
}

#[test]
fn an_unknown_field_is_a_warning_naming_its_path_not_a_failure() {
    // `prefixRewrite` is a field of projectcontour.io/v1, not of contour.heptio.com/v1beta1.
    let root = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: web}\nspec:\n  virtualhost: {fqdn: web.example.com}\n  routes:\n  - match: /\n    prefixRewrite: /app\n    services: [{name: app, port: 80}]\n";
    let input = format!("{SERVICE}---\n{root}");
    let out = sluice(&["validate", "-f", "-"], Some(&input));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("ok       IngressRoute default/web"), "{text}");
    assert!(
        text.contains(
            "warning: unknown field spec.routes[0].prefixRewrite: IngressRoute \
             contour.heptio.com/v1beta1 has no such field, so it has no effect"
        ),
        "{text}"
    );
    // JSON lines carry it under `warnings` (a key present only when there are warnings).
    let out = sluice(&["validate", "-o", "json", "-f", "-"], Some(&input));
    let lines = json_lines(&out);
    let web = find(&lines, "IngressRoute", "default", "web");
    assert_eq!(web["status"], "valid");
    let warnings = web["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .starts_with("unknown field spec.routes[0].prefixRewrite:"),
        "{warnings:?}"
    );
    // `sluice routes` says it on stderr and prints the table.
    let out = sluice(&["routes", "-f", "-"], Some(&input));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: - (document 1): IngressRoute default/web: unknown field spec.routes[0].prefixRewrite"),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("web.example.com"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn unreadable_input_exits_2_naming_file_and_document() {
    let out = sluice(&["validate", "-f", "no/such/file.yaml"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/file.yaml"));

    let out = sluice(
        &["validate", "-f", "-"],
        Some(&format!("{SERVICE}---\nkind: [broken\n")),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("- (document 1)"), "{err}");

    let out = sluice(&["validate", "-f", "-"], Some("- just\n- a list\n"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("document is not a mapping"));
}

#[test]
fn a_document_that_does_not_fit_the_schema_is_denied_with_its_field() {
    let doc = "apiVersion: contour.heptio.com/v1alpha1\nkind: Route\nmetadata: {name: r}\nspec:\n  host: r.example.com\n  routes:\n  - pathPrefix: /\n    upstreams: [{serviceName: app, servicePort: eighty}]\n";
    let out = sluice(&["validate", "-o", "json", "-f", "-"], Some(doc));
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let l = find(&lines, "Route", "default", "r");
    assert_eq!(l["allowed"], false);
    let m = l["messages"][0].as_str().unwrap();
    assert!(
        m.starts_with("spec.routes[0].upstreams[0].servicePort: invalid type: string \"eighty\""),
        "{m}"
    );
}

#[test]
fn bad_flags_exit_2() {
    let out = sluice(&["validate", "--no-such-flag"], None);
    assert_eq!(out.status.code(), Some(2));
    let out = sluice(&["validate", "-o", "xml", "-f", "examples/"], None);
    assert_eq!(out.status.code(), Some(2));
}

/// Envoy settings of `sluice serve` that cannot work stop it before it starts, naming the fix.
#[test]
fn bad_envoy_settings_of_serve_exit_2_naming_the_fix() {
    for (args, says) in [
        (
            &["--access-log-path", "logs/access.log"][..],
            "is not an absolute path",
        ),
        (
            &["--access-log-format", "xml"][..],
            "possible values: json, envoy, off",
        ),
        (
            &["--tracing-otlp-address", "http://otel:4317"][..],
            "has a scheme; give the collector as HOST:PORT",
        ),
        (
            &[
                "--tracing-otlp-address",
                "otel:4317",
                "--tracing-sampling-percent",
                "150",
            ][..],
            "is not a percentage from 0 to 100",
        ),
        (&["--num-trusted-hops", "40"][..], "40 is not in 0..=32"),
        (
            &["--http-route-shards", "0"][..],
            "expected `auto` or a number of shards from 1 to 256",
        ),
        (
            &["--http-route-shards", "many"][..],
            "invalid value 'many' for '--http-route-shards <auto|N>'",
        ),
        (
            &["--tracing-sampling-percent", "5"][..],
            "--tracing-otlp-address <HOST:PORT>",
        ),
    ] {
        let mut all = vec!["serve", "--manifests", "examples/demo"];
        all.extend_from_slice(args);
        let out = sluice(&all, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn routes_prints_the_table_and_explains_a_request() {
    let out = sluice(&["routes", "-f", "examples/seeds/"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HOST"), "{text}");
    assert!(text.contains("www.google.com"), "{text}");
    let out = sluice(
        &[
            "routes",
            "-f",
            "examples/seeds/",
            "--request",
            "www.google.com/finance/static/logo.png",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("finance/finance-static-content/8080"),
        "{text}"
    );
    assert!(
        text.contains("source:   IngressRoute finance/google-finance"),
        "{text}"
    );
    let out = sluice(
        &[
            "routes",
            "-f",
            "examples/seeds/",
            "--request",
            "nowhere.example.com/",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let out = sluice(&["routes", "-o", "yaml", "-f", "examples/seeds/"], None);
    let yaml: serde_json::Value = serde_norway::from_slice(&out.stdout).unwrap();
    assert!(
        yaml.as_array()
            .unwrap()
            .iter()
            .any(|h| h["host"] == "www.heptio.com")
    );
}

#[test]
fn crds_prints_what_crds_dir_holds() {
    let out = sluice(&["crds"], None);
    assert_eq!(out.status.code(), Some(0));
    let mut want = String::new();
    for (file, _) in sluice::api::crds::all() {
        want.push_str(
            &std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("crds")
                    .join(file),
            )
            .unwrap(),
        );
    }
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

/// The binary runs on jemalloc with the configuration of .cargo/config.toml built in (a
/// background thread returning freed pages, two arenas): without it an idle sluice keeps freed
/// memory resident (docs/cluster-mode.md). jemalloc prints its options at exit when asked to.
#[test]
fn the_binary_carries_its_allocator_configuration() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .expect("sluice runs");
    assert!(out.status.success());
    let stats = String::from_utf8_lossy(&out.stderr);
    for option in [
        "opt.background_thread: true",
        "opt.narenas: 2",
        "opt.dirty_decay_ms: 1000",
    ] {
        assert!(
            stats.contains(option),
            "{option} missing from jemalloc's statistics:\n{stats}"
        );
    }
}

#[test]
fn routes_shows_gateway_tcp_listeners_and_tls_passthrough_hosts() {
    let manifests = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: data, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: pg, protocol: TCP, port: 5432}
  - {name: tls, protocol: TLS, port: 443, tls: {mode: Passthrough}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: vault, namespace: shop}
spec:
  parentRefs: [{name: data, sectionName: tls}]
  hostnames: [vault.example.com]
  rules: [{backendRefs: [{name: db, port: 5432}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: pg, namespace: shop}
spec:
  parentRefs: [{name: data}]
  rules: [{backendRefs: [{name: db, port: 5432, weight: 3}, {name: db-b, port: 5432}]}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {ports: [{port: 5432}]}
---
apiVersion: v1
kind: Service
metadata: {name: db-b, namespace: shop}
spec: {ports: [{port: 5432}]}
";
    let out = sluice(&["routes", "-f", "-"], Some(manifests));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row = (text.lines())
        .find(|l| l.starts_with("tcp:5432"))
        .unwrap_or_else(|| panic!("no row of the TCP listener: {text}"));
    assert!(row.contains("shop/db/5432"), "{row}");
    assert!(row.contains("(3)") && row.contains("(1)"), "{row}");
    assert!(row.ends_with("TCPRoute shop/pg"), "{row}");
    let row = (text.lines())
        .find(|l| l.starts_with("vault.example.com"))
        .unwrap_or_else(|| panic!("no row of the passthrough host: {text}"));
    assert!(
        row.contains("tls passthrough") && row.contains("shop/db/5432"),
        "{row}"
    );
    // The routes' own statuses say they are attached.
    let out = sluice(&["validate", "-o", "json", "-f", "-"], Some(manifests));
    let lines = json_lines(&out);
    for (kind, name) in [("TCPRoute", "pg"), ("TLSRoute", "vault")] {
        let route = find(&lines, kind, "shop", name);
        assert_eq!(route["status"], "valid", "{route}");
    }
    // Where Envoy listens on 5432 by itself, the TCP listener is not programmed.
    let out = sluice(
        &["routes", "--envoy-ports", "80,443,5432", "-f", "-"],
        Some(manifests),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.lines().any(|l| l.starts_with("tcp:5432")), "{text}");
    let out = sluice(
        &["validate", "--envoy-ports=5432", "-o", "json", "-f", "-"],
        Some(manifests),
    );
    let lines = json_lines(&out);
    let route = find(&lines, "TCPRoute", "shop", "pg");
    assert_eq!(route["status"], "invalid", "{route}");
    assert!(
        route
            .to_string()
            .contains("no accepted listener of Gateway shop/data takes TCPRoutes"),
        "{route}"
    );
}

#[test]
fn with_gateway_addresses_two_gateways_serve_one_hostname_and_routes_shows_each_at_its_address() {
    let input = "tests/fixtures/gateway-addresses/two-teams.yaml";
    let pool = ["--gateway-addresses", "127.0.1.0/24"];
    let out = sluice(
        &[&["validate", "-o", "json", "-f", input], &pool[..]].concat(),
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines = json_lines(&out);
    for (ns, name) in [("team-a", "ra"), ("team-b", "rb")] {
        assert_eq!(find(&lines, "HTTPRoute", ns, name)["status"], "valid");
    }
    let out = sluice(&[&["routes", "-f", input], &pool[..]].concat(), None);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    for (gateway, backend) in [("team-a/ga", "team-a/a/80"), ("team-b/gb", "team-b/b/80")] {
        let row = (table.lines())
            .find(|l| l.contains(&format!("[Gateway {gateway} at 127.0.1.")))
            .unwrap_or_else(|| panic!("no row of {gateway}:\n{table}"));
        assert!(
            row.starts_with("app.example.com") && row.contains(backend),
            "{row}"
        );
    }

    // Without addresses of their own the two Gateways share Envoy's listener: one route loses.
    let out = sluice(&["validate", "-o", "json", "-f", input], None);
    assert_eq!(out.status.code(), Some(1));
    let rb = find(&json_lines(&out), "HTTPRoute", "team-b", "rb").clone();
    assert_eq!(rb["status"], "invalid", "{rb}");
}
