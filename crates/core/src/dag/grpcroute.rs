//! GRPCRoutes of the Gateway API: their rules as routes to gRPC backends (cleartext HTTP/2),
//! attached to sluice's Gateways by [`super::gwroute`]. A gRPC call is an HTTP/2 POST to
//! `/<service>/<method>`: a method match is an exact path, a service match a path prefix. The
//! rules are written down in `docs/gateway-api.md`.

use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRules, GrpcRouteRulesFiltersType, GrpcRouteRulesMatchesHeadersType,
    GrpcRouteRulesMatchesMethodType, GrpcRouteSpec,
};

use super::gwroute::{
    GatewayRoute, OwnRule, RuleMatch, unsupported_backend_filters, unsupported_value as no,
};
use super::model::{HeaderMatch, HeaderOp, PathMatch};
use crate::api::Kind;
use crate::api::gateway_route::RouteSpec;
use crate::validate::gateway::{grpc_path_regex, validate_grpc_route_with};
use crate::validate::{FieldError, Verdict};

impl GatewayRoute for GrpcRoute {
    const KIND: Kind = Kind::GrpcRoute;
    type Spec = GrpcRouteSpec;

    fn spec(&self) -> &GrpcRouteSpec {
        &self.spec
    }

    fn validate(&self, v: Verdict, spec: &RouteSpec) -> Verdict {
        validate_grpc_route_with(v, self, spec)
    }

    fn unsupported(&self, spec: &RouteSpec) -> Vec<FieldError> {
        unsupported_in(self, spec)
    }

    /// Each rule's matches (a GRPCRoute has no filters but header modifiers and mirrors).
    fn own_rules(&self) -> Vec<OwnRule> {
        let rules = self.spec.rules.iter().flatten();
        rules
            .map(|rule| OwnRule {
                matches: rule_matches(rule),
                ..OwnRule::default()
            })
            .collect()
    }
}

/// What the route uses that sluice does not route yet, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &GrpcRoute) -> Vec<FieldError> {
    unsupported_in(route, &RouteSpec::read(&route.spec).unwrap_or_default())
}

/// [`unsupported`] of the route's shared fields read already.
fn unsupported_in(route: &GrpcRoute, spec: &RouteSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (i, rule) in route.spec.rules.iter().flatten().enumerate() {
        let field = format!("spec.rules[{i}]");
        for (j, f) in rule.filters.iter().flatten().enumerate() {
            if !matches!(
                f.r#type,
                GrpcRouteRulesFiltersType::RequestHeaderModifier
                    | GrpcRouteRulesFiltersType::ResponseHeaderModifier
                    | GrpcRouteRulesFiltersType::RequestMirror
            ) {
                no(
                    &mut out,
                    format!("{field}.filters[{j}].type"),
                    "sluice applies RequestHeaderModifier, ResponseHeaderModifier and RequestMirror filters to GRPCRoutes; remove this one",
                );
            }
        }
        if let Some(shared) = spec.rules.get(i) {
            unsupported_backend_filters(&mut out, &field, shared);
        }
    }
    out
}

/// The path and header conditions of a rule's matches (every call when it has none). A
/// `RegularExpression` method match is an expression of the whole path (`/<service>/<method>`),
/// and so is an `Exact` one naming a method alone (that method of any service).
fn rule_matches(rule: &GrpcRouteRules) -> Vec<RuleMatch> {
    let matches = rule.matches.as_deref().unwrap_or(&[]);
    if matches.is_empty() {
        return vec![RuleMatch::everything()];
    }
    matches
        .iter()
        .map(|m| {
            let service = (m.method.as_ref())
                .and_then(|m| m.service.as_deref())
                .filter(|s| !s.is_empty());
            let method = (m.method.as_ref())
                .and_then(|m| m.method.as_deref())
                .filter(|s| !s.is_empty());
            let regex = matches!(
                m.method.as_ref().and_then(|m| m.r#type.as_ref()),
                Some(GrpcRouteRulesMatchesMethodType::RegularExpression)
            );
            let path = match (service, method) {
                _ if regex => PathMatch::Regex(grpc_path_regex(service, method).into()),
                (Some(s), Some(m)) => PathMatch::Exact(format!("/{s}/{m}").into()),
                (Some(s), None) => PathMatch::prefix(&format!("/{s}")),
                // The method of every service: the whole path is `/<any service>/<method>`.
                (None, Some(m)) => {
                    PathMatch::Regex(grpc_path_regex(None, Some(&regex::escape(m))).into())
                }
                // Refused by the single-object rules before the rules are built.
                (None, None) => PathMatch::prefix("/"),
            };
            let headers = (m.headers.iter().flatten())
                .map(|h| HeaderMatch {
                    name: h.name.to_ascii_lowercase(),
                    op: match h.r#type {
                        Some(GrpcRouteRulesMatchesHeadersType::RegularExpression) => {
                            HeaderOp::Regex(h.value.clone())
                        }
                        _ => HeaderOp::Exact(h.value.clone()),
                    },
                })
                .collect();
            RuleMatch {
                path,
                headers,
                query: Vec::new(),
            }
        })
        .collect()
}
