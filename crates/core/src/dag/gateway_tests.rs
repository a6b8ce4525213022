//! Tests of the Gateway API processor: `dag::build` of whole snapshots, as sluice runs it.

use std::sync::Arc;

use super::gwroute::listener_route_hosts;
use super::*;
use crate::api::{Kind, ObjectRef};
use crate::manifest::{Document, parse_documents};
use crate::store::{AnyObject, Snapshot};

const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
";

const OTHER_CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other-controller}
";

const SERVICES: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec: {ports: [{port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: billing, namespace: money}
spec: {ports: [{port: 80}]}
";

/// A Gateway `shop/edge` of `class` with an HTTP listener `http` (hostname `listener_host`,
/// routes from `from`).
fn gateway(class: &str, listener_host: Option<&str>, from: &str) -> String {
    let host = listener_host.map_or(String::new(), |h| format!(", hostname: {h:?}"));
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop, generation: 3}}
spec:
  gatewayClassName: {class}
  listeners:
  - {{name: http, protocol: HTTP, port: 80{host}, allowedRoutes: {{namespaces: {{from: {from}}}}}}}
"
    )
}

/// A Gateway `shop/edge` of sluice's class with a `listeners` block.
fn gateway_with(listeners: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: shop, generation: 1}}
spec:
  gatewayClassName: sluice
  listeners:
{listeners}"
    )
}

/// A GRPCRoute `shop/cart` on Gateway `shop/edge` for `grpc.example.com` with a `rules` block.
fn grpc_route(rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: cart, namespace: shop}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [grpc.example.com]
  rules:
{rules}"
    )
}

/// An HTTPRoute `ns/name` on Gateway `shop/edge` with `hostnames` and a `rules` block.
fn route(ns: &str, name: &str, hostnames: &[&str], rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {ns}, generation: 2}}
spec:
  parentRefs: [{{name: edge, namespace: shop}}]
  hostnames: {hostnames:?}
  rules:
{rules}"
    )
}

const TO_WEB: &str = "  - backendRefs: [{name: web, port: 80}]\n";

fn snapshot(docs: &[&str]) -> Snapshot {
    let yaml = docs.join("---\n");
    let parsed = parse_documents("test.yaml", &yaml).expect("test input parses");
    Snapshot::from_objects(parsed.into_iter().map(|(_, d)| match d {
        Document::Object(o) => o,
        other => panic!("unexpected document {other:?}"),
    }))
}

fn dag_of(docs: &[&str]) -> Dag {
    build(&snapshot(docs), &Options::default())
}

fn status<'d>(dag: &'d Dag, kind: Kind, ns: &str, name: &str) -> &'d ObjectStatus {
    let obj = ObjectRef::new(kind, ns, name);
    dag.statuses
        .get(&obj)
        .unwrap_or_else(|| panic!("no status for {obj}"))
}

/// `type=status/reason` of each condition, in order.
fn conds(cs: &[GatewayCondition]) -> Vec<String> {
    cs.iter()
        .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
        .collect()
}

fn route_parent(dag: &Dag, ns: &str, name: &str) -> ParentStatus {
    route_parent_of(dag, Kind::HttpRoute, ns, name)
}

fn route_parent_of(dag: &Dag, kind: Kind, ns: &str, name: &str) -> ParentStatus {
    let s = status(dag, kind, ns, name);
    let g = s
        .gateway
        .as_ref()
        .expect("an HTTPRoute of sluice's has a Gateway API status");
    assert_eq!(g.parents.len(), 1, "{g:?}");
    g.parents[0].clone()
}

fn forwards_to(route: &Route) -> Vec<String> {
    match &route.action {
        RouteAction::Forward(cs) => cs
            .iter()
            .map(|c| format!("{}*{}", c.cluster, c.weight))
            .collect(),
        RouteAction::Unavailable(why) => vec![format!("503: {why}")],
        RouteAction::Invalid(why) => vec![format!("500: {why}")],
        RouteAction::Redirect(r) => vec![format!("redirect {r:?}")],
    }
}

