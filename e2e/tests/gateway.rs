//! The Gateway API end to end in cluster mode: a GatewayClass of sluice's controller, a Gateway
//! and an HTTPRoute (prefix, regular expression and query parameter matches, a mirror, a CORS
//! policy) applied with kubectl are served by a real Envoy fed by sluice, and their statuses
//! (the Gateway API's own conditions) follow what sluice decided, as a GRPCRoute's do. A
//! listener that takes routes by their namespace's labels follows the namespace's labels. A
//! TCPRoute on a Gateway's TCP listener forwards that port's connections, and a TLSRoute on its
//! TLS listener gets its status.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, Envoy, Ports, Sluice, env, wait_for};

/// A CORS preflight for a PUT through Envoy: its status and response headers (names in lower
/// case, one a line).
fn preflight(envoy: &Envoy, host: &str, path: &str, origin: &str) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "3", "--noproxy", "*", "-X", "OPTIONS"])
        .args([
            "-H",
            &format!("Host: {host}"),
            "-H",
            &format!("Origin: {origin}"),
        ])
        .args(["-H", "Access-Control-Request-Method: PUT"])
        .args(["-o", "/dev/null", "-D", "-", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{}{path}", envoy.http_port))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let (headers, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    let headers = (headers.lines())
        .map(|l| match l.split_once(':') {
            Some((name, value)) => format!("{}:{value}", name.to_lowercase()),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    (code.trim().parse().unwrap_or(0), headers)
}

fn objects(ns: &str, class: &str, host: &str, b_service: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shop, namespace: {ns}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [{host}]
  rules:
    - matches: [{{path: {{type: PathPrefix, value: /b}}}}]
      filters: [{{type: CORS, cors: {{allowOrigins: ["https://*.example.com"], allowMethods: [GET, PUT]}}}}]
      backendRefs: [{{name: {b_service}, port: 80}}]
    - matches: [{{path: {{type: RegularExpression, value: "/items/[0-9]+"}}, queryParams: [{{name: v, value: "2"}}]}}]
      filters: [{{type: RequestMirror, requestMirror: {{backendRef: {{name: web-a, port: 80}}, percent: 50}}}}]
      backendRefs: [{{name: web-b, port: 80}}]
    - backendRefs: [{{name: web-a, port: 80}}]
"#
    )
}

/// The condition `type_` in a list of conditions.
fn cond<'a>(conditions: &'a Value, type_: &str) -> Option<&'a Value> {
    conditions.as_array()?.iter().find(|c| c["type"] == type_)
}

/// Whether the condition has this status and reason, at the object's generation.
fn holds(obj: &Value, conditions: &Value, type_: &str, status: &str, reason: &str) -> bool {
    cond(conditions, type_).is_some_and(|c| {
        c["status"] == status
            && c["reason"] == reason
            && c["observedGeneration"] == obj["metadata"]["generation"]
            && c["lastTransitionTime"].is_string()
    })
}

