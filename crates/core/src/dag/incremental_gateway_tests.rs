//! The Gateway API objects in incremental builds: built together, as one routing object, and
//! only when a change can reach them.

use super::*;

/// Gateway API objects that meet the golden cases' objects: Gateways in the golden namespace
/// `tls` (two versions of one, with other listener hostnames), routes to the golden Services
/// on the golden hosts `foo.com`, `secure.example.com` and the catch-all, across namespaces
/// with and without a ReferenceGrant, a mirror to a Service no other backend names, a
/// GRPCRoute, a class and Gateway of another controller, and a version of the Gateway whose
/// listener takes the routes of namespaces by label, with Namespaces whose labels change;
/// a Gateway with TCP listeners (two versions: another port) and TCPRoutes to the golden
/// Services (two versions of one, and a second route on the same listener); a Gateway with a TLS
/// passthrough listener and TLSRoutes (two versions of one) on golden hosts (one a TLS host) and
/// hosts of their own.
const GATEWAY_POOL: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: tls, generation: 1}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
  - {name: https, protocol: HTTPS, port: 443, hostname: '*.example.com', tls: {certificateRefs: [{name: secure-tls}]}, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: tls, generation: 2}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, hostname: foo.com, allowedRoutes: {namespaces: {from: All}}}
  - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: other-tls}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: tls, generation: 3}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {routes: edge}}}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {routes: edge}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {routes: none}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {routes: edge}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: tls}
spec:
  gatewayClassName: other
  listeners:
  - {name: http, protocol: HTTP, port: 80}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: tls, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  parentRefs: [{name: edge}]
  hostnames: [secure.example.com, gw.example.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api, namespace: team-a, creationTimestamp: '2024-01-02T00:00:00Z'}
spec:
  parentRefs: [{name: edge, namespace: tls}]
  hostnames: [foo.com, gw.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api, namespace: team-a, creationTimestamp: '2024-01-02T00:00:00Z', generation: 2}
spec:
  parentRefs: [{name: edge, namespace: tls, sectionName: http}]
  hostnames: [FOO.com]
  rules:
  - matches: [{path: {type: Exact, value: /}}]
    backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: catch-all, namespace: team-b, creationTimestamp: '2024-01-03T00:00:00Z'}
spec:
  parentRefs: [{name: edge, namespace: tls, sectionName: http}]
  rules:
  - backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /from-gateway}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross, namespace: team-b, creationTimestamp: '2024-01-04T00:00:00Z'}
spec:
  parentRefs: [{name: edge, namespace: tls}]
  hostnames: [cross.example.com]
  rules:
  - backendRefs: [{name: api, namespace: team-a, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirrored, namespace: paths, creationTimestamp: '2024-01-04T00:00:00Z'}
spec:
  parentRefs: [{name: edge, namespace: tls}]
  hostnames: [mirrored.example.com]
  rules:
  - filters: [{type: RequestMirror, requestMirror: {backendRef: {name: impl, port: 80}, percent: 50}}]
    backendRefs: [{name: prefix, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: team-b-routes, namespace: team-a}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-b}]
  to: [{group: \"\", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: team-a, creationTimestamp: '2024-01-05T00:00:00Z'}
spec:
  parentRefs: [{name: edge, namespace: tls}]
  hostnames: [grpc.example.com]
  rules:
  - matches: [{method: {service: shop.Cart}}]
    backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tcp, namespace: tls, generation: 1}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: pg, protocol: TCP, port: 5432}
  - {name: redis, protocol: TCP, port: 6379, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: tcp, namespace: tls, generation: 2}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: pg, protocol: TCP, port: 15432}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: pg, namespace: tls, creationTimestamp: '2024-01-06T00:00:00Z'}
spec:
  parentRefs: [{name: tcp, sectionName: pg}]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: pg, namespace: tls, creationTimestamp: '2024-01-06T00:00:00Z', generation: 2}