#[test]
fn a_route_on_sluices_gateway_is_served_and_every_status_says_so() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {type: PathPrefix, value: /api}}, {path: {type: Exact, value: /health}, method: GET, headers: [{name: X-Canary, value: \"yes\"}]}]\n    backendRefs: [{name: api, port: 8080}]\n  - backendRefs: [{name: web, port: 80, weight: 3}, {name: api, port: 8080}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);

    let v = &dag.vhosts["shop.example.com"];
    let got: Vec<(String, Vec<String>, Vec<String>, bool)> = v
        .routes
        .iter()
        .map(|r| {
            (
                format!("{:?}", r.path),
                r.headers
                    .iter()
                    .map(|h| format!("{}={:?}", h.name, h.op))
                    .collect(),
                forwards_to(r),
                r.permit_insecure,
            )
        })
        .collect();
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].0.contains("Exact") && got[0].0.contains("/health"),
        "{got:#?}"
    );
    assert_eq!(
        got[0].1,
        [":method=Exact(\"GET\")", "x-canary=Exact(\"yes\")"],
        "{got:#?}"
    );
    assert!(got[1].0.contains("/api"), "{got:#?}");
    assert_eq!(got[2].2.len(), 2, "{got:#?}");
    assert!(
        got[2].2[0].ends_with("*3") || got[2].2[1].ends_with("*3"),
        "{got:#?}"
    );
    assert!(
        got.iter().all(|r| r.3),
        "routes of an HTTP listener are served over HTTP"
    );
    assert!(v.tls.is_none());

    let class = status(&dag, Kind::GatewayClass, "", "sluice");
    assert_eq!(class.state, State::Valid);
    assert_eq!(
        conds(&class.gateway.as_ref().unwrap().conditions),
        ["Accepted=true/Accepted"]
    );
    let gw = status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.state, State::Valid);
    assert_eq!(gw.generation, Some(3));
    let g = gw.gateway.as_ref().unwrap();
    assert_eq!(
        conds(&g.conditions),
        ["Accepted=true/Accepted", "Programmed=true/Programmed"]
    );
    assert_eq!(g.listeners.len(), 1);
    assert_eq!(g.listeners[0].attached_routes, 1);
    assert_eq!(g.listeners[0].supported_kinds, ["HTTPRoute", "GRPCRoute"]);
    assert_eq!(
        conds(&g.listeners[0].conditions),
        [
            "Accepted=true/Accepted",
            "Programmed=true/Programmed",
            "ResolvedRefs=true/ResolvedRefs"
        ]
    );
    let rs = status(&dag, Kind::HttpRoute, "shop", "store");
    assert_eq!(rs.state, State::Valid);
    assert_eq!(rs.generation, Some(2));
    let p = route_parent(&dag, "shop", "store");
    assert_eq!((p.namespace.as_str(), p.name.as_str()), ("shop", "edge"));
    assert_eq!(p.controller_name, DEFAULT_GATEWAY_CONTROLLER_NAME);
    assert_eq!(
        conds(&p.conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
}

#[test]
fn another_controllers_objects_are_left_alone() {
    let r = route("shop", "store", &["shop.example.com"], TO_WEB);
    let dag = dag_of(&[
        CLASS,
        OTHER_CLASS,
        &gateway("other", None, "Same"),
        SERVICES,
        &r,
    ]);
    assert!(
        dag.vhosts.is_empty(),
        "{:?}",
        dag.vhosts.keys().collect::<Vec<_>>()
    );
    for (kind, ns, name) in [
        (Kind::GatewayClass, "", "other"),
        (Kind::Gateway, "shop", "edge"),
        (Kind::HttpRoute, "shop", "store"),
    ] {
        let s = status(&dag, kind, ns, name);
        assert_eq!(s.state, State::Ignored, "{kind:?} {name}");
        assert!(
            s.gateway.is_none(),
            "{kind:?} {name}: sluice writes nothing on it"
        );
    }
}

#[test]
fn a_listener_takes_routes_of_its_own_namespace_unless_it_allows_all() {
    let r = route(
        "money",
        "pay",
        &["pay.example.com"],
        "  - backendRefs: [{name: billing, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    assert!(!dag.vhosts.contains_key("pay.example.com"));
    let p = route_parent(&dag, "money", "pay");
    assert_eq!(
        conds(&p.conditions)[0],
        "Accepted=false/NotAllowedByListeners"
    );
    assert!(
        p.conditions[0].message.contains("from: Same"),
        "{:?}",
        p.conditions[0].message
    );
    assert_eq!(
        status(&dag, Kind::HttpRoute, "money", "pay").state,
        State::Invalid
    );
    let gw = status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(gw.gateway.as_ref().unwrap().listeners[0].attached_routes, 0);

    let dag = dag_of(&[CLASS, &gateway("sluice", None, "All"), SERVICES, &r]);
    assert_eq!(
        forwards_to(&dag.vhosts["pay.example.com"].routes[0]).len(),
        1
    );
    assert_eq!(
        conds(&route_parent(&dag, "money", "pay").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
}

#[test]
fn hostnames_are_where_the_listeners_and_the_routes_meet() {
    let l = |h: &str| Some(h.to_string());
    let hosts = |listener: Option<String>, route: &[&str]| {
        let route: Vec<String> = route.iter().map(|h| h.to_string()).collect();
        listener_route_hosts(listener.as_deref(), &route)
    };
    assert_eq!(hosts(None, &[]), ["*"]);
    assert_eq!(hosts(None, &["A.example.com"]), ["a.example.com"]);
    assert_eq!(hosts(l("*.example.com"), &[]), ["*.example.com"]);
    assert_eq!(
        hosts(
            l("*.example.com"),
            &["a.example.com", "example.com", "other.org"]
        ),
        ["a.example.com"]
    );
    assert_eq!(
        hosts(l("a.example.com"), &["*.example.com"]),
        ["a.example.com"]
    );
    assert_eq!(
        hosts(l("a.example.com"), &["b.example.com"]),
        Vec::<String>::new()
    );
    // Two wildcards meet at the narrower one; wildcards of different suffixes do not meet.
    assert_eq!(
        hosts(l("*.example.com"), &["*.a.example.com", "*.example.org"]),
        ["*.a.example.com"]
    );
    assert_eq!(
        hosts(l("*.a.example.com"), &["*.example.com"]),
        ["*.a.example.com"]
    );
    assert_eq!(
        hosts(l("*.a.example.com"), &["*.b.example.com"]),
        Vec::<String>::new()
    );

    let r = route("shop", "store", &["other.org"], TO_WEB);
    let dag = dag_of(&[
        CLASS,
        &gateway("sluice", Some("*.example.com"), "Same"),
        SERVICES,
        &r,
    ]);
    assert!(dag.vhosts.is_empty());
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions)[0],
        "Accepted=false/NoMatchingListenerHostname"
    );
}

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
fn https_listeners_terminate_tls_with_their_secret() {
    let gw = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: plain, protocol: HTTP, port: 80, hostname: both.example.com}
  - {name: both, protocol: HTTPS, port: 443, hostname: both.example.com, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: nocert, protocol: HTTPS, port: 443, hostname: none.example.com, tls: {certificateRefs: [{name: missing}]}}
  - {name: udp, protocol: UDP, port: 9000}
";
    let secure = route("shop", "secure", &["secure.example.com"], TO_WEB);
    let both = route("shop", "both", &["both.example.com"], TO_WEB);
    let mut snap = snapshot(&[CLASS, gw, SERVICES, &secure, &both]);
    snap.insert(AnyObject::Secret(Arc::new(crate::synth::tls_secret(
        "shop", "shop-tls",
    ))));
    let dag = build(&snap, &Options::default());

    let v = &dag.vhosts["secure.example.com"];
    assert_eq!(
        v.tls.as_ref().map(|t| t.secret.as_str()),
        Some("shop/shop-tls")
    );
    assert!(
        !v.routes[0].permit_insecure,
        "an HTTPS-only host redirects plain HTTP"
    );
    let v = &dag.vhosts["both.example.com"];
    assert!(v.tls.is_some());
    assert!(
        v.routes[0].permit_insecure,
        "a host of an HTTP listener too is served over HTTP"
    );

    let g = status(&dag, Kind::Gateway, "shop", "edge")
        .gateway
        .clone()
        .unwrap();
    assert_eq!(
        conds(&g.conditions),
        [
            "Accepted=true/ListenersNotValid",
            "Programmed=true/Programmed"
        ]
    );
    let by_name = |n: &str| g.listeners.iter().find(|l| l.name == n).unwrap().clone();
    assert_eq!(by_name("https").attached_routes, 1);
    assert_eq!(by_name("both").attached_routes, 1);
    assert_eq!(by_name("plain").attached_routes, 1);
    let nocert = by_name("nocert");
    assert_eq!(
        conds(&nocert.conditions)[2],
        "ResolvedRefs=false/InvalidCertificateRef"
    );
    assert!(
        nocert.conditions[2]
            .message
            .contains("TLS Secret \"shop/missing\" not found")
    );
    let udp = by_name("udp");
    assert_eq!(
        conds(&udp.conditions)[0],
        "Accepted=false/UnsupportedProtocol"
    );
    assert!(
        udp.conditions[0]
            .message
            .contains("sluice serves HTTP, HTTPS, TLS and TCP listeners, not \"UDP\""),
        "{udp:?}"
    );
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

#[test]
fn incremental_builds_equal_full_builds_with_gateway_api_objects() {
    let base = [CLASS, &gateway("sluice", None, "All"), SERVICES];
    let r1 = route("shop", "store", &["shop.example.com"], TO_WEB);
    let r2 = route(
        "money",
        "pay",
        &["shop.example.com"],
        "  - matches: [{path: {value: /pay}}]\n    backendRefs: [{name: billing, port: 80}]\n",
    );
    let ingress = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: legacy, namespace: shop}
spec:
  ingressClassName: sluice
  rules: [{host: shop.example.com, http: {paths: [{path: /legacy, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";
    let steps: Vec<Vec<&str>> = vec![
        base.to_vec(),
        [&base[..], &[r1.as_str()]].concat(),
        [&base[..], &[r1.as_str(), ingress]].concat(),
        [&base[..], &[r1.as_str(), ingress, r2.as_str()]].concat(),
        [&base[..], &[ingress, r2.as_str()]].concat(),
    ];
    let options = Options::default();
    let mut inc = incremental::Incremental::new(options.clone());
    let mut prev: Option<(Snapshot, Dag)> = None;
    for docs in steps {
        let next = snapshot(&docs);
        let (dag, _) = inc.build(prev.as_ref().map(|(s, d)| (s, d)), &next);
        assert_eq!(dag, build(&next, &options));
        prev = Some((next, dag));
    }
    let (_, dag) = prev.unwrap();
    let routes = &dag.vhosts["shop.example.com"].routes;
    let sources: Vec<Kind> = routes.iter().map(|r| r.source.kind).collect();
    assert!(
        sources.contains(&Kind::Ingress) && sources.contains(&Kind::HttpRoute),
        "{sources:?}"
    );
}

#[test]
fn header_filters_and_redirects_become_part_of_the_routes() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /old}}]\n    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, port: 8443, path: {type: ReplaceFullPath, replaceFullPath: /new}}}]\n    backendRefs: [{name: gone, port: 80}]\n  - filters:\n    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-A, value: a}], add: [{name: x-b, value: b}], remove: [X-C]}}\n    - {type: ResponseHeaderModifier, responseHeaderModifier: {remove: [server]}}\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let routes = &dag.vhosts["shop.example.com"].routes;
    assert_eq!(routes.len(), 2);
    let RouteAction::Redirect(redirect) = &routes[0].action else {
        panic!("{:?}", routes[0]);
    };
    assert_eq!(
        **redirect,
        Redirect {
            scheme: Some("https".into()),
            hostname: None,
            port: Some(8443),
            path: Some("/new".into()),
            prefix: None,
            status: 302,
        }
    );
    let edits = routes[1].headers_edit().expect("header edits");
    assert_eq!(edits.request.set, [("x-a".to_string(), "a".to_string())]);
    assert_eq!(edits.request.add, [("x-b".to_string(), "b".to_string())]);
    assert_eq!(edits.request.remove, ["x-c"]);
    assert_eq!(edits.response.remove, ["server"]);
    // A redirect's backends take no requests, so a missing one is no problem.
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );
    assert!(crate::dag::table::backends(&routes[0])[0].starts_with("302 to https://"));
}

