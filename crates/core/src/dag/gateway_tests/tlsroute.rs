//! TLSRoutes on the `TLS` (Passthrough) listeners of sluice's Gateways: sluice's HTTPS listener
//! passes the connections whose SNI names a route's host through to its backends.

use super::*;

const DATABASES: &str = "apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: db-b, namespace: shop}
spec: {ports: [{port: 443}]}
";

/// A TLSRoute `shop/<name>` created at `created`, for `hostnames`, with a `rules` block.
fn tls_route(name: &str, created: &str, hostnames: &[&str], rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: {name}, namespace: shop, generation: 2, creationTimestamp: {created:?}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: {hostnames:?}
  rules:
{rules}"
    )
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";
const PASSTHROUGH: &str = "  - {name: tls, protocol: TLS, port: 443, tls: {mode: Passthrough}}\n";
const TO_DB: &str = "  - backendRefs: [{name: db, port: 443}]\n";

fn listener_status(dag: &Dag, name: &str) -> ListenerStatus {
    let s = status(dag, Kind::Gateway, "shop", "edge");
    let g = s
        .gateway
        .as_ref()
        .expect("a Gateway of sluice's has a status");
    let l = g.listeners.iter().find(|l| l.name == name);
    l.unwrap_or_else(|| panic!("no listener {name}: {g:?}"))
        .clone()
}

fn passed_to(dag: &Dag, host: &str) -> Vec<String> {
    let v = dag.vhosts.get(host);
    let v = v.unwrap_or_else(|| {
        panic!(
            "no host {host}: {:?}",
            dag.vhosts.keys().collect::<Vec<_>>()
        )
    });
    let clusters = v.tls_passthrough.as_ref();
    let clusters = clusters.unwrap_or_else(|| panic!("{host} is not passed through: {v:?}"));
    clusters
        .iter()
        .map(|c| format!("{}*{}", c.cluster, c.weight))
        .collect()
}

#[test]
fn a_tls_listener_passes_the_routes_hosts_through_to_its_backends() {
    let gw = gateway_with(PASSTHROUGH);
    let rules = "  - backendRefs: [{name: db, port: 443, weight: 3}, {name: db-b, port: 443}]\n";
    let route = tls_route("db", T0, &["db.example.com", "*.db.example.com"], rules);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);

    for host in ["db.example.com", "*.db.example.com"] {
        let to = passed_to(&dag, host);
        assert!(
            to[0].starts_with("shop/db/443") && to[0].ends_with("*3"),
            "{to:?}"
        );
        assert!(
            to[1].starts_with("shop/db-b/443") && to[1].ends_with("*1"),
            "{to:?}"
        );
        let v = &dag.vhosts[host];
        assert!(
            v.tls.is_none() && v.routes.is_empty() && !v.serves_http(),
            "{v:?}"
        );
    }
    let cluster = &dag.vhosts["db.example.com"]
        .tls_passthrough
        .as_ref()
        .unwrap()[0]
        .cluster;
    assert_eq!(dag.clusters[&**cluster].protocol, UpstreamProtocol::Tcp);

    let l = listener_status(&dag, "tls");
    assert_eq!(l.supported_kinds, ["TLSRoute"]);
    assert_eq!(l.attached_routes, 1);
    assert_eq!(
        conds(&l.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
    let parent = route_parent_of(&dag, Kind::TlsRoute, "shop", "db");
    assert_eq!(
        conds(&parent.conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    assert_eq!(
        status(&dag, Kind::TlsRoute, "shop", "db").state,
        State::Valid
    );
}

#[test]
fn the_listeners_hostname_narrows_the_routes_and_a_route_needs_a_named_host() {
    let gw = gateway_with(
        "  - {name: tls, protocol: TLS, port: 443, hostname: '*.example.com', tls: {mode: Passthrough}}\n",
    );
    let named = tls_route("db", T0, &["db.example.com", "db.example.org"], TO_DB);
    let unnamed = tls_route("any", T0, &[], TO_DB);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &named, &unnamed]);
    assert_eq!(passed_to(&dag, "db.example.com").len(), 1);
    assert!(!dag.vhosts.contains_key("db.example.org"));
    // A route without hostnames takes the listener's.
    assert_eq!(passed_to(&dag, "*.example.com").len(), 1);
    assert_eq!(listener_status(&dag, "tls").attached_routes, 2);

    // Neither names a host: nothing to match SNI against.
    let gw = gateway_with(PASSTHROUGH);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &unnamed]);
    let parent = route_parent_of(&dag, Kind::TlsRoute, "shop", "any");
    assert_eq!(parent.conditions[0].reason, "NoMatchingListenerHostname");
    assert!(parent.conditions[0].message.contains("SNI"), "{parent:?}");
    assert!(dag.vhosts.is_empty());
}