spec:
  parentRefs: [{name: tcp}]
  rules:
  - backendRefs: [{name: web, port: 80, weight: 2}, {name: gone, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: cache, namespace: team-a, creationTimestamp: '2024-01-07T00:00:00Z'}
spec:
  parentRefs: [{name: tcp, namespace: tls}]
  rules:
  - backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: pass, namespace: tls}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: term, protocol: TLS, port: 8443, hostname: term.example.com, tls: {certificateRefs: [{name: secure-tls}]}}
  - {name: tls, protocol: TLS, port: 443, tls: {mode: Passthrough}, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: vault, namespace: tls, creationTimestamp: '2024-01-08T00:00:00Z'}
spec:
  parentRefs: [{name: pass}]
  hostnames: [vault.example.com, foo.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: vault, namespace: tls, creationTimestamp: '2024-01-08T00:00:00Z', generation: 2}
spec:
  parentRefs: [{name: pass}]
  hostnames: [vault.example.com, secure.example.com, '*.vault.example.com', term.example.com]
  rules:
  - backendRefs: [{name: web, port: 80, weight: 1}, {name: api, port: 80, weight: 4}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: ledger, namespace: team-a, creationTimestamp: '2024-01-09T00:00:00Z'}
spec:
  parentRefs: [{name: pass, namespace: tls}]
  hostnames: [vault.example.com, ledger.example.com]
  rules:
  - backendRefs: [{name: api, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: elsewhere, namespace: tls}
spec:
  parentRefs: [{name: theirs}]
  hostnames: [foo.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
";

pub(crate) fn gateway_pool() -> Vec<AnyObject> {
    let docs = parse_documents("gateway-pool.yaml", GATEWAY_POOL).expect("the pool parses");
    (docs.into_iter())
        .map(|(_, d)| match d {
            Document::Object(o) => o,
            other => panic!("unexpected document {other:?}"),
        })
        .collect()
}

#[test]
fn incremental_builds_with_gateway_api_objects_equal_full_builds() {
    let mut partial = 0;
    for seed in 1..=8u64 {
        let (p, f) = run_with(
            0x51ce_0f6a_7e3a ^ seed,
            200,
            Options::default(),
            gateway_pool(),
        );
        assert!(p > f, "seed {seed}: {p} partial builds, {f} full");
        partial += p;
    }
    assert!(partial > 600, "{partial} partial builds");
}

/// The golden objects and the Gateway API pool's first version of each object.
fn with_gateway_api() -> Snapshot {
    let mut snap = Snapshot::from_objects(pool());
    for o in gateway_pool() {
        if snap_has(&snap, &o) {
            continue;
        }
        snap.insert(o);
    }
    snap
}

pub(super) fn snap_has(s: &Snapshot, o: &AnyObject) -> bool {
    let key = o.key();
    match o.kind() {
        Kind::GatewayClass => s.gateway_classes.contains_key(&key),
        Kind::Gateway => s.gateways.contains_key(&key),
        Kind::HttpRoute => s.http_routes.contains_key(&key),
        Kind::GrpcRoute => s.grpc_routes.contains_key(&key),
        Kind::TcpRoute => s.tcp_routes.contains_key(&key),
        Kind::TlsRoute => s.tls_routes.contains_key(&key),
        Kind::ReferenceGrant => s.reference_grants.contains_key(&key),
        Kind::Namespace => s.namespaces.contains_key(&key),
        _ => false,
    }
}

/// The snapshot with Ingress `key`'s `generation` set (a change with no effect on routing).
fn touch_ingress(s: &Snapshot, key: &ObjKey, generation: i64) -> Snapshot {
    let mut next = s.clone();
    let mut ing = (**next.ingresses[key]).clone();
    ing.metadata.generation = Some(generation);
    next.ingresses
        .insert(key.clone(), Arc::new(Prepared::new(key, Arc::new(ing))));
    next
}

fn gateway_statuses(d: &Dag) -> Vec<(&ObjectRef, &ObjectStatus)> {
    (d.statuses.iter())
        .filter(|(o, _)| {
            matches!(
                o.kind,
                Kind::Gateway | Kind::HttpRoute | Kind::GrpcRoute | Kind::TcpRoute | Kind::TlsRoute
            )
        })
        .collect()
}

#[test]
fn a_change_away_from_the_gateway_api_hosts_leaves_the_gateway_api_objects_alone() {
    let options = Options::default();
    let with = with_gateway_api();
    let without = Snapshot::from_objects(pool());
    // An Ingress none of whose hosts a route of sluice's Gateways could be served on.
    let gateway_hosts = gateway_part::links(&with, &options.gateway_controller_name).unwrap();
    let mut ingress_hosts = Vec::new();
    let key = (with.ingresses.iter())
        .find(|(_, o)| {
            ingress_hosts.clear();
            ingress_links(o, &mut |l| {
                ingress_hosts.push(l.to_link(&ObjKey::new("", "")))
            });
            !ingress_hosts.is_empty() && ingress_hosts.iter().all(|l| !gateway_hosts.contains(l))
        })
        .map(|(k, _)| k.clone())
        .expect("an Ingress away from the Gateway API hosts");
    let mut rebuilt = Vec::new();
    for snap in [&without, &with] {
        let mut inc = Incremental::new(options.clone());
        let dag = inc.build_full(snap);
        let next = touch_ingress(snap, &key, 9);
        let (got, kind) = inc.build(Some((snap, &dag)), &next);
        assert_eq!(got, crate::dag::build(&next, &options));
        let BuildKind::Partial { objects } = kind else {
            panic!("{kind:?}");
        };
        rebuilt.push(objects);
    }
    assert_eq!(
        rebuilt[0], rebuilt[1],
        "the same objects are rebuilt with and without the Gateway API objects"
    );
}

#[test]
fn a_gateway_api_change_rebuilds_them_and_the_objects_sharing_their_hosts() {
    let options = Options::default();
    let snap = with_gateway_api();
    let mut inc = Incremental::new(options.clone());
    let dag = inc.build_full(&snap);
    assert!(
        !gateway_statuses(&dag).is_empty(),
        "the pool's routes have statuses"
    );
    // The route on foo.com, a golden Ingress's host, moved to another path.
    let mut next = snap.clone();
    let key = ObjKey::new("team-a", "api");
    let mut route = (**next.http_routes[&key]).clone();
    let rule = &mut route.spec.rules.as_mut().unwrap()[0];
    rule.matches.as_mut().unwrap()[0]
        .path
        .as_mut()
        .unwrap()
        .value = Some("/v2".into());
    let route = Prepared::new(&key, Arc::new(route));
    next.http_routes.insert(key, Arc::new(route));
    let (got, kind) = inc.build(Some((&snap, &dag)), &next);
    assert_eq!(got, crate::dag::build(&next, &options));
    let BuildKind::Partial { objects } = kind else {
        panic!("{kind:?}");
    };
    assert!(
        objects > 1,
        "the Ingresses on foo.com are rebuilt too: {objects}"
    );
    // Of the other routing objects, those sharing a host with a route: fewer than half.
    let others = objects - gateway_part::objects(&next);
    assert!(others < next.routing_objects() / 2, "{objects} rebuilt");

    // A Service only a route of another namespace names (through the ReferenceGrant).
    let mut after = next.clone();
    after.remove(
        Kind::ReferenceGrant,
        &ObjKey::new("team-a", "team-b-routes"),
    );
    let (gone, kind) = inc.build(Some((&next, &got)), &after);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(gone, crate::dag::build(&after, &options));
    let cross = ObjectRef::new(Kind::HttpRoute, "team-b", "cross");
    assert_ne!(gone.statuses[&cross], got.statuses[&cross]);

    // A Service only a route's mirror names: removed, the mirror goes and the route says why.
    let mut unmirrored = after.clone();
    unmirrored.remove(Kind::Service, &ObjKey::new("paths", "impl"));
    let (no_mirror, kind) = inc.build(Some((&after, &gone)), &unmirrored);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(no_mirror, crate::dag::build(&unmirrored, &options));
    let mirrored = ObjectRef::new(Kind::HttpRoute, "paths", "mirrored");
    assert_ne!(no_mirror.statuses[&mirrored], gone.statuses[&mirrored]);
    let (after, gone) = (unmirrored, no_mirror);

    // Every Gateway API object removed: their statuses go with them.
    let mut empty = after.clone();
    let mut every = Vec::new();
    gateway_part::each_object(&after, |o| every.push(o));
    for o in every {
        empty.remove(o.kind, &o.key);
    }
    let (none, kind) = inc.build(Some((&after, &gone)), &empty);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(none, crate::dag::build(&empty, &options));
    assert!(gateway_statuses(&none).is_empty());
}

#[test]
fn a_namespace_label_change_rebuilds_the_routes_a_selector_takes() {
    let options = Options::default();
    let pool = gateway_pool();
    let version = |kind: Kind, name: &str, nth: usize| {
        (pool.iter())
            .filter(|o| o.kind() == kind && o.key().name.as_ref() == name)
            .nth(nth)
            .cloned()
            .expect("in the pool")
    };
    let mut snap = with_gateway_api();
    snap.insert(version(Kind::Gateway, "edge", 2));
    snap.insert(version(Kind::Namespace, "team-b", 0));
    let mut inc = Incremental::new(options.clone());
    let dag = inc.build_full(&snap);
    let catch_all = ObjectRef::new(Kind::HttpRoute, "team-b", "catch-all");
    let attached = |d: &Dag| {
        let g = d.statuses[&catch_all].gateway.as_ref().expect("its status");
        g.parents[0].conditions[0].status
    };
    assert!(attached(&dag));
    // team-b labelled away from the selector: the route leaves the Gateway.
    let mut next = snap.clone();
    next.insert(version(Kind::Namespace, "team-b", 1));
    let (got, kind) = inc.build(Some((&snap, &dag)), &next);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(got, crate::dag::build(&next, &options));
    assert!(!attached(&got));
    // A Namespace whose labels did not change (its status did, say) rebuilds nothing.
    let same = next.clone();
    let (again, kind) = inc.build(Some((&next, &got)), &same);
    assert_eq!(again, got);
    assert_eq!(kind, BuildKind::Partial { objects: 0 }, "{kind:?}");
}

#[test]
fn a_tcproute_change_rebuilds_the_tcp_listeners_a_full_build_would() {
    let options = Options::default();
    let pool = gateway_pool();
    let version = |kind: Kind, ns: &str, name: &str, nth: usize| {
        (pool.iter())
            .filter(|o| o.kind() == kind && o.key() == ObjKey::new(ns, name))
            .nth(nth)
            .cloned()
            .expect("in the pool")
    };
    let snap = with_gateway_api();
    let mut inc = Incremental::new(options.clone());
    let dag = inc.build_full(&snap);
    let ports = |d: &Dag| d.tcp_listeners.keys().copied().collect::<Vec<_>>();
    assert_eq!(ports(&dag), [5432, 6379]);
    let pg = dag.tcp_listeners[&5432].clusters[0].cluster.clone();

    // The route moves to every listener of the Gateway, with a second backend that does not
    // resolve: being older, it takes 6379 from team-a/cache as well.
    let mut next = snap.clone();
    next.insert(version(Kind::TcpRoute, "tls", "pg", 1));
    let (got, kind) = inc.build(Some((&snap, &dag)), &next);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(got, crate::dag::build(&next, &options));
    assert_eq!(got.tcp_listeners[&5432].clusters.len(), 2);
    let pg_route = ObjectRef::new(Kind::TcpRoute, "tls", "pg");
    assert_eq!(got.tcp_listeners[&6379].route, pg_route);

    // The Gateway's other version: one listener, on another port; the cache route is left
    // without a listener, and the cluster only it used goes.
    let cache = dag.tcp_listeners[&6379].clusters[0].cluster.clone();
    let mut after = next.clone();
    after.insert(version(Kind::Gateway, "tls", "tcp", 1));
    let (moved, kind) = inc.build(Some((&next, &got)), &after);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(moved, crate::dag::build(&after, &options));
    assert_eq!(ports(&moved), [15432]);
    let used_elsewhere = moved
        .vhosts
        .values()
        .any(|v| crate::dag::builder::vhost_clusters(v).any(|c| *c == cache));
    assert_eq!(moved.clusters.contains_key(&*cache), used_elsewhere);

    // Every TCPRoute removed: no TCP listener, and their clusters go unless a host uses them.
    let mut none = after.clone();
    none.remove(Kind::TcpRoute, &ObjKey::new("tls", "pg"));
    none.remove(Kind::TcpRoute, &ObjKey::new("team-a", "cache"));
    let (empty, kind) = inc.build(Some((&after, &moved)), &none);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(empty, crate::dag::build(&none, &options));
    assert!(empty.tcp_listeners.is_empty());
    let used_by_hosts = empty
        .vhosts
        .values()
        .any(|v| crate::dag::builder::vhost_clusters(v).any(|c| *c == pg));
    assert_eq!(empty.clusters.contains_key(&*pg), used_by_hosts);
}

#[test]
fn a_tlsroute_change_rebuilds_the_hosts_it_passes_through_as_a_full_build_would() {
    let options = Options::default();
    let pool = gateway_pool();
    let vault = (pool.iter())
        .filter(|o| o.kind() == Kind::TlsRoute && o.key() == ObjKey::new("tls", "vault"))
        .nth(1)
        .cloned()
        .expect("in the pool");
    let snap = with_gateway_api();
    let mut inc = Incremental::new(options.clone());
    let dag = inc.build_full(&snap);
    let passed = |d: &Dag| {
        (d.vhosts.values())
            .filter(|v| v.tls_passthrough.is_some())
            .map(|v| v.host.clone())
            .collect::<Vec<_>>()
    };
    // The older route keeps vault.example.com; foo.com's Ingress routes stay beside it.
    assert_eq!(
        passed(&dag),
        ["foo.com", "ledger.example.com", "vault.example.com"]
    );
    assert!(!dag.vhosts["foo.com"].routes.is_empty());

    // Its other version: secure.example.com terminates TLS and is not taken; a wildcard is.
    let mut next = snap.clone();
    next.insert(vault);
    let (got, kind) = inc.build(Some((&snap, &dag)), &next);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(got, crate::dag::build(&next, &options));
    assert_eq!(
        passed(&got),
        [
            "*.vault.example.com",
            "ledger.example.com",
            "vault.example.com"
        ]
    );
    assert!(got.vhosts["secure.example.com"].tls.is_some());
    // term.example.com through the listener that terminates TLS.
    let term = &got.vhosts["term.example.com"];
    assert!(term.tls.is_some() && term.tcp_proxy.is_some(), "{term:?}");

    // Every TLSRoute removed: nothing passed through, foo.com as the Ingresses make it.
    let mut none = next.clone();
    none.remove(Kind::TlsRoute, &ObjKey::new("tls", "vault"));
    none.remove(Kind::TlsRoute, &ObjKey::new("team-a", "ledger"));
    let (empty, kind) = inc.build(Some((&next, &got)), &none);
    assert!(matches!(kind, BuildKind::Partial { .. }), "{kind:?}");
    assert_eq!(empty, crate::dag::build(&none, &options));
    assert!(passed(&empty).is_empty());
}
