//! TLSRoutes (`gateway.networking.k8s.io/v1`) attached to the `TLS` listeners of sluice's
//! Gateways ([`super::gateway`]). Such a listener is served on sluice's HTTPS listener, as HTTPS
//! listeners are: a connection whose SNI names one of the route's hostnames is forwarded to the
//! route's backends (weighted) as it is, still encrypted (mode `Passthrough`: the backends
//! terminate TLS), or Envoy terminates TLS with the listener's certificate and forwards the
//! stream inside (mode `Terminate`): the connection-route path of [`super::gwroute`], which
//! TCPRoutes share. The rules are written down in `docs/gateway-api.md`.

use gateway_api::apis::standard::tlsroutes::{TlsRoute, TlsRouteSpec};

use super::gwroute::{GatewayRoute, one_rule};
use crate::api::Kind;
use crate::api::gateway_route::RouteSpec;
use crate::validate::gateway::validate_tls_route_with;
use crate::validate::{FieldError, Verdict};

/// What the route uses that sluice does not route, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &TlsRoute) -> Vec<FieldError> {
    one_rule(Kind::TlsRoute, route.spec.rules.len())
}

/// A TLSRoute's rules have backends alone: the shared shape is all of it.
impl GatewayRoute for TlsRoute {
    const KIND: Kind = Kind::TlsRoute;
    type Spec = TlsRouteSpec;

    fn spec(&self) -> &TlsRouteSpec {
        &self.spec
    }

    fn validate(&self, v: Verdict, spec: &RouteSpec) -> Verdict {
        validate_tls_route_with(v, spec)
    }

    fn unsupported(&self, _: &RouteSpec) -> Vec<FieldError> {
        unsupported(self)
    }
}