fn wait_object(
    env: &Env,
    resource: &str,
    ns: &str,
    name: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(
        Duration::from_secs(30),
        &format!("{resource} {ns}/{name}: {what}"),
        || {
            let o = env
                .get(resource, ns, name)
                .ok_or_else(|| "not found".to_string())?;
            if ok(&o) {
                Ok(o)
            } else {
                Err(o["status"].to_string())
            }
        },
    )
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn an_httproute_on_sluices_gateway_serves_traffic_and_reports_status() {
    let env = env();
    env.install_gateway_api_crds();
    let ns = env.namespace("e2e-gateway-traffic");
    let class = format!("{ns}-sluice");
    let host = format!("{ns}.example.com");
    let ports = Ports::new();
    let mut flags = ports.serve_flags();
    flags.extend([
        "--ingress-status-address".to_string(),
        "192.0.2.20".to_string(),
    ]);
    let _sluice = Sluice::start(&env, "gateway-traffic", &flags);
    let envoy = Envoy::start(&env, &ports, "gateway-traffic");
    env.apply_ok(&env.backend_service(&ns, "web-a", env.backend_ports[0]));
    env.apply_ok(&env.backend_service(&ns, "web-b", env.backend_ports[1]));
    env.apply_ok(&objects(&ns, &class, &host, "web-b"));
    let a = format!("backend-{}", env.backend_ports[0]);
    let b = format!("backend-{}", env.backend_ports[1]);
    envoy.wait_answer(&host, "/", 200, &a);
    envoy.wait_answer(&host, "/b/page", 200, &b);
    envoy.wait_answer(&host, "/bb", 200, &a);
    // A regular expression path with a query parameter condition (and a mirror beside it).
    envoy.wait_answer(&host, "/items/7?v=2", 200, &b);
    envoy.wait_answer(&host, "/items/7?v=3", 200, &a);
    envoy.wait_answer(&host, "/items/x?v=2", 200, &a);
    // The CORS policy: Envoy answers an allowed origin's preflight itself.
    let (code, headers) = preflight(&envoy, &host, "/b/page", "https://app.example.com");
    assert_eq!(code, 200, "{headers}");
    assert!(
        headers.contains("access-control-allow-origin: https://app.example.com"),
        "{headers}"
    );
    assert!(
        headers.contains("access-control-allow-methods: GET,PUT"),
        "{headers}"
    );

    let gc = wait_object(&env, "gatewayclasses", "", &class, "Accepted", |o| {
        holds(
            o,
            &o["status"]["conditions"],
            "Accepted",
            "True",
            "Accepted",
        )
    });
    // The features sluice serves, by the Gateway API's names, as the apiserver stores them.
    let features = gc["status"]["supportedFeatures"].as_array().cloned();
    let features: Vec<Value> = features.unwrap_or_default();
    for name in [
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "TLSRoute",
        "HTTPRouteCORS",
    ] {
        assert!(
            features.contains(&serde_json::json!({"name": name})),
            "{name} in {features:?}"
        );
    }
    let gw = wait_object(
        &env,
        "gateways",
        &ns,
        "edge",
        "Programmed, one route",
        |o| {
            let s = &o["status"];
            let l = &s["listeners"][0];
            holds(o, &s["conditions"], "Accepted", "True", "Accepted")
                && holds(o, &s["conditions"], "Programmed", "True", "Programmed")
                && l["attachedRoutes"] == 1
                && holds(o, &l["conditions"], "ResolvedRefs", "True", "ResolvedRefs")
        },
    );
    assert_eq!(
        gw["status"]["addresses"],
        serde_json::json!([{"type": "IPAddress", "value": "192.0.2.20"}])
    );
    assert_eq!(
        gw["status"]["listeners"][0]["supportedKinds"],
        serde_json::json!([
            {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
            {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}
        ])
    );
    let route = wait_object(&env, "httproutes", &ns, "shop", "Accepted", |o| {
        let p = &o["status"]["parents"][0];
        holds(o, &p["conditions"], "Accepted", "True", "Accepted")
            && holds(o, &p["conditions"], "ResolvedRefs", "True", "ResolvedRefs")
    });
    let parent = &route["status"]["parents"][0];
    assert_eq!(parent["controllerName"], "sluice.dev/gateway-controller");
    assert_eq!(parent["parentRef"]["name"], "edge");
    assert_eq!(parent["parentRef"]["namespace"], ns.as_str());

    // A backend that does not exist: its rule answers 500 (as the Gateway API asks) and
    // ResolvedRefs says why.
    env.apply_ok(&objects(&ns, &class, &host, "missing"));
    envoy.wait_answer(&host, "/b/page", 500, "");
    let route = wait_object(&env, "httproutes", &ns, "shop", "BackendNotFound", |o| {
        let p = &o["status"]["parents"][0];
        holds(
            o,
            &p["conditions"],
            "ResolvedRefs",
            "False",
            "BackendNotFound",
        ) && holds(o, &p["conditions"], "Accepted", "True", "Accepted")
    });
    let message =
        cond(&route["status"]["parents"][0]["conditions"], "ResolvedRefs").unwrap()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    assert!(
        message.contains(&format!("Service \"{ns}/missing\" not found")),
        "{message}"
    );
    envoy.wait_answer(&host, "/", 200, &a);

    // A GRPCRoute on the same listener: its own status, and the listener counts it.
    env.apply_ok(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: rpc, namespace: {ns}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [grpc.{host}]
  rules: [{{matches: [{{method: {{service: shop.Cart}}}}], backendRefs: [{{name: web-a, port: 80}}]}}]
"#
    ));
    let grpc = wait_object(&env, "grpcroutes", &ns, "rpc", "Accepted", |o| {
        let p = &o["status"]["parents"][0];
        holds(o, &p["conditions"], "Accepted", "True", "Accepted")
            && holds(o, &p["conditions"], "ResolvedRefs", "True", "ResolvedRefs")
    });
    assert_eq!(
        grpc["status"]["parents"][0]["controllerName"],
        "sluice.dev/gateway-controller"
    );
    wait_object(&env, "gateways", &ns, "edge", "two routes attached", |o| {
        o["status"]["listeners"][0]["attachedRoutes"] == 2
    });

    // A listener taking the routes of namespaces by label: a route of another namespace
    // attaches once its namespace has the label, and leaves when the label goes.
    let team = env.namespace("e2e-gateway-team");
    let team_host = format!("team.{host}");
    env.apply_ok(&env.backend_service(&team, "web-a", env.backend_ports[0]));
    env.apply_ok(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: shared, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    hostname: "{team_host}"
    allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{sluice-e2e/routes: shared}}}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: team, namespace: {team}}}
