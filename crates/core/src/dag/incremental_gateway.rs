//! The Gateway API objects in the incremental build: one routing object of the link graph.
//!
//! Gateway API objects depend on each other more closely than the other routing kinds: a route's
//! hosts are where its hostnames meet its Gateways' listeners', a Gateway's status counts the
//! routes attached to each of its listeners, and routes on one host keep or lose a match by age.
//! So they are built together, as one routing object of the graph ([`gateway_api`]), whose links
//! are every host a route of one of sluice's Gateways could be served on (the build serves a
//! subset of them: a host another object owns, an HTTPS listener's catch-all, a route refused).
//!
//! A change to a GatewayClass, Gateway, ListenerSet, HTTPRoute, GRPCRoute, TCPRoute, TLSRoute,
//! ReferenceGrant, BackendTLSPolicy or ConfigMap (a policy's CA certificates), to a Namespace's
//! labels (a listener's `allowedRoutes.namespaces.selector` reads them), or to a Service or
//! TLS Secret one of them names (in any namespace: backends and certificates may be in another
//! one, through a ReferenceGrant), rebuilds all of them, and through their hosts the
//! IngressRoutes, Routes and Ingresses that share a host with one; a change to one of those
//! rebuilds them when it shares a host with them. A change elsewhere leaves them alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hashbrown::HashMap;

use super::{Link, Named, Names};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::dag::gwroute::{RouteShape, listener_route_hosts};
use crate::store::{Snapshot, same_objects};

/// The Gateway API objects of a snapshot as one routing object of the link graph: a reference of
/// kind GatewayClass with an empty name, which no Kubernetes object has.
pub(super) fn gateway_api() -> ObjectRef {
    ObjectRef::new(Kind::GatewayClass, "", "")
}

/// Whether `obj` is [`gateway_api`].
pub(super) fn is_gateway_api(obj: &ObjectRef) -> bool {
    obj.kind == Kind::GatewayClass && obj.key.name.is_empty()
}

/// How many GatewayClasses, Gateways and routes the snapshot holds.
pub(super) fn objects(s: &Snapshot) -> usize {
    s.gateway_classes.len()
        + s.gateways.len()
        + s.listener_sets.len()
        + s.http_routes.len()
        + s.grpc_routes.len()
        + s.tcp_routes.len()
        + s.tls_routes.len()
}

/// Whether a Gateway API object the build reads differs between the snapshots.
pub(super) fn changed(prev: &Snapshot, next: &Snapshot) -> bool {
    !(same_objects(&prev.gateway_classes, &next.gateway_classes)
        && same_objects(&prev.gateways, &next.gateways)
        && same_objects(&prev.listener_sets, &next.listener_sets)
        && same_objects(&prev.http_routes, &next.http_routes)
        && same_objects(&prev.grpc_routes, &next.grpc_routes)
        && same_objects(&prev.tcp_routes, &next.tcp_routes)
        && same_objects(&prev.tls_routes, &next.tls_routes)
        && same_objects(&prev.reference_grants, &next.reference_grants)
        && same_objects(&prev.namespaces, &next.namespaces)
        && same_objects(&prev.backend_tls_policies, &next.backend_tls_policies)
        && same_objects(&prev.config_maps, &next.config_maps))
}

/// Calls `f` with every GatewayClass, Gateway, ListenerSet and route of the snapshot (what has a
/// status).
pub(super) fn each_object(s: &Snapshot, mut f: impl FnMut(ObjectRef)) {
    let refs =
        |kind: Kind, keys: &mut dyn Iterator<Item = &ObjKey>, f: &mut dyn FnMut(ObjectRef)| {
            keys.for_each(|key| {
                f(ObjectRef {
                    kind,
                    key: key.clone(),
                })
            })
        };
    refs(Kind::GatewayClass, &mut s.gateway_classes.keys(), &mut f);
    refs(Kind::Gateway, &mut s.gateways.keys(), &mut f);
    refs(Kind::ListenerSet, &mut s.listener_sets.keys(), &mut f);
    refs(Kind::HttpRoute, &mut s.http_routes.keys(), &mut f);
    refs(Kind::GrpcRoute, &mut s.grpc_routes.keys(), &mut f);
    refs(Kind::TcpRoute, &mut s.tcp_routes.keys(), &mut f);
    refs(Kind::TlsRoute, &mut s.tls_routes.keys(), &mut f);
    refs(
        Kind::BackendTlsPolicy,
        &mut s.backend_tls_policies.keys(),
        &mut f,
    );
}

/// Copies every Gateway API object the build reads from `from` into `to`.
pub(super) fn copy(from: &Snapshot, to: &mut Snapshot) {
    to.gateway_classes = from.gateway_classes.clone();
    to.gateways = from.gateways.clone();
    to.listener_sets = from.listener_sets.clone();
    to.http_routes = from.http_routes.clone();
    to.grpc_routes = from.grpc_routes.clone();
    to.tcp_routes = from.tcp_routes.clone();
    to.tls_routes = from.tls_routes.clone();
    to.reference_grants = from.reference_grants.clone();
    to.namespaces = from.namespaces.clone();
    to.backend_tls_policies = from.backend_tls_policies.clone();
}

