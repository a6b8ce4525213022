//! TCPRoutes (`gateway.networking.k8s.io/v1`; v1alpha2 is read the same) attached to the `TCP`
//! listeners of sluice's Gateways ([`super::gateway`]). Envoy listens on a TCP listener's port
//! itself and forwards every connection to the backends of the one route attached to it
//! (weighted; a TCP stream carries no host or path to choose by): the connection-route path of
//! [`super::gwroute`], which TLSRoutes share. The rules are written down in
//! `docs/gateway-api.md`.

use gateway_api::apis::experimental::tcproutes::{TcpRoute, TcpRouteSpec};

use super::gwroute::{GatewayRoute, ReadyRoute, one_rule};
use crate::api::{Kind, ObjKey};
use crate::store::Prepare;
use crate::validate::FieldError;
use crate::validate::gateway::validate_tcp_route_with;

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TcpRoute) -> Vec<FieldError> {
    one_rule(Kind::TcpRoute, route.spec.rules.len())
}

impl Prepare for TcpRoute {
    type Ready = ReadyRoute;

    fn prepare(_key: &ObjKey, route: &Self) -> ReadyRoute {
        ReadyRoute::new(route, validate_tcp_route_with, || unsupported(route))
    }
}

/// A TCPRoute's rules have backends alone: the shared shape is all of it.
impl GatewayRoute for TcpRoute {
    const KIND: Kind = Kind::TcpRoute;
    type Spec = TcpRouteSpec;

    fn spec(&self) -> &TcpRouteSpec {
        &self.spec
    }
}