#[test]
fn an_https_listener_serves_named_hosts_only() {
    let gw = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: shop-tls}]}}
";
    let anywhere = route("shop", "anywhere", &[], TO_WEB);
    let named = route("shop", "named", &["a.example.com"], TO_WEB);
    let mut snap = snapshot(&[CLASS, gw, SERVICES, &anywhere, &named]);
    snap.insert(AnyObject::Secret(Arc::new(crate::synth::tls_secret(
        "shop", "shop-tls",
    ))));
    let dag = build(&snap, &Options::default());
    assert!(!dag.vhosts.contains_key("*"));
    assert!(dag.vhosts["a.example.com"].tls.is_some());
    let p = route_parent(&dag, "shop", "anywhere");
    assert_eq!(
        conds(&p.conditions)[0],
        "Accepted=false/NoMatchingListenerHostname"
    );
    assert!(
        p.conditions[0].message.contains("serves named hosts only"),
        "{:?}",
        p.conditions[0]
    );
}

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

#[test]
fn a_gateway_sluice_refuses_programs_no_listener_and_takes_no_route() {
    // HTTP and HTTPS on one port: refused by the webhook; one that got in is not accepted.
    let gw = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: shop}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 443}
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: shop-tls}]}}
";
    let r = route("shop", "store", &["shop.example.com"], TO_WEB);
    let dag = dag_of(&[CLASS, gw, SERVICES, &r]);
    assert!(dag.vhosts.is_empty());
    let s = status(&dag, Kind::Gateway, "shop", "edge");
    assert_eq!(s.state, State::Invalid);
    let g = s.gateway.as_ref().unwrap();
    assert_eq!(
        conds(&g.conditions),
        ["Accepted=false/Invalid", "Programmed=false/Invalid"]
    );
    assert!(
        g.conditions[0].message.contains("conflicts with"),
        "{:?}",
        g.conditions[0]
    );
    for l in &g.listeners {
        let programmed = l
            .conditions
            .iter()
            .find(|c| c.type_ == "Programmed")
            .unwrap();
        assert!(!programmed.status, "{l:?}");
        assert_eq!(l.attached_routes, 0);
    }
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions)[0],
        "Accepted=false/NoMatchingParent"
    );
}