spec:
  parentRefs: [{{name: shared, namespace: {ns}}}]
  rules: [{{backendRefs: [{{name: web-a, port: 80}}]}}]
"#
    ));
    let not_allowed = |o: &Value| {
        let p = &o["status"]["parents"][0];
        holds(
            o,
            &p["conditions"],
            "Accepted",
            "False",
            "NotAllowedByListeners",
        )
    };
    wait_object(
        &env,
        "httproutes",
        &team,
        "team",
        "not allowed",
        not_allowed,
    );
    envoy.wait_answer(&team_host, "/", 404, "");
    env.kubectl_ok(&["label", "namespace", &team, "sluice-e2e/routes=shared"]);
    envoy.wait_answer(&team_host, "/", 200, &a);
    wait_object(&env, "httproutes", &team, "team", "Accepted", |o| {
        let p = &o["status"]["parents"][0];
        holds(o, &p["conditions"], "Accepted", "True", "Accepted")
    });
    wait_object(&env, "gateways", &ns, "shared", "one route attached", |o| {
        o["status"]["listeners"][0]["attachedRoutes"] == 1
    });
    env.kubectl_ok(&["label", "namespace", &team, "sluice-e2e/routes-"]);
    envoy.wait_answer(&team_host, "/", 404, "");
    wait_object(
        &env,
        "httproutes",
        &team,
        "team",
        "not allowed again",
        not_allowed,
    );
    env.kubectl_ok(&["delete", "httproute", "-n", &team, "team"]);
    env.kubectl_ok(&["delete", "gateway", "-n", &ns, "shared"]);

    env.kubectl_ok(&["delete", "httproute", "-n", &ns, "shop"]);
    env.kubectl_ok(&["delete", "grpcroute", "-n", &ns, "rpc"]);
    envoy.wait_answer(&host, "/", 404, "");
    wait_object(&env, "gateways", &ns, "edge", "no route attached", |o| {
        o["status"]["listeners"][0]["attachedRoutes"] == 0
    });
    env.kubectl_ok(&["delete", "gateway", "-n", &ns, "edge"]);
    env.kubectl_ok(&["delete", "gatewayclass", &class]);
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn tcp_and_tls_routes_on_sluices_gateway_forward_connections_and_report_status() {
    let env = env();
    env.install_gateway_api_crds();
    let ns = env.namespace("e2e-gateway-tcp");
    let class = format!("{ns}-sluice");
    let ports = Ports::new();
    // Envoy listens on a TCP listener's port itself.
    let tcp_port = crate::support::free_port();
    let _sluice = Sluice::start(&env, "gateway-tcp", &ports.serve_flags());
    let _envoy = Envoy::start(&env, &ports, "gateway-tcp");
    env.apply_ok(&env.backend_service(&ns, "web-a", env.backend_ports[0]));
    env.apply_ok(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: {class}}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: data, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: tcp, protocol: TCP, port: {tcp_port}}}
  - {{name: tls, protocol: TLS, port: 443, tls: {{mode: Passthrough}}}}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: stream, namespace: {ns}}}
