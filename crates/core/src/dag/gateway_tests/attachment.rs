//! Which route gets what: hosts another object owns, the oldest route's matches, parents
//! naming no listener, and routes using what sluice does not route yet.

use super::*;

#[test]
fn what_sluice_does_not_route_yet_refuses_the_route_naming_the_field() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Limit, name: slow}}]\n    backendRefs: [{name: web, port: 80}]\n  - backendRefs: [{name: web, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: b}]}}, {type: RequestMirror, requestMirror: {backendRef: {name: api, port: 8080}}}]}]\n  - sessionPersistence: {type: Cookie, sessionName: s}\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert!(
        dag.vhosts.is_empty(),
        "no rule of a refused route is served"
    );
    let p = route_parent(&dag, "shop", "store");
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/UnsupportedValue");
    let m = &p.conditions[0].message;
    assert!(
        m.contains("spec.rules[0].filters[0].type: sluice applies RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite and CORS filters; remove this one"),
        "{m}"
    );
    assert!(
        m.contains("spec.rules[1].backendRefs[0].filters[1].type: sluice applies RequestHeaderModifier and ResponseHeaderModifier filters on a backendRef; move this one to the rule's filters"),
        "{m}"
    );
    assert!(!m.contains("backendRefs[0].filters[0]"), "{m}");
    assert!(
        m.contains("spec.rules[2].sessionPersistence: sluice does not keep sessions"),
        "{m}"
    );
    let gw = status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.gateway.as_ref().unwrap().listeners[0].attached_routes, 0);
}

#[test]
fn a_host_owned_by_an_ingressroute_is_not_taken_by_a_route() {
    let ir = "apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: shop}
spec:
  virtualhost: {fqdn: shop.example.com}
  routes: [{match: /, services: [{name: web, port: 80}]}]
";
    let r = route("shop", "store", &["shop.example.com"], TO_WEB);
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, ir, &r]);
    let v = &dag.vhosts["shop.example.com"];
    assert!(
        v.routes
            .iter()
            .all(|r| r.source.kind == Kind::IngressRouteV1beta1)
    );
    let p = route_parent(&dag, "shop", "store");
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/HostConflict");
    assert!(
        p.conditions[0].message.contains("IngressRoute"),
        "{:?}",
        p.conditions[0]
    );
}

#[test]
fn the_oldest_route_keeps_a_match_two_routes_define() {
    let dag = old_and_new(TO_WEB, "  - backendRefs: [{name: api, port: 8080}]\n");
    let routes = &dag.vhosts["shop.example.com"].routes;
    assert_eq!(routes.len(), 1);
    assert_eq!(
        routes[0].source,
        ObjectRef::new(Kind::HttpRoute, "shop", "old")
    );
    let p = route_parent(&dag, "shop", "new");
    assert!(
        p.conditions[0]
            .message
            .contains("already defined by HTTPRoute shop/old"),
        "{:?}",
        p.conditions[0]
    );
    assert_eq!(
        status(&dag, Kind::HttpRoute, "shop", "new").state,
        State::Invalid
    );
}

#[test]
fn a_parent_naming_no_listener_of_the_gateway_says_so() {
    let r = route("shop", "store", &[], TO_WEB).replace(
        "{name: edge, namespace: shop}",
        "{name: edge, namespace: shop, sectionName: https}",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let p = route_parent(&dag, "shop", "store");
    assert_eq!(p.section_name.as_deref(), Some("https"));
    assert_eq!(conds(&p.conditions)[0], "Accepted=false/NoMatchingParent");
}
