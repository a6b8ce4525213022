//! A rule's backends: those that do not resolve (a 500 and the reason), and the protocol a
//! Service port's `appProtocol` asks for.

use super::*;

#[test]
fn unresolved_backends_answer_500_and_say_why() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /gone}}]\n    backendRefs: [{name: gone, port: 80}]\n  - matches: [{path: {value: /pay}}]\n    backendRefs: [{name: billing, namespace: money, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let routes = &dag.vhosts["shop.example.com"].routes;
    assert_eq!(routes.len(), 2);
    for r in routes {
        assert!(forwards_to(r)[0].starts_with("500: "), "{r:?}");
    }
    assert_parent_condition(
        &dag,
        ("shop", "store"),
        1,
        "ResolvedRefs=false/BackendNotFound",
        &[
            "spec.rules[0].backendRefs[0]: Service \"shop/gone\" not found",
            "spec.rules[1].backendRefs[0]: Service \"money/billing\" is in another namespace and no ReferenceGrant",
        ],
    );
    assert_eq!(
        status(&dag, Kind::HttpRoute, "shop", "store").state,
        State::Invalid
    );

    // A ReferenceGrant in the Service's namespace lets the route use it.
    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: shop-routes, namespace: money}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}]
  to: [{group: \"\", kind: Service}]
";
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r, grant]);
    let pay = dag.vhosts["shop.example.com"]
        .routes
        .iter()
        .find(|r| format!("{:?}", r.path).contains("/pay"))
        .unwrap();
    assert_eq!(forwards_to(pay).len(), 1);
    assert!(!forwards_to(pay)[0].starts_with("50"), "{pay:?}");

    // A rule with no backendRefs answers 500 too; a GRPCRoute's rule with no valid backend
    // answers 503, which Envoy sends a gRPC client as UNAVAILABLE.
    let none = route(
        "shop",
        "none",
        &["none.example.com"],
        "  - matches: [{path: {value: /}}]\n",
    );
    let grpc = "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: cart, namespace: shop}
spec:
  parentRefs: [{name: edge}]
  hostnames: [grpc.example.com]
  rules:
  - backendRefs: [{name: gone, port: 8080}]
";
    let dag = dag_of(&[
        CLASS,
        &gateway("sluice", None, "Same"),
        SERVICES,
        &none,
        grpc,
    ]);
    let answer = |host: &str| forwards_to(&dag.vhosts[host].routes[0]);
    assert_eq!(
        answer("none.example.com"),
        ["500: spec.rules[0] has no backendRefs"]
    );
    assert!(
        answer("grpc.example.com")[0].starts_with("503: "),
        "{:?}",
        answer("grpc.example.com")
    );

    // Some backends invalid: their weight goes to a cluster no backend has, which answers 500
    // (HTTPRoute) or 503 (GRPCRoute).
    let some = route(
        "shop",
        "some",
        &["some.example.com"],
        "  - backendRefs: [{name: web, port: 80, weight: 3}, {name: gone, port: 80}, {name: gone2, port: 80, weight: 2}]\n",
    );
    let grpc = grpc.replace(
        "[{name: gone, port: 8080}]",
        "[{name: api, port: 8080}, {name: gone, port: 8080}]",
    );
    let dag = dag_of(&[
        CLASS,
        &gateway("sluice", None, "Same"),
        SERVICES,
        &some,
        &grpc,
    ]);
    let answer = |host: &str| forwards_to(&dag.vhosts[host].routes[0]);
    let some = answer("some.example.com");
    assert_eq!(some.len(), 2, "{some:?}");
    assert!(some[0].ends_with("*3"), "{some:?}");
    assert_eq!(some[1], format!("{INVALID_BACKEND_CLUSTER}*3"));
    assert_eq!(
        answer("grpc.example.com")[1],
        format!("{UNAVAILABLE_BACKEND_CLUSTER}*1")
    );
    assert!(!dag.clusters.contains_key(INVALID_BACKEND_CLUSTER));
}

#[test]
fn a_service_port_of_app_protocol_h2c_is_spoken_to_in_cleartext_http2() {
    let services = "apiVersion: v1
kind: Service
metadata: {name: rpc, namespace: shop}
spec: {ports: [{port: 80, appProtocol: kubernetes.io/h2c}, {port: 81}]}
";
    let rules = "  - matches: [{path: {value: /h2c}}]\n    backendRefs: [{name: rpc, port: 80}]\n  - backendRefs: [{name: rpc, port: 81}]\n";
    let r = route("shop", "store", &["shop.example.com"], rules);
    let gw = gateway("sluice", None, "Same");
    let dag = dag_of(&[CLASS, &gw, services, &r]);
    assert_eq!(shop_protocol(&dag, "/h2c"), UpstreamProtocol::H2c);
    assert_eq!(shop_protocol(&dag, "/"), UpstreamProtocol::Http);
}

#[test]
fn websockets_go_to_a_port_of_app_protocol_ws_and_a_port_that_wants_tls_is_refused() {
    let services = "apiVersion: v1
kind: Service
metadata: {name: chat, namespace: shop}
spec: {ports: [{port: 80, appProtocol: kubernetes.io/ws}, {port: 443, appProtocol: kubernetes.io/wss}]}
";
    let rules = "  - matches: [{path: {value: /tls}}]\n    backendRefs: [{name: chat, port: 443}]\n  - backendRefs: [{name: chat, port: 80}]\n";
    let r = route("shop", "store", &["shop.example.com"], rules);
    let gw = gateway("sluice", None, "Same");
    let dag = dag_of(&[CLASS, &gw, services, &r]);
    // kubernetes.io/ws is HTTP/1.1, over which the upgrade goes through (every route of sluice's
    // allows WebSockets).
    assert_eq!(shop_protocol(&dag, "/"), UpstreamProtocol::Http);
    // kubernetes.io/wss would need TLS to the backend: its share of the requests fails, and the
    // route says why.
    let tls = forwards_to(shop_route(&dag, "/tls"));
    assert!(tls[0].starts_with("500: "), "{tls:?}");
    assert_parent_condition(
        &dag,
        ("shop", "store"),
        1,
        "ResolvedRefs=false/UnsupportedProtocol",
        &[
            "spec.rules[0].backendRefs[0]: port 443 of Service \"shop/chat\" has appProtocol kubernetes.io/wss",
        ],
    );
}
