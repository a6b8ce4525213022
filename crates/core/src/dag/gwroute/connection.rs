//! TCPRoutes and TLSRoutes: routes that forward connections, weighted, to the backends of their
//! one rule. They differ in the listeners that take them and in what a connection is chosen by:
//! a TCPRoute takes a `TCP` listener's port (Envoy listens on it and forwards every connection
//! to the oldest route's backends; a TCP stream carries no host to choose by), a TLSRoute the
//! hosts where its hostnames meet a `TLS` listener's, chosen by SNI, each either passed through
//! still encrypted (the backends terminate TLS) or terminated with the listener's certificate.

use std::collections::BTreeMap;

use super::super::Builder;
use super::super::gateway_acc::GatewayAcc;
use super::super::gateway_common::{
    GATEWAY_MIN_TLS, Listener, attached_to_gateway, cond, condition, refs_resolved,
};
use super::super::model::{Clusters, EntryKey, GatewayCondition, VhostTls};
use super::backends::connection_clusters;
use super::hosts::listener_route_hosts;
use super::shape::ParentIn;
use super::{RouteIn, Tally, record_status, settle_accepted, sluices_parents};
use crate::api::{ObjKey, ObjectRef};
use crate::store::Snapshot;

/// Which connections a route forwards, and what a TLSRoute needs to know of the routes before
/// it.
pub(in crate::dag) enum Connections<'p> {
    /// A TCPRoute: every connection to a TCP listener's port.
    Tcp,
    /// A TLSRoute: the connections whose SNI names one of its hosts. `passthrough` is each
    /// host's route so far (routes come oldest first, and the oldest keeps a host).
    Tls {
        passthrough: &'p mut BTreeMap<(Option<EntryKey>, String), ObjectRef>,
    },
}

/// Where a route forwards connections: a TCP listener's port, or a host of a TLS listener with
/// the TLS Secret of the listener that terminates TLS for it (None: passed through).
#[derive(PartialEq)]
enum Target {
    Port(Option<EntryKey>, u16),
    Host(Option<EntryKey>, String, Option<String>),
}

/// How the listeners one parent selects took the route.
#[derive(Default)]
struct ParentTook {
    /// TLS listeners with a host of the route.
    hosted: u32,
    /// TCP listeners that forward to an older route (each named).
    taken: Vec<String>,
}

/// One TCPRoute or TLSRoute (`r`): attaches it to the listeners of sluice's Gateways it names,
/// forwards the connections they take to its backends, and records its status. Routes come
/// oldest first, so the oldest keeps a TCP listener, or a TLS host, two routes name.
pub(in crate::dag) fn connection_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    r: RouteIn<'_>,
    mut mode: Connections<'_>,
) {
    let head = r.ready.shape.head();
    let obj = r.obj();
    let Some(parents) = sluices_parents(b, &obj, &head.parents, head.generation, gateways) else {
        return;
    };
    let refused = !r.ready.refused.is_empty();
    let mut targets: Vec<Target> = Vec::new();
    let mut statuses = Vec::new();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let at = (b.snapshot, *p, gw_key, &obj);
        let took = attach_parent(at, gw, &mode, head.hostnames, refused, &mut targets);
        let field = format!("spec.parentRefs[{i}]");
        statuses.push((*p, parent_accepted(&field, gw_key, &r, &mode, took)));
    }

    let mut resolved = refs_resolved();
    // Hosts another object owns (the route stays valid there, as an HTTPRoute does), and hosts
    // that cannot be passed through (a problem of the route).
    let mut host_conflicts: Vec<String> = Vec::new();
    let mut conflicts: Vec<String> = Vec::new();
    // Listeners are taken only by a route of one rule (see `refused`). Its backends are
    // resolved also where the route is attached nowhere (for ResolvedRefs).
    if let Some(rule) = r
        .ready
        .shape
        .rules()
        .into_iter()
        .next()
        .filter(|_| !refused)
    {
        let clusters = connection_clusters(b, snapshot, r.from(), &rule.backends, &mut resolved);
        for target in &targets {
            let out = (&mut host_conflicts, &mut conflicts);
            forward(b, &obj, &mut mode, target, clusters.as_ref(), out);
        }
    }
    let notes: Vec<&str> = (host_conflicts.iter().chain(&conflicts))
        .map(String::as_str)
        .collect();
    let all_taken = !targets.is_empty() && notes.len() == targets.len();
    settle_accepted(
        &mut statuses,
        all_taken.then(|| notes.join("; ")),
        "passed through",
        &notes,
    );
    let route_ns = &r.key.namespace;
    record_status(b, &obj, controller, route_ns, statuses, resolved, conflicts);
}