/// The links of the Gateway API objects: every host a route attached to a Gateway of one of
/// `controller`'s classes could be served on, each once. None when the snapshot holds no
/// GatewayClass, Gateway or route.
pub(super) fn links(s: &Snapshot, controller: &str) -> Option<Vec<Link>> {
    if objects(s) == 0 {
        return None;
    }
    let classes: BTreeSet<&str> = (s.gateway_classes.iter())
        .filter(|(_, c)| c.spec.controller_name == controller)
        .map(|(k, _)| &*k.name)
        .collect();
    // The listeners' hostnames of each of those classes' Gateways (None: every host).
    let listeners: HashMap<&ObjKey, Vec<Option<String>>> = (s.gateways.iter())
        .filter(|(_, g)| classes.contains(g.spec.gateway_class_name.as_str()))
        .map(|(k, g)| {
            let hostnames = (g.spec.listeners.iter())
                .map(|l| listener_hostname(l.hostname.as_deref()))
                .collect();
            (k, hostnames)
        })
        .collect();
    // The listeners' hostnames of every ListenerSet naming one of those Gateways, whether or
    // not the Gateway takes it (the links are a superset of the hosts served).
    let set_listeners: HashMap<&ObjKey, Vec<Option<String>>> = (s.listener_sets.iter())
        .filter(|(k, ls)| {
            let p = &ls.spec.parent_ref;
            let ns = p.namespace.as_deref().unwrap_or(&k.namespace);
            listeners.contains_key(&ObjKey::new(ns, p.name.as_str()))
        })
        .map(|(k, ls)| {
            let hostnames = (ls.spec.listeners.iter())
                .map(|l| listener_hostname(l.hostname.as_deref()))
                .collect();
            (k, hostnames)
        })
        .collect();
    let mut hosts = BTreeSet::new();
    let listeners = (&listeners, &set_listeners);
    route_hosts(
        &mut hosts,
        listeners,
        s.http_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
    );
    route_hosts(
        &mut hosts,
        listeners,
        s.grpc_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
    );
    // TCPRoutes are served on ports, not hosts.
    route_hosts(
        &mut hosts,
        listeners,
        s.tls_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
    );
    Some(
        (hosts.into_iter())
            .map(|h| Link::Host(Arc::from(h)))
            .collect(),
    )
}

/// The listeners' hostnames (None: every host) of each Gateway and each ListenerSet naming one.
type ListenerHosts<'a, 's> = (
    &'a HashMap<&'s ObjKey, Vec<Option<String>>>,
    &'a HashMap<&'s ObjKey, Vec<Option<String>>>,
);

/// Adds to `hosts` every host one of `routes` could be served on through the listeners of its
/// parents (`listeners`: of Gateways, of ListenerSets).
fn route_hosts<'s>(
    hosts: &mut BTreeSet<String>,
    (gateways, sets): ListenerHosts<'_, '_>,
    routes: impl Iterator<Item = (&'s ObjKey, &'s RouteShape)>,
) {
    for (key, route) in routes {
        let head = route.head();
        for p in &head.parents {
            let parent = ObjKey::new(p.namespace.unwrap_or(&key.namespace), p.name);
            let of_parent = match p.kind {
                Some("ListenerSet") => sets.get(&parent),
                _ => gateways.get(&parent),
            };
            for l in of_parent.into_iter().flatten() {
                hosts.extend(listener_route_hosts(l.as_deref(), head.hostnames));
            }
        }
    }
}

/// Whether a Gateway or route of the snapshot names one of `named` (Services and TLS Secrets by
/// namespace): a backend, a mirror's backend, a listener's certificate.
pub(super) fn names_any(s: &Snapshot, named: &BTreeMap<Arc<str>, Names>) -> bool {
    let hit = |ns: &str, n: Named<'_>| named.get(ns).is_some_and(|names| names.has(n));
    gateways_name_any(s, &hit)
        || routes_name_any(
            &hit,
            s.http_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
        )
        || routes_name_any(
            &hit,
            s.grpc_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
        )
        || routes_name_any(
            &hit,
            s.tcp_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
        )
        || routes_name_any(
            &hit,
            s.tls_routes.iter().map(|(k, r)| (k, &r.ready().shape)),
        )
}

/// Whether a Gateway or ListenerSet of the snapshot names a Secret `hit` takes: a listener's
/// certificate, the client certificate presented to TLS backends.
fn gateways_name_any(s: &Snapshot, hit: &dyn Fn(&str, Named<'_>) -> bool) -> bool {
    let secret = |ns: &Option<String>, home: &ObjKey, name: &str| {
        hit(
            ns.as_deref().unwrap_or(&home.namespace),
            Named::Secret(name),
        )
    };
    for (key, g) in &s.gateways {
        // The client certificate presented to TLS backends.
        let client =
            (g.spec.tls.as_ref()).and_then(|t| t.backend.as_ref()?.client_certificate_ref.as_ref());
        if client.is_some_and(|c| secret(&c.namespace, key, &c.name)) {
            return true;
        }
        let mut certs = (g.spec.listeners.iter())
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten();
        if certs.any(|c| secret(&c.namespace, key, &c.name)) {
            return true;
        }
    }
    // ListenerSets' listeners' certificates.
    s.listener_sets.iter().any(|(key, ls)| {
        let mut certs = (ls.spec.listeners.iter())
            .filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref())
            .flatten();
        certs.any(|c| secret(&c.namespace, key, &c.name))
    })
}

/// Whether one of `routes` names a Service `hit` takes: a backend, a mirror's backend.
fn routes_name_any<'s>(
    hit: &dyn Fn(&str, Named<'_>) -> bool,
    mut routes: impl Iterator<Item = (&'s ObjKey, &'s RouteShape)>,
) -> bool {
    routes.any(|(key, r)| {
        (r.services().into_iter())
            .any(|(ns, name)| hit(ns.unwrap_or(&key.namespace), Named::Service(name)))
    })
}

/// A listener's hostname as the links compare it: lowercase, None for none or empty (every host).
fn listener_hostname(hostname: Option<&str>) -> Option<String> {
    hostname
        .filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
}
