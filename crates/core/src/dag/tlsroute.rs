//! TLSRoutes (`gateway.networking.k8s.io/v1`) attached to the `TLS` listeners of sluice's
//! Gateways ([`super::gateway`]). Such a listener is served on sluice's HTTPS listener, as HTTPS
//! listeners are: a connection whose SNI names one of the route's hostnames is forwarded to the
//! route's backends (weighted) as it is, still encrypted (mode `Passthrough`: the backends
//! terminate TLS), or Envoy terminates TLS with the listener's certificate and forwards the
//! stream inside (mode `Terminate`). The rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;

use gateway_api::apis::standard::tlsroutes::TlsRoute;

use super::Builder;
use super::gateway::{
    GATEWAY_MIN_TLS, GatewayAcc, attached_to_gateway, cond, condition, refs_resolved,
};
use super::gwroute::{
    ReadyRoute, Tally, listener_route_hosts, one_rule, parents_in, record_status, rule_connections,
    sluices_parents,
};
use super::model::{EntryKey, VhostTls};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::validate_tls_route;

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TlsRoute) -> Vec<FieldError> {
    one_rule("TLSRoute", route.spec.rules.len())
}

/// One TLSRoute: attaches it to the TLS listeners of sluice's Gateways it names, and passes the
/// connections for each hostname where its hostnames and a listener's meet through to its
/// backends, unless the host is another object's: owned by an IngressRoute or Route, served with
/// TLS terminated (an HTTPS listener, an Ingress), or passed through for an older TLSRoute
/// (`passthrough`: each host's route so far; routes come oldest first).
pub(super) fn tls_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    key: &ObjKey,
    route: &TlsRoute,
    passthrough: &mut BTreeMap<(Option<EntryKey>, String), ObjectRef>,
) {
    let obj = ObjectRef {
        kind: Kind::TlsRoute,
        key: key.clone(),
    };
    let parent_refs = parents_in!(route.spec.parent_refs);
    let generation = route.metadata.generation;
    let Some(parents) = sluices_parents(b, &obj, &parent_refs, generation, gateways) else {
        return;
    };
    let errors = validate_tls_route(route).errors;
    let refused = ReadyRoute::new(errors, || unsupported(route)).refused;

    // The hosts the route is attached on, through every parent, each with the TLS Secret of the
    // listener that terminates TLS for it (None: passed through); the first listener's.
    let mut hosts: Vec<(Option<EntryKey>, String, Option<String>)> = Vec::new();
    let mut statuses = Vec::new();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let mut tally = Tally::default();
        let mut hosted = 0;
        let scopes: Vec<Option<Option<EntryKey>>> = (gw.listeners.iter())
            .map(|l| l.as_ref().and_then(|l| gw.scope(l.port)))
            .collect();
        for (l, scope) in gw.listeners.iter_mut().zip(scopes) {
            let Some(l) = l else { continue };
            if !tally.takes(b.snapshot, p, gw_key, l, key, "TLSRoute") {
                continue;
            }
            // SNI names a host: the catch-all is not one.
            let mut named = listener_route_hosts(l.hostname.as_deref(), &route.spec.hostnames);
            named.retain(|h| h != "*");
            if named.is_empty() {
                continue;
            }
            hosted += 1;
            if !refused.is_empty() {
                continue;
            }
            l.attached += 1;
            // A Gateway without an address, or a listener whose certificate does not resolve,
            // serves its routes nowhere (their statuses say why).
            let Some(scope) = scope.filter(|_| l.programmed) else {
                continue;
            };
            for h in named {
                if !hosts
                    .iter()
                    .any(|(at, known, _)| *at == scope && *known == h)
                {
                    hosts.push((scope.clone(), h, l.tls.clone()));
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
        } else if let Some(no) = tally.refusal(&field, gw_key, &key.namespace, "TLSRoute") {
            no
        } else if hosted == 0 {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_LISTENER_HOSTNAME,
                format!(
                    "{field}: no hostname of this route matches a listener hostname of Gateway {gw_key} (a TLS listener passes connections through by the host name their SNI names: set spec.hostnames or the listener's hostname)"
                ),
            )
        } else {
            attached_to_gateway()
        };
        statuses.push((*p, accepted));
    }

    let mut resolved = refs_resolved();
    // Hosts another object owns (the route stays valid there, as an HTTPRoute does), and hosts
    // that cannot be passed through (a problem of the route).
    let mut host_conflicts: Vec<String> = Vec::new();
    let mut conflicts: Vec<String> = Vec::new();
    // Hosts are attached only by a route of one rule (see `refused`).
    // Resolved also where the route is attached on no host (for ResolvedRefs).
    if let Some(rule) = route.spec.rules.first().filter(|_| refused.is_empty()) {
        let ns = &*key.namespace;
        let clusters = rule_connections!(b, snapshot, "TLSRoute", ns, rule, &mut resolved);
        for (scope, host, terminate) in &hosts {
            let scope = scope.as_ref();
            if let Some(owner) = b.host_owner_in(scope, host) {
                host_conflicts.push(format!("{host:?} is owned by {owner}"));
                continue;
            }
            let at = (scope.cloned(), host.clone());
            if let Some(older) = passthrough.get(&at) {
                conflicts.push(format!("{host:?} is passed through for {older}"));
                continue;
            }
            let v = b.vhost_in(scope, host);
            if v.tls.is_some() {
                conflicts.push(format!(
                    "{host:?} is served with TLS terminated for HTTP (an HTTPS listener, an Ingress or an IngressRoute), so its connections cannot go to this route"
                ));
                continue;
            }
            if terminate.is_some() && !v.routes.is_empty() {
                conflicts.push(format!(
                    "{host:?} has HTTP routes, served over plain HTTP; a host whose TLS is terminated for a TLSRoute serves its TLS connections' streams only"
                ));
                continue;
            }
            passthrough.insert(at, obj.clone());
            // No backend to forward to: no filter chain, so Envoy closes those connections.
            let Some(clusters) = &clusters else {
                continue;
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
    }
    let notes: Vec<&str> = (host_conflicts.iter().chain(&conflicts))
        .map(String::as_str)
        .collect();
    let all_taken = !hosts.is_empty() && notes.len() == hosts.len();
    for (_, accepted) in &mut statuses {
        if accepted.status && all_taken {
            *accepted = condition(
                cond::ACCEPTED,
                false,
                cond::HOST_CONFLICT,
                format!(
                    "every hostname of this route belongs to another object: {}",
                    notes.join("; ")
                ),
            );
        } else if accepted.status && !notes.is_empty() {
            accepted.message = format!(
                "attached to Gateway; not passed through: {}",
                notes.join("; ")
            );
        }
    }
    record_status(
        b,
        &obj,
        controller,
        &key.namespace,
        statuses,
        resolved,
        conflicts,
    );
}