/// Where one parent attaches a route: the snapshot, the parentRef, its Gateway's key, and the
/// route.
type At<'a> = (&'a Snapshot, &'a ParentIn<'a>, &'a ObjKey, &'a ObjectRef);

/// The listeners of a parent (of Gateway `gw`) that take the route, counted on them, and where
/// each forwards its connections, added to `targets` (nowhere for a route `refused`).
fn attach_parent(
    (snapshot, p, gw_key, obj): At<'_>,
    gw: &mut GatewayAcc,
    mode: &Connections<'_>,
    hostnames: &[String],
    refused: bool,
    targets: &mut Vec<Target>,
) -> (Tally, ParentTook) {
    let mut tally = Tally::default();
    let mut took = ParentTook::default();
    let scopes: Vec<Option<Option<EntryKey>>> = (gw.listeners.iter())
        .map(|l| l.as_ref().and_then(|l| gw.scope(l.port)))
        .collect();
    for (l, scope) in gw.listeners.iter_mut().zip(scopes) {
        let Some(l) = l else { continue };
        if !tally.takes(snapshot, p, gw_key, l, &obj.key, obj.kind) {
            continue;
        }
        match mode {
            Connections::Tcp if !refused => take_port(l, scope, obj, &mut took, targets),
            Connections::Tcp => {}
            Connections::Tls { .. } => {
                // SNI names a host: the catch-all is not one.
                let mut named = listener_route_hosts(l.hostname.as_deref(), hostnames);
                named.retain(|h| h != "*");
                if named.is_empty() {
                    continue;
                }
                took.hosted += 1;
                if !refused {
                    take_hosts(l, scope, named, targets);
                }
            }
        }
    }
    (tally, took)
}

/// Attaches route `obj` to TCP listener `l` (served in `scope`): it forwards the listener's
/// port, unless an older route took it first (noted in `took`).
fn take_port(
    l: &mut Listener,
    scope: Option<Option<EntryKey>>,
    obj: &ObjectRef,
    took: &mut ParentTook,
    targets: &mut Vec<Target>,
) {
    match &l.tcp_route {
        Some(other) if other != obj => {
            // Attached and counted, as the Gateway API asks; the listener forwards to the
            // older route's backends only.
            l.attached += 1;
            took.taken
                .push(format!("listener {:?} forwards to {other}", l.name));
        }
        Some(_) => {}
        None => {
            let Ok(port) = u16::try_from(l.port) else {
                return;
            };
            l.tcp_route = Some(obj.clone());
            l.attached += 1;
            // A Gateway without an address serves its routes nowhere.
            if let Some(scope) = scope {
                let at = Target::Port(scope, port);
                if !targets.contains(&at) {
                    targets.push(at);
                }
            }
        }
    }
}

/// Attaches a TLSRoute to TLS listener `l` (served in `scope`) on the hosts it `named` there,
/// each with the listener's TLS Secret (the first listener's for a host two name).
fn take_hosts(
    l: &mut Listener,
    scope: Option<Option<EntryKey>>,
    named: Vec<String>,
    targets: &mut Vec<Target>,
) {
    l.attached += 1;
    // A Gateway without an address, or a listener whose certificate does not resolve, serves
    // its routes nowhere (their statuses say why).
    let Some(scope) = scope.filter(|_| l.programmed) else {
        return;
    };
    for h in named {
        let known = targets.iter().any(|t| match t {
            Target::Host(at, known, _) => *at == scope && *known == h,
            Target::Port(..) => false,
        });
        if !known {
            targets.push(Target::Host(scope.clone(), h, l.tls.clone()));
        }
    }
}

