//! TCPRoutes on the `TCP` listeners of sluice's Gateways: Envoy listens on the listener's port and
//! forwards each connection to the route's backends.

use super::*;

const DATABASES: &str = "apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {ports: [{port: 5432}]}
---
apiVersion: v1
kind: Service
metadata: {name: db-replica, namespace: shop}
spec: {ports: [{port: 5432}]}
";

/// A Gateway `shop/<name>` of sluice's class, created at `created`, with a `listeners` block.
fn tcp_gateway(name: &str, created: &str, listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: shop, generation: 1, creationTimestamp: {created:?}}}
spec:
  gatewayClassName: sluice
  listeners:
{listeners}"
    )
}

/// A TCPRoute `shop/<name>`, created at `created`, on `parents` with a `rules` block.
fn tcp_route(name: &str, created: &str, parents: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: {name}, namespace: shop, generation: 4, creationTimestamp: {created:?}}}
spec:
  parentRefs: {parents}
  rules:
{rules}"
    )
}

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";
const PG_LISTENER: &str = "  - {name: pg, protocol: TCP, port: 5432}\n";
const TO_DB: &str = "  - backendRefs: [{name: db, port: 5432}]\n";

fn listener_of(dag: &Dag, gateway: &str, listener: &str) -> ListenerStatus {
    let s = status(dag, Kind::Gateway, "shop", gateway);
    let g = s
        .gateway
        .as_ref()
        .expect("a Gateway of sluice's has a status");
    let l = g.listeners.iter().find(|l| l.name == listener);
    l.unwrap_or_else(|| panic!("no listener {listener}: {g:?}"))
        .clone()
}

fn tcp_forwards(dag: &Dag, port: u16) -> Vec<String> {
    let l = dag.tcp_listeners.get(&port);
    let l = l.unwrap_or_else(|| panic!("no TCP listener on {port}: {:?}", dag.tcp_listeners));
    (l.clusters.iter())
        .map(|c| format!("{}*{}", c.cluster, c.weight))
        .collect()
}

#[test]
fn a_tcp_listener_forwards_its_port_to_the_routes_backends() {
    let gw = tcp_gateway("edge", T0, PG_LISTENER);
    let route = tcp_route("pg", T0, "[{name: edge}]", TO_DB);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);

    let forwards = tcp_forwards(&dag, 5432);
    assert_eq!(forwards.len(), 1, "{forwards:?}");
    assert!(forwards[0].starts_with("shop/db/5432"), "{forwards:?}");
    let l = &dag.tcp_listeners[&5432];
    assert_eq!(l.route, ObjectRef::new(Kind::TcpRoute, "shop", "pg"));
    assert!(dag.clusters.contains_key(&*l.clusters[0].cluster));
    assert_eq!(
        dag.clusters[&*l.clusters[0].cluster].protocol,
        UpstreamProtocol::Tcp
    );
    // No virtual host: a TCP stream has no host to route by.
    assert!(
        dag.vhosts.is_empty(),
        "{:?}",
        dag.vhosts.keys().collect::<Vec<_>>()
    );

    let listener = listener_of(&dag, "edge", "pg");
    assert_eq!(listener.supported_kinds, ["TCPRoute"]);
    assert_eq!(listener.attached_routes, 1);
    assert_eq!(
        conds(&listener.conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "pg");
    assert_eq!(
        conds(&parent.conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    assert_eq!(
        status(&dag, Kind::TcpRoute, "shop", "pg").state,
        State::Valid
    );
}

#[test]
fn weights_split_the_connections_and_a_missing_backends_share_is_closed() {
    let gw = tcp_gateway("edge", T0, PG_LISTENER);
    let rules = "  - backendRefs: [{name: db, port: 5432, weight: 3}, {name: db-replica, port: 5432, weight: 1}, {name: gone, port: 5432, weight: 2}]\n";
    let route = tcp_route("pg", T0, "[{name: edge}]", rules);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);

    let forwards = tcp_forwards(&dag, 5432);
    assert_eq!(forwards.len(), 3, "{forwards:?}");
    assert!(forwards[0].starts_with("shop/db/5432") && forwards[0].ends_with("*3"));
    assert!(forwards[1].starts_with("shop/db-replica/5432") && forwards[1].ends_with("*1"));
    assert_eq!(forwards[2], format!("{UNAVAILABLE_BACKEND_CLUSTER}*2"));
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "pg");
    assert_eq!(
        conds(&parent.conditions),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
    assert!(
        parent.conditions[1]
            .message
            .contains("spec.rules[0].backendRefs[2]")
    );
}

#[test]
fn a_route_without_a_valid_backend_opens_no_port() {
    let gw = tcp_gateway("edge", T0, PG_LISTENER);
    let rules = "  - backendRefs: [{name: gone, port: 5432}]\n";
    let route = tcp_route("pg", T0, "[{name: edge}]", rules);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);
    assert!(dag.tcp_listeners.is_empty(), "{:?}", dag.tcp_listeners);
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "pg");
    assert_eq!(
        conds(&parent.conditions),
        [
            "Accepted=true/Accepted",
            "ResolvedRefs=false/BackendNotFound"
        ]
    );
    assert_eq!(
        status(&dag, Kind::TcpRoute, "shop", "pg").state,
        State::Invalid
    );
}