spec:
  parentRefs: [{{name: data, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: web-a, port: 80}}]}}]
"#
    ));
    // An HTTP request sent to the TCP port goes through Envoy's TCP proxy to the backend as it
    // is (no Host header is read on the way).
    let url = format!("http://127.0.0.1:{tcp_port}/through-tcp");
    let a = format!("backend-{}", env.backend_ports[0]);
    wait_for(
        Duration::from_secs(30),
        &format!("{url} → {a}"),
        || match crate::support::curl_get(&url, &[]) {
            (200, body) if body.contains(&a) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        },
    );
    wait_object(&env, "tcproutes", &ns, "stream", "Accepted", |o| {
        let p = &o["status"]["parents"][0];
        holds(o, &p["conditions"], "Accepted", "True", "Accepted")
            && holds(o, &p["conditions"], "ResolvedRefs", "True", "ResolvedRefs")
            && p["controllerName"] == "sluice.dev/gateway-controller"
    });
    let gw = wait_object(&env, "gateways", &ns, "data", "one route attached", |o| {
        let l = &o["status"]["listeners"][0];
        holds(
            o,
            &o["status"]["conditions"],
            "Programmed",
            "True",
            "Programmed",
        ) && l["attachedRoutes"] == 1
    });
    assert_eq!(
        gw["status"]["listeners"][0]["supportedKinds"],
        serde_json::json!([{"group": "gateway.networking.k8s.io", "kind": "TCPRoute"}])
    );

    // A TLSRoute on the TLS listener: its status, written at the version the apiserver serves.
    env.apply_ok(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: vault, namespace: {ns}}}
spec:
  parentRefs: [{{name: data, sectionName: tls}}]
  hostnames: [vault.{ns}.example.com]
  rules: [{{backendRefs: [{{name: web-a, port: 80}}]}}]
"#
    ));
    wait_object(&env, "tlsroutes", &ns, "vault", "Accepted", |o| {
        let p = &o["status"]["parents"][0];
        holds(o, &p["conditions"], "Accepted", "True", "Accepted")
            && holds(o, &p["conditions"], "ResolvedRefs", "True", "ResolvedRefs")
    });
    wait_object(
        &env,
        "gateways",
        &ns,
        "data",
        "the TLSRoute attached",
        |o| o["status"]["listeners"][1]["attachedRoutes"] == 1,
    );
    env.kubectl_ok(&["delete", "tlsroute", "-n", &ns, "vault"]);

    // Without the route, the port is closed again.
    env.kubectl_ok(&["delete", "tcproute", "-n", &ns, "stream"]);
    wait_for(
        Duration::from_secs(30),
        &format!("{url} refused"),
        || match crate::support::curl_get(&url, &[]) {
            (0, _) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        },
    );
    wait_object(&env, "gateways", &ns, "data", "no route attached", |o| {
        o["status"]["listeners"][0]["attachedRoutes"] == 0
    });
    env.kubectl_ok(&["delete", "gateway", "-n", &ns, "data"]);
    env.kubectl_ok(&["delete", "gatewayclass", &class]);
}