#[test]
fn the_oldest_route_keeps_a_host_and_a_terminated_host_is_not_passed_through() {
    let listeners = format!(
        "{PASSTHROUGH}  - {{name: https, protocol: HTTPS, port: 443, hostname: web.example.com, tls: {{certificateRefs: [{{name: web-tls}}]}}}}\n"
    );
    let gw = gateway_with(&listeners);
    let older = tls_route("db", T0, &["db.example.com"], TO_DB);
    let newer = tls_route(
        "again",
        T1,
        &["db.example.com", "other.example.com"],
        "  - backendRefs: [{name: db-b, port: 443}]\n",
    );
    let on_web = tls_route("on-web", T0, &["web.example.com"], TO_DB);
    let http = route("shop", "web", &["web.example.com"], TO_WEB);
    let mut snap = snapshot(&[
        CLASS, &gw, SERVICES, DATABASES, &newer, &older, &on_web, &http,
    ]);
    let secret = crate::synth::tls_secret("shop", "web-tls");
    snap.insert(AnyObject::Secret(Arc::new(secret)));
    let dag = build(&snap, &Options::default());

    assert!(passed_to(&dag, "db.example.com")[0].starts_with("shop/db/443"));
    assert!(passed_to(&dag, "other.example.com")[0].starts_with("shop/db-b/443"));
    let again = route_parent_of(&dag, Kind::TlsRoute, "shop", "again");
    assert_eq!(again.conditions[0].reason, "Accepted");
    assert!(
        again.conditions[0]
            .message
            .contains("\"db.example.com\" is passed through for TLSRoute shop/db"),
        "{again:?}"
    );
    assert_eq!(
        status(&dag, Kind::TlsRoute, "shop", "again").state,
        State::Invalid
    );

    // web.example.com terminates TLS through the HTTPS listener: not passed through.
    let web = &dag.vhosts["web.example.com"];
    assert!(
        web.tls.is_some() && web.tls_passthrough.is_none(),
        "{web:?}"
    );
    let on_web = route_parent_of(&dag, Kind::TlsRoute, "shop", "on-web");
    assert_eq!(on_web.conditions[0].reason, "HostConflict");
    assert!(
        on_web.conditions[0].message.contains("TLS terminated"),
        "{on_web:?}"
    );
}

#[test]
fn a_tls_listener_that_terminates_forwards_the_stream_inside_to_the_backends() {
    let listeners = "  - {name: tls, protocol: TLS, port: 443, tls: {mode: Terminate, certificateRefs: [{name: web-tls}]}}
  - {name: nocert, protocol: TLS, port: 8443, hostname: other.example.com, tls: {certificateRefs: [{name: missing}]}}
  - {name: http, protocol: HTTP, port: 80}
";
    let gw = gateway_with(listeners);
    let tls = tls_route("db", T0, &["db.example.com", "shop.example.com"], TO_DB);
    let http = route("shop", "web", &["shop.example.com"], TO_WEB);
    let mut snap = snapshot(&[CLASS, &gw, SERVICES, DATABASES, &http, &tls]);
    let secret = crate::synth::tls_secret("shop", "web-tls");
    snap.insert(AnyObject::Secret(Arc::new(secret)));
    let dag = build(&snap, &Options::default());

    let v = &dag.vhosts["db.example.com"];
    assert_eq!(
        v.tls.as_ref().map(|t| t.secret.as_str()),
        Some("shop/web-tls")
    );
    let proxied = v.tcp_proxy.as_ref().expect("the stream is forwarded");
    assert!(proxied[0].cluster.starts_with("shop/db/443"), "{proxied:?}");
    assert!(v.tls_passthrough.is_none() && v.routes.is_empty() && !v.serves_http());
    assert!(dag.secrets.contains_key("shop/web-tls"));
    let l = listener_status(&dag, "tls");
    assert_eq!(l.supported_kinds, ["TLSRoute"]);
    assert_eq!(l.attached_routes, 1);
    assert!(l.conditions[1].message.contains("TLS terminated"), "{l:?}");
    // A host with plain HTTP routes is not taken: they would no longer be served.
    let shop = &dag.vhosts["shop.example.com"];
    assert!(shop.tcp_proxy.is_none() && shop.tls.is_none(), "{shop:?}");
    let parent = route_parent_of(&dag, Kind::TlsRoute, "shop", "db");
    assert!(
        parent.conditions[0].message.contains("has HTTP routes"),
        "{parent:?}"
    );
    // Without its certificate the listener has nothing to terminate with.
    let l = listener_status(&dag, "nocert");
    assert_eq!(
        conds(&l.conditions)[2],
        "ResolvedRefs=false/InvalidCertificateRef"
    );
}

