//! TCPRoutes (`gateway.networking.k8s.io/v1`; v1alpha2 is read the same) attached to the `TCP`
//! listeners of sluice's Gateways ([`super::gateway`]). Envoy listens on a TCP listener's port
//! itself and forwards every connection to the backends of the one route attached to it
//! (weighted; a TCP stream carries no host or path to choose by): the connection-route path of
//! [`super::gwroute`], which TLSRoutes share. The rules are written down in
//! `docs/gateway-api.md`.

use std::collections::BTreeMap;

use gateway_api::apis::experimental::tcproutes::{TcpRoute, TcpRouteRules};

use super::Builder;
use super::gateway_acc::GatewayAcc;
use super::gwroute::{
    BackendIn, Connections, GatewayRoute, ParentIn, ReadyRoute, RouteHead, RouteIn, RuleIn,
    connection_route, one_rule,
};
use crate::api::{Kind, ObjKey};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::validate_tcp_route;

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TcpRoute) -> Vec<FieldError> {
    one_rule(Kind::TcpRoute, route.spec.rules.len())
}

impl GatewayRoute for TcpRoute {
    const KIND: Kind = Kind::TcpRoute;

    fn head(&self) -> RouteHead<'_> {
        let parents = (self.spec.parent_refs.iter().flatten()).map(|p| ParentIn {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
            section_name: p.section_name.as_deref(),
            port: p.port,
        });
        RouteHead {
            generation: self.metadata.generation,
            parents: parents.collect(),
            hostnames: &[],
        }
    }

    fn services(&self) -> Vec<(Option<&str>, &str)> {
        let refs = self.spec.rules.iter().flat_map(|r| &r.backend_refs);
        refs.map(|b| (b.namespace.as_deref(), b.name.as_str()))
            .collect()
    }

    fn rules(&self) -> Vec<RuleIn<'_>> {
        self.spec.rules.iter().map(rule_in).collect()
    }
}

/// A rule in the shape of every route kind's: its backends.
fn rule_in(rule: &TcpRouteRules) -> RuleIn<'_> {
    let backends = (rule.backend_refs.iter()).map(|r| BackendIn {
        group: r.group.as_deref(),
        kind: r.kind.as_deref(),
        namespace: r.namespace.as_deref(),
        name: &r.name,
        port: r.port,
        weight: r.weight,
        edits: None,
    });
    RuleIn::connections(backends.collect())
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
    let ready = ReadyRoute::new(validate_tcp_route(route).errors, || unsupported(route));
    let r = RouteIn {
        route,
        key,
        refused: &ready.refused,
    };
    connection_route(b, snapshot, gateways, controller, r, Connections::Tcp);
}
