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
mod attachment;
mod backend_filters;
mod backend_tls;
mod backends;
mod cors;
mod filters;
mod frontend_tls;
mod grpc;
mod https;
mod isolation;
mod listeners;
mod listenerset;
mod matches;
mod mirror;
mod namespaces;
mod tcproute;
mod timeouts;
mod tlsroute;