#[test]
fn an_https_listener_that_passes_through_is_not_accepted() {
    let gw =
        gateway_with("  - {name: https, protocol: HTTPS, port: 443, tls: {mode: Passthrough}}\n");
    let dag = dag_of(&[CLASS, &gw, DATABASES]);
    let l = listener_status(&dag, "https");
    assert_eq!(l.conditions[0].reason, "UnsupportedValue");
    assert!(l.conditions[0].message.contains("protocol TLS"), "{l:?}");
}

#[test]
fn a_route_without_a_valid_backend_passes_nothing_through() {
    let gw = gateway_with(PASSTHROUGH);
    let route = tls_route(
        "db",
        T0,
        &["db.example.com"],
        "  - backendRefs: [{name: gone, port: 443}]\n",
    );
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);
    assert!(dag.vhosts.is_empty(), "{:?}", dag.vhosts);
    let parent = route_parent_of(&dag, Kind::TlsRoute, "shop", "db");
    assert_eq!(
        conds(&parent.conditions),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
}

#[test]
fn an_http_listener_serves_plain_routes_beside_the_passthrough_of_the_same_host() {
    let listeners = format!("{PASSTHROUGH}  - {{name: http, protocol: HTTP, port: 80}}\n");
    let gw = gateway_with(&listeners);
    let tls = tls_route("db", T0, &["shop.example.com"], TO_DB);
    let http = route("shop", "web", &["shop.example.com"], TO_WEB);
    let dag = dag_of(&[CLASS, &gw, SERVICES, DATABASES, &tls, &http]);
    let v = &dag.vhosts["shop.example.com"];
    assert_eq!(passed_to(&dag, "shop.example.com").len(), 1);
    assert_eq!(forwards_to(&v.routes[0]), ["shop/web/80*1"]);
    assert!(v.serves_http());
}

/// TLSRouteModeMixed: TLS listeners of both modes on one port. One route on both listeners
/// has each of its hosts served in the mode of the listener whose hostname it meets.
#[test]
fn tls_listeners_of_both_modes_on_one_port_serve_each_host_in_its_listeners_mode() {
    let listeners = "  - {name: pass, protocol: TLS, port: 443, hostname: pass.example.com, tls: {mode: Passthrough}}
  - {name: term, protocol: TLS, port: 443, hostname: term.example.com, tls: {mode: Terminate, certificateRefs: [{name: web-tls}]}}
";
    let gw = gateway_with(listeners);
    let hosts = ["pass.example.com", "term.example.com"];
    let route = tls_route("db", T0, &hosts, TO_DB);
    let mut snap = snapshot(&[CLASS, &gw, DATABASES, &route]);
    let secret = crate::synth::tls_secret("shop", "web-tls");
    snap.insert(AnyObject::Secret(Arc::new(secret)));
    let dag = build(&snap, &Options::default());

    assert!(passed_to(&dag, "pass.example.com")[0].starts_with("shop/db/443"));
    assert!(dag.vhosts["pass.example.com"].tls.is_none());
    let term = &dag.vhosts["term.example.com"];
    assert_eq!(
        term.tls.as_ref().map(|t| t.secret.as_str()),
        Some("shop/web-tls")
    );
    assert!(
        term.tls_passthrough.is_none() && term.tcp_proxy.is_some(),
        "{term:?}"
    );
    for name in ["pass", "term"] {
        assert_eq!(listener_status(&dag, name).attached_routes, 1, "{name}");
    }
    let parent = route_parent_of(&dag, Kind::TlsRoute, "shop", "db");
    assert_eq!(
        conds(&parent.conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
}
