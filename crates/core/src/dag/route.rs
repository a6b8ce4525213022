//! Route `contour.heptio.com/v1alpha1` processor (seed 004): each Route is the root of one virtual
//! host (no TLS), with path-prefix routes over weighted upstreams in its own namespace.

use super::Builder;
use std::borrow::Cow;

use super::delegation::{BackendField, HealthCheckRef, NodeBackend, forward};
use super::model::*;
use crate::api::status::reason;
use crate::api::{Kind, ObjectRef};
use crate::validate::quote;
use crate::validate::route::validate_route;

/// Tracks every Route, runs its single-object rules and lets valid Routes in allowed namespaces
/// claim their host (claims compete with IngressRoute roots: the oldest object wins).
pub fn claim_hosts(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    for (slot, key, o) in b.own(Kind::RouteV1alpha1, &snap.routes_v1alpha1) {
        let obj = ObjectRef {
            kind: Kind::RouteV1alpha1,
            key: key.clone(),
        };
        b.track(slot, &o.metadata);
        let verdict = validate_route(o);
        if !verdict.allowed() {
            for e in verdict.errors {
                b.fail(slot, e);
            }
            continue;
        }
        if !b.options.root_allowed_in(&key.namespace) {
            let allowed = b.options.root_namespaces.join(", ");
            b.set_invalid(
                slot,
                reason::ROOT_NAMESPACE,
                format!(
                    "Route in namespace {} is not allowed (a Route is the root of its host); root namespaces are: {allowed}",
                    quote(&key.namespace)
                ),
            );
            continue;
        }
        b.claim_host(&o.spec.host, obj, o.metadata.creation_timestamp.clone());
    }
}

/// Serves every valid Route that owns its host.
pub fn build_routes(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    for (slot, key, o) in b.own(Kind::RouteV1alpha1, &snap.routes_v1alpha1) {
        let obj = ObjectRef {
            kind: Kind::RouteV1alpha1,
            key: key.clone(),
        };
        let spec = &o.spec;
        if b.state_of(slot) == Some(State::Invalid) {
            continue;
        }
        // The host's virtual host, looked up once for all the Route's rules.
        let Some(host) = b.owned_host_id(&spec.host, Kind::RouteV1alpha1, key) else {
            continue;
        };
        for (i, rule) in spec.routes.iter().enumerate() {
            let backends: Vec<NodeBackend> = rule
                .upstreams
                .iter()
                .enumerate()
                .map(|(j, u)| NodeBackend {
                    field: BackendField::Indexed {
                        route: i,
                        list: "upstreams",
                        item: j,
                    },
                    name: Cow::Borrowed(u.service_name.as_str()),
                    port: u.service_port,
                    weight: u.weight,
                    protocol: UpstreamProtocol::Http,
                    validation: None,
                    lb: rule.strategy.or(spec.strategy).unwrap_or_default(),
                    health_check: u
                        .lb_health_check
                        .as_ref()
                        .or(spec.lb_health_check.as_ref())
                        .map(HealthCheckRef::Borrowed),
                })
                .collect();
            let (action, errors) = forward(b, &key.namespace, &backends, None);
            for e in errors {
                b.fail(slot, e);
            }
            let route = Route {
                path: PathMatch::prefix(&rule.path_prefix),
                headers: Vec::new(),
                action,
                permit_insecure: false,
                timeout: None,
                retry: None,
                extras: None,
                source: obj.clone(),
            };
            if let Err(conflict) = b.add_route_to(host, route) {
                let (existing, route) = *conflict;
                let what = route.path.to_string();
                b.set_invalid(
                    slot,
                    reason::ROUTE_CONFLICT,
                    format!(
                        "spec.routes[{i}].pathPrefix: {what} on {} is already defined by {existing}",
                        spec.host.to_ascii_lowercase()
                    ),
                );
            }
        }
        b.set_valid(slot, "valid Route");
    }
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