/// The `Accepted` condition of a parent (`field`, of Gateway `gw_key`) from how its listeners
/// took the route.
fn parent_accepted(
    field: &str,
    gw_key: &ObjKey,
    r: &RouteIn<'_>,
    mode: &Connections<'_>,
    (tally, took): (Tally, ParentTook),
) -> GatewayCondition {
    let tls = matches!(mode, Connections::Tls { .. });
    if !r.ready.refused.is_empty() {
        let why = r.ready.refused.join("; ");
        condition(cond::ACCEPTED, false, cond::UNSUPPORTED_VALUE, why)
    } else if let Some(no) = tally.refusal(field, gw_key, &r.key.namespace, r.kind()) {
        no
    } else if tls && took.hosted == 0 {
        condition(
            cond::ACCEPTED,
            false,
            cond::NO_MATCHING_LISTENER_HOSTNAME,
            format!(
                "{field}: no hostname of this route matches a listener hostname of Gateway {gw_key} (a TLS listener passes connections through by the host name their SNI names: set spec.hostnames or the listener's hostname)"
            ),
        )
    } else if !took.taken.is_empty() {
        let mut accepted = attached_to_gateway();
        accepted.message = format!(
            "attached to Gateway; not forwarded to: {} of Gateway {gw_key}, an older route (a TCP listener forwards its connections to one route's backends; attach this route to another listener, sectionName, to have them)",
            took.taken.join(", ")
        );
        accepted
    } else {
        attached_to_gateway()
    }
}

/// Forwards the connections of `target` to `clusters` (None: no backend resolves), unless
/// another object has the host: noted in `host_conflicts` (another object owns it) or
/// `conflicts` (it cannot be passed through).
fn forward(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    mode: &mut Connections<'_>,
    target: &Target,
    clusters: Option<&Clusters>,
    (host_conflicts, conflicts): (&mut Vec<String>, &mut Vec<String>),
) {
    let (scope, host, terminate) = match target {
        // No backend to forward to: no listener, so its port refuses connections.
        Target::Port(scope, port) => {
            if let Some(clusters) = clusters {
                match scope {
                    Some(key) => b.set_entry_tcp(key, clusters.clone(), obj.clone()),
                    None => b.add_tcp_listener(*port, clusters.clone(), obj.clone()),
                }
            }
            return;
        }
        Target::Host(scope, host, terminate) => (scope.as_ref(), host, terminate),
    };
    let Connections::Tls { passthrough } = mode else {
        return;
    };
    if let Some(owner) = b.host_owner_in(scope, host) {
        host_conflicts.push(format!("{host:?} is owned by {owner}"));
        return;
    }
    let at = (scope.cloned(), host.clone());
    if let Some(older) = passthrough.get(&at) {
        conflicts.push(format!("{host:?} is passed through for {older}"));
        return;
    }
    if let Some(why) = host_taken(b, scope, host, terminate.is_some()) {
        conflicts.push(why);
        return;
    }
    passthrough.insert(at, obj.clone());
    // No backend to forward to: no filter chain, so Envoy closes those connections.
    let Some(clusters) = clusters else {
        return;
    };
    let v = b.vhost_in(scope, host);
    match terminate {
        Some(secret) => {
            v.tls = Some(VhostTls {
                secret: secret.clone(),
                min_version: GATEWAY_MIN_TLS,
            });
            v.tcp_proxy = Some(clusters.clone());
        }
        None => v.tls_passthrough = Some(clusters.clone()),
    }
}

/// Why the connections for `host` (in `scope`) cannot go to a TLSRoute (that would `terminate`
/// TLS, or pass it through): its TLS is terminated for HTTP, or, to terminate it, it has HTTP
/// routes.
fn host_taken(
    b: &mut Builder<'_>,
    scope: Option<&EntryKey>,
    host: &str,
    terminate: bool,
) -> Option<String> {
    let v = b.vhost_in(scope, host);
    if v.tls.is_some() {
        Some(format!(
            "{host:?} is served with TLS terminated for HTTP (an HTTPS listener, an Ingress or an IngressRoute), so its connections cannot go to this route"
        ))
    } else if terminate && !v.routes.is_empty() {
        Some(format!(
            "{host:?} has HTTP routes, served over plain HTTP; a host whose TLS is terminated for a TLSRoute serves its TLS connections' streams only"
        ))
    } else {
        None
    }
}
