//! TLSRoutes (`gateway.networking.k8s.io/v1`) attached to the `TLS` listeners of sluice's
//! Gateways ([`super::gateway`]). Such a listener is served on sluice's HTTPS listener, as HTTPS
//! listeners are: a connection whose SNI names one of the route's hostnames is forwarded to the
//! route's backends (weighted) as it is, still encrypted (mode `Passthrough`: the backends
//! terminate TLS), or Envoy terminates TLS with the listener's certificate and forwards the
//! stream inside (mode `Terminate`): the connection-route path of [`super::gwroute`], which
//! TCPRoutes share. The rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;

use gateway_api::apis::standard::tlsroutes::{TlsRoute, TlsRouteRules};

use super::Builder;
use super::gateway_acc::GatewayAcc;
use super::gwroute::{
    BackendIn, Connections, GatewayRoute, ParentIn, ReadyRoute, RouteHead, RouteIn, RuleIn,
    connection_route, one_rule,
};
use super::model::EntryKey;
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::validate_tls_route;

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TlsRoute) -> Vec<FieldError> {
    one_rule(Kind::TlsRoute, route.spec.rules.len())
}

impl GatewayRoute for TlsRoute {
    const KIND: Kind = Kind::TlsRoute;

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
            // SNI names.
            hostnames: &self.spec.hostnames,
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
fn rule_in(rule: &TlsRouteRules) -> RuleIn<'_> {
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
    let ready = ReadyRoute::new(validate_tls_route(route).errors, || unsupported(route));
    let r = RouteIn {
        route,
        key,
        refused: &ready.refused,
    };
    let mode = Connections::Tls { passthrough };
    connection_route(b, snapshot, gateways, controller, r, mode);
}
