//! HTTPRoute `RequestMirror` filters: a copy of the requests a rule forwards, to a Service of
//! the route's namespace or one a ReferenceGrant allows, of every request or a share of them.

use super::*;

#[test]
fn a_rules_mirrors_copy_its_requests_to_their_backends_and_a_missing_one_is_reported() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /all}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: api, port: 8080}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /some}}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: api, port: 8080}, percent: 25}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}, fraction: {numerator: 1, denominator: 8}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: gone, port: 80}}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: billing, namespace: money, port: 80}}}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /moved}}]
    filters:
    - {type: RequestRedirect, requestRedirect: {hostname: elsewhere.example.com}}
    - {type: RequestMirror, requestMirror: {backendRef: {name: api, port: 8080}}}
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let mirrors = |path: &str| -> Vec<(String, u32)> {
        (shop_route(&dag, path).mirrors().iter())
            .map(|m| (m.cluster.to_string(), m.per_million))
            .collect()
    };
    assert_eq!(mirrors("/all"), [("shop/api/8080".to_string(), 1_000_000)]);
    // 25%, and 1/8: the valid mirrors, in the filters' order.
    assert_eq!(
        mirrors("/some"),
        [
            ("shop/api/8080".to_string(), 250_000),
            ("shop/web/80".to_string(), 125_000)
        ]
    );
    // A redirect has no request to copy.
    assert!(mirrors("/moved").is_empty());
    // A mirror's Service is a cluster of the model, as the rules' backends are.
    assert!(dag.clusters.contains_key("shop/api/8080"));

    // The route is served; the mirrors that do not resolve are named on ResolvedRefs.
    let p = route_parent(&dag, "shop", "store");
    let c = conds(&p.conditions);
    assert_eq!(c[0], "Accepted=true/Accepted");
    assert_eq!(c[1], "ResolvedRefs=false/BackendNotFound");
    let m = &p.conditions[1].message;
    assert!(
        m.contains(
            "spec.rules[1].filters[2].requestMirror.backendRef: Service \"shop/gone\" not found"
        ),
        "{m}"
    );
    assert!(
        m.contains("spec.rules[1].filters[3].requestMirror.backendRef: Service \"money/billing\" is in another namespace and no ReferenceGrant there lets HTTPRoutes of \"shop\" use it"),
        "{m}"
    );
}

#[test]
fn a_grpc_routes_mirror_copies_its_calls_over_cleartext_http2() {
    let grpc = grpc_route(
        "  - matches: [{method: {service: shop.Cart}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: api, port: 8080}, fraction: {numerator: 1, denominator: 4}}}]
    backendRefs: [{name: web, port: 80}]
",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &grpc]);
    let route = &dag.vhosts["grpc.example.com"].routes[0];
    let mirrors: Vec<(String, u32)> = (route.mirrors().iter())
        .map(|m| (m.cluster.to_string(), m.per_million))
        .collect();
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    assert_eq!(mirrors[0].1, 250_000);
    // The mirror's cluster speaks HTTP/2 without TLS, as the route's backends do.
    let cluster = &dag.clusters[mirrors[0].0.as_str()];
    assert_eq!(cluster.protocol, UpstreamProtocol::H2c);
    assert!(mirrors[0].0.starts_with("shop/api/8080"), "{mirrors:?}");
}