#[test]
fn a_redirect_replaces_the_matched_prefix_of_a_path_prefix_match_only() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - matches: [{path: {value: /old}}]\n    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 301, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]\n  - matches: [{path: {value: /root}}]\n    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch}}}]\n  - backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let redirect_of = |path: &str| match &shop_route(&dag, path).action {
        RouteAction::Redirect(redirect) => (**redirect).clone(),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(
        redirect_of("/old"),
        Redirect {
            scheme: None,
            hostname: None,
            port: None,
            path: None,
            prefix: Some("/new".into()),
            status: 301,
        }
    );
    // No value: the prefix goes, leaving the rest of the path.
    assert_eq!(redirect_of("/root").prefix.as_deref(), Some("/"));
    assert_eq!(
        conds(&route_parent(&dag, "shop", "store").conditions),
        ["Accepted=true/Accepted", "ResolvedRefs=true/ResolvedRefs"]
    );

    refused_beside_an_exact_match(&r, "/old", "spec.rules[0].filters[0].requestRedirect");
}

#[test]
fn a_url_rewrite_sets_the_host_and_the_whole_path_or_the_matched_prefix() {
    let r = route(
        "shop",
        "store",
        &["shop.example.com"],
        "  - filters: [{type: URLRewrite, urlRewrite: {hostname: internal.example.com, path: {type: ReplaceFullPath, replaceFullPath: /v2}}}]\n    backendRefs: [{name: web, port: 80}]\n  - matches: [{path: {value: /p}}]\n    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /q}}}]\n    backendRefs: [{name: web, port: 80}]\n",
    );
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &r]);
    let rewrite_of = |path: &str| shop_route(&dag, path).rewrite().cloned();
    assert_eq!(
        rewrite_of("/"),
        Some(Rewrite {
            hostname: Some("internal.example.com".into()),
            path: Some("/v2".into()),
            prefix: None,
        })
    );
    assert_eq!(
        rewrite_of("/p"),
        Some(Rewrite {
            prefix: Some("/q".into()),
            ..Rewrite::default()
        })
    );

    refused_beside_an_exact_match(&r, "/p", "spec.rules[1].filters[0].urlRewrite");
}