/// A Gateway `ns/name` of `class` with one HTTP listener on `port`, and an HTTPRoute `ns/app` on
/// it for `host` to Service `ns/web`.
fn team_objects(ns: &str, name: &str, class: &str, port: u16, host: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  listeners: [{{name: http, protocol: HTTP, port: {port}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {ns}}}
spec:
  parentRefs: [{{name: {name}}}]
  hostnames: [{host}]
  rules:
  - backendRefs: [{{name: web, port: 80}}]
"#
    )
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn two_gateways_in_two_namespaces_serve_one_hostname_each_at_its_own_address() {
    let env = env();
    env.install_gateway_api_crds();
    let ns_a = env.namespace("e2e-gw-team-a");
    let ns_b = env.namespace("e2e-gw-team-b");
    let class = format!("{ns_a}-own");
    let host = "app.example.com";
    let ports = Ports::new();
    // The listeners' port, free on 127.0.0.1 (what other tests bind), at addresses of a
    // loopback network no other test uses.
    let port = crate::support::free_port();
    let mut flags = ports.serve_flags();
    flags.extend([
        "--gateway-addresses".to_string(),
        "127.0.89.0/29".to_string(),
    ]);
    let _sluice = Sluice::start(&env, "gateway-addresses", &flags);
    let envoy = Envoy::start(&env, &ports, "gateway-addresses");
    env.apply_ok(&env.backend_service(&ns_a, "web", env.backend_ports[0]));
    env.apply_ok(&env.backend_service(&ns_b, "web", env.backend_ports[1]));
    env.apply_ok(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {class}}}\nspec: {{controllerName: sluice.dev/gateway-controller}}\n"
    ));
    env.apply_ok(&team_objects(&ns_a, "ga", &class, port, host));
    env.apply_ok(&team_objects(&ns_b, "gb", &class, port, host));

    let mut addresses = Vec::new();
    for (ns, gw, backend) in [(&ns_a, "ga", 0), (&ns_b, "gb", 1)] {
        let o = wait_object(&env, "gateways", ns, gw, "Programmed at an address", |o| {
            let s = &o["status"];
            holds(o, &s["conditions"], "Programmed", "True", "Programmed")
                && s["addresses"][0]["type"] == "IPAddress"
                && s["listeners"][0]["attachedRoutes"] == 1
        });
        let ip = o["status"]["addresses"][0]["value"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(ip.starts_with("127.0.89."), "{ip}");
        wait_object(&env, "httproutes", ns, "app", "Accepted", |o| {
            let parent = &o["status"]["parents"][0];
            holds(o, &parent["conditions"], "Accepted", "True", "Accepted")
        });
        let url = format!("http://{ip}:{port}/");
        let want = format!("backend-{}", env.backend_ports[backend]);
        wait_for(
            Duration::from_secs(30),
            &format!("{url} → {want}"),
            || {
                let (code, body) = crate::support::curl_get(&url, &[format!("Host: {host}")]);
                if code == 200 && body.contains(&want) {
                    Ok(())
                } else {
                    Err(format!("{code} {body}"))
                }
            },
        );
        addresses.push(ip);
    }
    assert_ne!(addresses[0], addresses[1], "each Gateway its own address");
    // Nothing of theirs on Envoy's shared listener.
    assert_eq!(envoy.get(host, "/").0, 404);

    // Team a's Gateway deleted: its address stops answering; team b's keeps serving. When both
    // names hashed to one address of the pool, a (older) had it and b the next free one: b then
    // moves to the address its hash picks, a's old one, and answers there.
    env.kubectl_ok(&["delete", "gateway", "-n", &ns_a, "ga"]);
    let gone = format!("http://{}:{port}/", addresses[0]);
    let b_now = wait_for(
        Duration::from_secs(30),
        "team a's address closed, or team b's Gateway moved there",
        || {
            let b = env.get("gateways", &ns_b, "gb").ok_or("gb not found")?;
            let b_ip = b["status"]["addresses"][0]["value"].as_str().unwrap_or("");
            match crate::support::curl_get(&gone, &[format!("Host: {host}")]) {
                (0, _) if b_ip == addresses[1] => Ok(b_ip.to_string()),
                (200, body)
                    if b_ip == addresses[0]
                        && body.contains(&format!("backend-{}", env.backend_ports[1])) =>
                {
                    Ok(b_ip.to_string())
                }
                (code, body) => Err(format!("gb at {b_ip}; a's address: {code} {body}")),
            }
        },
    );
    let url = format!("http://{b_now}:{port}/");
    let (code, body) = crate::support::curl_get(&url, &[format!("Host: {host}")]);
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(&format!("backend-{}", env.backend_ports[1])),
        "{body}"
    );
    // The route of the deleted Gateway no longer claims to be attached.
    wait_object(&env, "httproutes", &ns_a, "app", "no parents", |o| {
        o["status"]["parents"] == serde_json::json!([])
    });
    env.kubectl_ok(&["delete", "namespace", &ns_a, &ns_b, "--wait=false"]);
    env.kubectl_ok(&["delete", "gatewayclass", &class]);
}

