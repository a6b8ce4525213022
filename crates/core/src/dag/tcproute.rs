//! TCPRoutes (`gateway.networking.k8s.io/v1`; v1alpha2 is read the same) attached to the `TCP` listeners of sluice's
//! Gateways ([`super::gateway`]). Envoy listens on a TCP listener's port itself and forwards
//! every connection to the backends of the one route attached to it (weighted; a TCP stream
//! carries no host or path to choose by). The rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;

use gateway_api::apis::experimental::tcproutes::TcpRoute;

use super::Builder;
use super::gateway::{GatewayAcc, attached_to_gateway, cond, condition, refs_resolved};
use super::gwroute::{
    ReadyRoute, Tally, one_rule, parents_in, record_status, rule_connections, sluices_parents,
};
use super::model::EntryKey;
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::validate_tcp_route;

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TcpRoute) -> Vec<FieldError> {
    one_rule("TCPRoute", route.spec.rules.len())
}

/// One TCPRoute: attaches it to the free TCP listeners of sluice's Gateways it names (a listener
/// another route took first is not free), forwards their ports to its backends, and records its
/// status. Routes come oldest first, so the oldest keeps a listener two routes name.
pub(super) fn tcp_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    key: &ObjKey,
    route: &TcpRoute,
) {
    let obj = ObjectRef {
        kind: Kind::TcpRoute,
        key: key.clone(),
    };
    let parent_refs = parents_in!(route.spec.parent_refs);
    let generation = route.metadata.generation;
    let Some(parents) = sluices_parents(b, &obj, &parent_refs, generation, gateways) else {
        return;
    };
    let errors = validate_tcp_route(route).errors;
    let refused = ReadyRoute::new(errors, || unsupported(route)).refused;

    // The ports of the listeners the route is attached to.
    let mut ports: Vec<(Option<EntryKey>, u16)> = Vec::new();
    let mut statuses = Vec::new();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let mut tally = Tally::default();
        let mut taken: Vec<String> = Vec::new();
        let scopes: Vec<Option<Option<EntryKey>>> = (gw.listeners.iter())
            .map(|l| l.as_ref().and_then(|l| gw.scope(l.port)))
            .collect();
        for (l, scope) in gw.listeners.iter_mut().zip(scopes) {
            let Some(l) = l else { continue };
            if !tally.takes(b.snapshot, p, gw_key, l, key, "TCPRoute") || !refused.is_empty() {
                continue;
            }
            match &l.tcp_route {
                Some(other) if *other != obj => {
                    // Attached and counted, as the Gateway API asks; the listener forwards to
                    // the older route's backends only.
                    l.attached += 1;
                    taken.push(format!("listener {:?} forwards to {other}", l.name));
                }
                Some(_) => {}
                None => {
                    let Ok(port) = u16::try_from(l.port) else {
                        continue;
                    };
                    l.tcp_route = Some(obj.clone());
                    l.attached += 1;
                    // A Gateway without an address serves its routes nowhere.
                    if let Some(scope) = scope {
                        let at = (scope, port);
                        if !ports.contains(&at) {
                            ports.push(at);
                        }
                    }
                }
            }
        }
        let field = format!("spec.parentRefs[{i}]");
        let accepted = if !refused.is_empty() {
            condition(
                cond::ACCEPTED,
                false,
                cond::UNSUPPORTED_VALUE,
                refused.join("; "),
            )
        } else if let Some(no) = tally.refusal(&field, gw_key, &key.namespace, "TCPRoute") {
            no
        } else if !taken.is_empty() {
            let mut accepted = attached_to_gateway();
            accepted.message = format!(
                "attached to Gateway; not forwarded to: {} of Gateway {gw_key}, an older route (a TCP listener forwards its connections to one route's backends; attach this route to another listener, sectionName, to have them)",
                taken.join(", ")
            );
            accepted
        } else {
            attached_to_gateway()
        };
        statuses.push((*p, accepted));
    }

    let mut resolved = refs_resolved();
    // Ports are taken only by a route of one rule (see `refused`).
    // Resolved also where the route has no port (for ResolvedRefs).
    if let Some(rule) = route.spec.rules.first().filter(|_| refused.is_empty()) {
        let ns = &*key.namespace;
        let clusters = rule_connections!(b, snapshot, "TCPRoute", ns, rule, &mut resolved);
        // No backend to forward to: no listener, so its port refuses connections.
        if let Some(clusters) = clusters {
            for (scope, port) in ports {
                match scope {
                    Some(key) => b.set_entry_tcp(&key, clusters.clone(), obj.clone()),
                    None => b.add_tcp_listener(port, clusters.clone(), obj.clone()),
                }
            }
        }
    }

    record_status(
        b,
        &obj,
        controller,
        &key.namespace,
        statuses,
        resolved,
        Vec::new(),
    );
}