/// The model of HTTPRoutes `shop/old` (created in 2024) and `shop/new` (2025) on
/// `shop.example.com`, with rules `old_rules` and `new_rules`.
fn old_and_new(old_rules: &str, new_rules: &str) -> Dag {
    let created_in = |year: u16, name: &str, rules: &str| {
        route("shop", name, &["shop.example.com"], rules).replace(
            "generation: 2}",
            &format!("generation: 2, creationTimestamp: \"{year}-01-01T00:00:00Z\"}}"),
        )
    };
    let old = created_in(2024, "old", old_rules);
    let new = created_in(2025, "new", new_rules);
    dag_of(&[
        CLASS,
        &gateway("sluice", None, "Same"),
        SERVICES,
        &new,
        &old,
    ])
}

/// The route of `shop.example.com` whose path match is `path`.
fn shop_route<'d>(dag: &'d Dag, path: &str) -> &'d Route {
    let routes = &dag.vhosts["shop.example.com"].routes;
    (routes.iter().find(|r| r.path.value() == path))
        .unwrap_or_else(|| panic!("a route of {path} in {routes:?}"))
}

/// The protocol of the first cluster the route of `path` on `shop.example.com` forwards to.
fn shop_protocol(dag: &Dag, path: &str) -> UpstreamProtocol {
    let route = shop_route(dag, path);
    let RouteAction::Forward(cs) = &route.action else {
        panic!("{route:?}");
    };
    dag.clusters[&*cs[0].cluster].protocol
}