/// `--gateway-services` against a real API server: an accepted Gateway gets its headless Service
/// with its infrastructure labels and annotations and an EndpointSlice of its address (an
/// address the API server takes, from TEST-NET-1; nothing is sent to it), a change of its
/// infrastructure labels reaches the Service, and a Gateway moved to another controller's class
/// loses both.
#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn an_accepted_gateway_gets_a_service_with_its_infrastructure_metadata_and_address() {
    let env = env();
    env.install_gateway_api_crds();
    let ns = env.namespace("e2e-gw-services");
    let class = format!("{ns}-own");
    let ports = Ports::new();
    let mut flags = ports.serve_flags();
    flags.extend([
        "--gateway-addresses".to_string(),
        "192.0.2.8/29".to_string(),
        "--gateway-services".to_string(),
    ]);
    let _sluice = Sluice::start(&env, "gateway-services", &flags);
    env.apply_ok(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: {class}}}\nspec: {{controllerName: sluice.dev/gateway-controller}}\n"
    ));
    let gateway = |labels: &str, class: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {ns}}}
spec:
  gatewayClassName: {class}
  infrastructure:
    labels: {{{labels}}}
    annotations: {{example.com/lb: internal}}
  listeners: [{{name: http, protocol: HTTP, port: 9080}}]
"
        )
    };
    env.apply_ok(&gateway("team: edge", &class));
    let gw = wait_object(&env, "gateways", &ns, "edge", "an address", |o| {
        o["status"]["addresses"][0]["value"].is_string()
    });
    let ip = gw["status"]["addresses"][0]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let svc = wait_object(&env, "services", &ns, "sluice-edge", "labelled", |o| {
        o["metadata"]["labels"]["team"] == "edge"
    });
    let meta = &svc["metadata"];
    assert_eq!(
        meta["labels"]["gateway.networking.k8s.io/gateway-name"],
        "edge"
    );
    assert_eq!(meta["annotations"]["example.com/lb"], "internal");
    assert_eq!(meta["ownerReferences"][0]["kind"], "Gateway");
    assert_eq!(meta["ownerReferences"][0]["uid"], gw["metadata"]["uid"]);
    assert_eq!(svc["spec"]["clusterIP"], "None");
    assert_eq!(svc["spec"]["ports"][0]["port"], 9080);
    let slice = wait_object(
        &env,
        "endpointslices",
        &ns,
        "sluice-edge",
        "the address",
        |o| o["endpoints"][0]["addresses"][0] == ip.as_str(),
    );
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "sluice-edge"
    );

    env.apply_ok(&gateway("team: platform", &class));
    wait_object(&env, "services", &ns, "sluice-edge", "relabelled", |o| {
        o["metadata"]["labels"]["team"] == "platform"
    });

    env.apply_ok(&gateway("team: platform", "someone-elses"));
    wait_for(
        Duration::from_secs(30),
        "the Service and EndpointSlice deleted",
        || match (
            env.get("services", &ns, "sluice-edge"),
            env.get("endpointslices", &ns, "sluice-edge"),
        ) {
            (None, None) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    );
    env.kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    env.kubectl_ok(&["delete", "gatewayclass", &class]);
}