#[test]
fn the_oldest_route_keeps_a_listener_two_routes_name() {
    let gw = tcp_gateway("edge", T0, PG_LISTENER);
    let older = tcp_route("pg", T0, "[{name: edge}]", TO_DB);
    let newer = tcp_route(
        "a-replica",
        T1,
        "[{name: edge}]",
        "  - backendRefs: [{name: db-replica, port: 5432}]\n",
    );
    let dag = dag_of(&[CLASS, &gw, DATABASES, &newer, &older]);

    assert!(tcp_forwards(&dag, 5432)[0].starts_with("shop/db/5432"));
    // Both attached and counted; connections go to the older route's backends only.
    assert_eq!(listener_of(&dag, "edge", "pg").attached_routes, 2);
    assert_eq!(tcp_forwards(&dag, 5432).len(), 1);
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "a-replica");
    assert_eq!(conds(&parent.conditions)[0], "Accepted=true/Accepted");
    let message = &parent.conditions[0].message;
    assert!(
        message.contains("listener \"pg\" forwards to TCPRoute shop/pg"),
        "{message}"
    );
    assert!(message.contains("sectionName"), "{message}");
    // The oldest route is untouched.
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "pg");
    assert_eq!(parent.conditions[0].reason, "Accepted");
}

#[test]
fn the_oldest_gateway_keeps_a_port_two_gateways_listen_on() {
    let older = tcp_gateway("edge", T0, PG_LISTENER);
    let newer = tcp_gateway("another", T1, PG_LISTENER);
    let route = tcp_route("pg", T0, "[{name: edge}, {name: another}]", TO_DB);
    let dag = dag_of(&[CLASS, &newer, &older, DATABASES, &route]);

    assert_eq!(tcp_forwards(&dag, 5432).len(), 1);
    assert_eq!(
        conds(&listener_of(&dag, "another", "pg").conditions),
        [
            "Accepted=false/PortUnavailable",
            "Programmed=false/Invalid",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
    let message = &listener_of(&dag, "another", "pg").conditions[0].message;
    assert!(
        message.contains("port 5432 for listener \"pg\" of Gateway shop/edge"),
        "{message}"
    );
    let gw = status(&dag, Kind::Gateway, "shop", "another");
    let g = gw.gateway.as_ref().unwrap();
    // Its one listener is not accepted: neither is the Gateway.
    assert_eq!(conds(&g.conditions)[0], "Accepted=false/ListenersNotValid");
    // The route is attached through the older Gateway and has nowhere to go on the other.
    let s = status(&dag, Kind::TcpRoute, "shop", "pg");
    let parents = &s.gateway.as_ref().unwrap().parents;
    assert_eq!(parents[0].conditions[0].reason, "Accepted");
    assert_eq!(parents[1].conditions[0].reason, "NoMatchingParent");
}

#[test]
fn a_tcp_listener_cannot_take_the_port_of_envoys_own_listeners() {
    let gw = tcp_gateway("edge", T0, "  - {name: pg, protocol: TCP, port: 8443}\n");
    let route = tcp_route("pg", T0, "[{name: edge}]", TO_DB);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);
    assert!(dag.tcp_listeners.is_empty());
    let l = listener_of(&dag, "edge", "pg");
    assert_eq!(l.conditions[0].reason, "PortUnavailable");
    assert!(
        l.conditions[0].message.contains("spec.listeners[0].port"),
        "{l:?}"
    );

    // With other ports for Envoy's listeners, 8443 is free.
    let options = Options {
        reserved_ports: vec![10080, 10443],
        ..Options::default()
    };
    let dag = build(&snapshot(&[CLASS, &gw, DATABASES, &route]), &options);
    assert_eq!(tcp_forwards(&dag, 8443).len(), 1);
}

#[test]
fn a_route_of_several_rules_is_refused_naming_the_field() {
    let gw = tcp_gateway("edge", T0, PG_LISTENER);
    let rules = format!("{TO_DB}  - backendRefs: [{{name: db-replica, port: 5432}}]\n");
    let route = tcp_route("pg", T0, "[{name: edge}]", &rules);
    let dag = dag_of(&[CLASS, &gw, DATABASES, &route]);
    assert!(dag.tcp_listeners.is_empty());
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "pg");
    assert_eq!(parent.conditions[0].reason, "UnsupportedValue");
    assert!(
        parent.conditions[0].message.contains("spec.rules"),
        "{:?}",
        parent.conditions
    );
    assert_eq!(listener_of(&dag, "edge", "pg").attached_routes, 0);
}

