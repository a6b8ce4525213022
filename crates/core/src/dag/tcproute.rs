//! TCPRoutes (`gateway.networking.k8s.io/v1`; v1alpha2 is read the same) attached to the `TCP`
//! listeners of sluice's Gateways ([`super::gateway`]). Envoy listens on a TCP listener's port
//! itself and forwards every connection to the backends of the one route attached to it
//! (weighted; a TCP stream carries no host or path to choose by): the connection-route path of
//! [`super::gwroute`], which TLSRoutes share. The rules are written down in
//! `docs/gateway-api.md`.

use gateway_api::apis::experimental::tcproutes::{TcpRoute, TcpRouteSpec};

use super::gwroute::{GatewayRoute, one_rule};
use crate::api::Kind;
use crate::api::gateway_route::RouteSpec;
use crate::validate::gateway::validate_tcp_route_with;
use crate::validate::{FieldError, Verdict};

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TcpRoute) -> Vec<FieldError> {
    one_rule(Kind::TcpRoute, route.spec.rules.len())
}

/// A TCPRoute's rules have backends alone: the shared shape is all of it.
impl GatewayRoute for TcpRoute {
    const KIND: Kind = Kind::TcpRoute;
    type Spec = TcpRouteSpec;

    fn spec(&self) -> &TcpRouteSpec {
        &self.spec
    }

    fn validate(&self, v: Verdict, spec: &RouteSpec) -> Verdict {
        validate_tcp_route_with(v, spec)
    }

    fn unsupported(&self, _: &RouteSpec) -> Vec<FieldError> {
        unsupported(self)
    }
}