/// Asserts condition `at` of HTTPRoute `ns/name`'s parent: `type=status/reason`, and a message
/// holding each of `says`.
fn assert_parent_condition(
    dag: &Dag,
    (ns, name): (&str, &str),
    at: usize,
    is: &str,
    says: &[&str],
) {
    let p = route_parent(dag, ns, name);
    assert_eq!(conds(&p.conditions)[at], is);
    let message = &p.conditions[at].message;
    for s in says {
        assert!(message.contains(s), "{message}");
    }
}

/// Asserts that route `r` (HTTPRoute shop/store), with an Exact match added beside its
/// PathPrefix match of `prefix`, is refused for the ReplacePrefixMatch of the filter at
/// `filter`: beside an Exact match there is no matched prefix to replace.
fn refused_beside_an_exact_match(r: &str, prefix: &str, filter: &str) {
    let exact = r.replace(
        &format!("[{{path: {{value: {prefix}}}}}]"),
        &format!("[{{path: {{value: {prefix}}}}}, {{path: {{type: Exact, value: /e}}}}]"),
    );
    assert_ne!(exact, r, "the route has a match of {prefix}");
    let dag = dag_of(&[CLASS, &gateway("sluice", None, "Same"), SERVICES, &exact]);
    assert!(dag.vhosts.is_empty());
    let p = route_parent(&dag, "shop", "store");
    let want = format!(
        "{filter}.path.type: ReplacePrefixMatch replaces the prefix a PathPrefix match took"
    );
    assert!(
        p.conditions[0].message.contains(&want),
        "{:?}",
        p.conditions[0]
    );
}

mod addresses;
mod backend_filters;
mod backend_tls;
mod backends;
mod cors;
mod frontend_tls;
mod isolation;
mod listeners;
mod listenerset;
mod matches;
mod mirror;
mod namespaces;
mod tcproute;
mod timeouts;
mod tlsroute;

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