#[test]
fn tcp_and_http_routes_attach_to_their_own_listeners_only() {
    let listeners = format!("{PG_LISTENER}  - {{name: web, protocol: HTTP, port: 80}}\n");
    let gw = tcp_gateway("edge", T0, &listeners);
    let http = route("shop", "store", &["shop.example.com"], TO_WEB);
    let on_web = tcp_route("on-web", T0, "[{name: edge, sectionName: web}]", TO_DB);
    let http_on_pg = http.replace(
        "parentRefs: [{name: edge, namespace: shop}]",
        "parentRefs: [{name: edge, namespace: shop, sectionName: pg}]",
    );
    let http_on_pg = http_on_pg.replace("name: store", "name: on-pg");
    let dag = dag_of(&[CLASS, &gw, SERVICES, DATABASES, &http, &on_web, &http_on_pg]);

    assert!(dag.tcp_listeners.is_empty());
    assert!(dag.vhosts.contains_key("shop.example.com"));
    let parent = route_parent_of(&dag, Kind::TcpRoute, "shop", "on-web");
    assert_eq!(parent.conditions[0].reason, "NotAllowedByListeners");
    assert!(parent.conditions[0].message.contains("protocol TCP"));
    let parent = route_parent(&dag, "shop", "on-pg");
    assert_eq!(parent.conditions[0].reason, "NotAllowedByListeners");
    assert_eq!(listener_of(&dag, "edge", "web").attached_routes, 1);
    assert_eq!(
        listener_of(&dag, "edge", "web").supported_kinds,
        ["HTTPRoute", "GRPCRoute"]
    );
    assert_eq!(listener_of(&dag, "edge", "pg").attached_routes, 0);
}

#[test]
fn a_tcp_listener_asked_for_other_route_kinds_resolves_none() {
    let listener =
        "  - {name: pg, protocol: TCP, port: 5432, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}\n";
    let gw = tcp_gateway("edge", T0, listener);
    let dag = dag_of(&[CLASS, &gw]);
    let l = listener_of(&dag, "edge", "pg");
    assert_eq!(
        conds(&l.conditions)[2],
        "ResolvedRefs=false/InvalidRouteKinds"
    );
    assert!(l.conditions[2].message.contains("TCPRoute"), "{l:?}");
}
