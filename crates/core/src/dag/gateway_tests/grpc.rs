//! GRPCRoutes: service and method matches, h2c backends; named rules of both route kinds.

use super::*;

#[test]
fn grpc_routes_match_services_and_methods_and_reach_h2c_backends() {
    let grpc = &grpc_route(
        "  - matches: [{method: {service: shop.Cart, method: Add}}]
    backendRefs: [{name: api, port: 8080}]
  - matches: [{method: {service: shop.Cart}, headers: [{name: X-Tenant, value: a}]}]
    backendRefs: [{name: web, port: 80}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, grpc]);
    let routes = &dag.vhosts["grpc.example.com"].routes;
    let got: Vec<String> = routes
        .iter()
        .map(|r| format!("{:?} {}", r.path, r.headers.len()))
        .collect();
    assert_eq!(
        got,
        ["Exact(\"/shop.Cart/Add\") 0", "Prefix(\"/shop.Cart\") 1"]
    );
    let RouteAction::Forward(cs) = &routes[0].action else {
        panic!("{:?}", routes[0]);
    };
    assert_eq!(dag.clusters[&cs[0].cluster].protocol, UpstreamProtocol::H2c);
    assert_eq!(
        conds(&route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    let gw = status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.gateway.as_ref().unwrap().listeners[0].attached_routes, 1);

    // A listener that takes HTTPRoutes only does not take it.
    let http_only = gateway("sluice", None, "Same").replace(
        "allowedRoutes: {namespaces: {from: Same}}",
        "allowedRoutes: {namespaces: {from: Same}, kinds: [{kind: HTTPRoute}]}",
    );
    let dag = dag_of(&[CLASS, &http_only, SERVICES, grpc]);
    assert!(dag.vhosts.is_empty());
    let p = route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart");
    assert_eq!(
        conds(&p.conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    assert!(
        p.conditions[0].message.contains("takes GRPCRoutes"),
        "{:?}",
        p.conditions[0]
    );
    let g = status(&dag, Kind::Gateway, "shop", "edge")
        .gateway
        .clone()
        .unwrap();
    assert_eq!(g.listeners[0].supported_kinds, ["HTTPRoute"]);
    // A method without its service: that method of every service, the whole path.
    let no_service = grpc.replace("{service: shop.Cart, method: Add}", "{method: Add}");
    let dag = dag_of(&[
        CLASS,
        &gateway("sluice", None, "Same"),
        SERVICES,
        &no_service,
    ]);
    let p = route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart");
    assert_eq!(conds(&p.conditions)[0], "Accepted=true/Accepted");
    let any_service = &dag.vhosts["grpc.example.com"].routes[0];
    assert_eq!(
        format!("{:?}", any_service.path),
        "Regex(\"/(?:[^/]+)/(?:Add)\")"
    );
    for (path, takes) in [
        ("/shop.Cart/Add", true),
        ("/other.Svc/Add", true),
        ("/shop.Cart/AddMore", false),
        ("/Add", false),
        ("/a/b/Add", false),
    ] {
        assert_eq!(any_service.path.matches(path), takes, "{path}");
    }
    // Neither: refused naming the field.
    let neither = grpc.replace("{service: shop.Cart, method: Add}", "{}");
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &neither]);
    let p = route_parent_of(&dag, Kind::GrpcRoute, "shop", "cart");
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/UnsupportedValue");
    assert!(
        p.conditions[0]
            .message
            .contains("spec.rules[0].matches[0].method: must name a service, a method, or both"),
        "{:?}",
        p.conditions[0]
    );
}

/// HTTPRouteNamedRouteRule and GRPCRouteNamedRouteRule: named rules are served as any other;
/// two rules of one name (the apiserver's CRD and the webhook refuse it) refuse the route.
#[test]
fn named_rules_are_served_and_a_name_used_twice_refuses_the_route() {
    let named = "  - name: api\n    matches: [{path: {value: /api}}]\n    backendRefs: [{name: api, port: 8080}]\n  - name: web\n    backendRefs: [{name: web, port: 80}]\n";
    let grpc = "  - name: health\n    matches: [{method: {service: grpc.health.v1.Health}}]\n    backendRefs: [{name: api, port: 8080}]\n";
    let dag = dag_of(&[
        CLASS,
        &gateway("sluice", None, "Same"),
        SERVICES,
        &route("shop", "store", &["shop.example.com"], named),
        &grpc_route(grpc),
    ]);
    assert_eq!(forwards_to(shop_route(&dag, "/api")), ["shop/api/8080*1"]);
    assert_eq!(forwards_to(shop_route(&dag, "/")), ["shop/web/80*1"]);
    let accepted =
        |kind, name| conds(&route_parent_of(&dag, kind, "shop", name).conditions)[0].clone();
    assert_eq!(accepted(Kind::HttpRoute, "store"), "Accepted=true/Accepted");
    assert_eq!(accepted(Kind::GrpcRoute, "cart"), "Accepted=true/Accepted");

    let twice = named.replace("name: web", "name: api");
    let r = route("shop", "store", &["shop.example.com"], &twice);
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert!(
        dag.vhosts.is_empty(),
        "no rule of a refused route is served"
    );
    let p = route_parent(&dag, "shop", "store");
    let m = &p.conditions[0].message;
    assert!(
        m.contains("spec.rules[1].name: \"api\" is already the name of spec.rules[0]; rule names must be unique within a route"),
        "{m}"
    );
}
