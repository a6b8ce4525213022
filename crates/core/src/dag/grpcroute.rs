//! GRPCRoutes of the Gateway API: their rules as routes to gRPC backends (cleartext HTTP/2),
//! attached to sluice's Gateways by [`super::gwroute`]. A gRPC call is an HTTP/2 POST to
//! `/<service>/<method>`: a method match is an exact path, a service match a path prefix. The
//! rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;

use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRules, GrpcRouteRulesBackendRefsFiltersType, GrpcRouteRulesFilters,
    GrpcRouteRulesFiltersType, GrpcRouteRulesMatchesHeadersType, GrpcRouteRulesMatchesMethodType,
};

use super::Builder;
use super::gateway_acc::GatewayAcc;
use super::gateway_common::cond;
use super::gwroute::{
    BackendIn, GatewayRoute, MirrorIn, ParentIn, ReadyRoute, RouteHead, RouteIn, RuleFilters,
    RuleIn, RuleMatch, attach_route, filter_edits, mirror_share,
};
use super::model::{HeaderMatch, HeaderOp, PathMatch};
use crate::api::{Kind, ObjKey};
use crate::store::{Prepare, Prepared, Snapshot};
use crate::validate::FieldError;
use crate::validate::gateway::{grpc_path_regex, validate_grpc_route};

impl Prepare for GrpcRoute {
    type Ready = ReadyRoute;

    fn prepare(_key: &ObjKey, route: &Self) -> ReadyRoute {
        ReadyRoute::new(validate_grpc_route(route).errors, || unsupported(route))
    }
}

impl GatewayRoute for GrpcRoute {
    const KIND: Kind = Kind::GrpcRoute;

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
            hostnames: self.spec.hostnames.as_deref().unwrap_or(&[]),
        }
    }

    fn services(&self) -> Vec<(Option<&str>, &str)> {
        let rules = self.spec.rules.iter().flatten();
        let backends = (rules.clone().flat_map(|r| r.backend_refs.iter().flatten()))
            .map(|b| (b.namespace.as_deref(), b.name.as_str()));
        let filters = rules.flat_map(|r| r.filters.iter().flatten());
        let mirrors = (filters.filter_map(|f| f.request_mirror.as_ref())).map(|m| {
            (
                m.backend_ref.namespace.as_deref(),
                m.backend_ref.name.as_str(),
            )
        });
        backends.chain(mirrors).collect()
    }

    fn rules(&self) -> Vec<RuleIn<'_>> {
        let rules = self.spec.rules.as_deref().unwrap_or(&[]);
        rules.iter().map(rule_in).collect()
    }
}

/// A GRPCRoute's rule in the shape of every route kind's: matches, header modifiers and
/// mirrors (a GRPCRoute has no other filters), backends.
fn rule_in(rule: &GrpcRouteRules) -> RuleIn<'_> {
    let filters = rule.filters.as_deref().unwrap_or(&[]);
    RuleIn {
        matches: rule_matches(rule),
        filters: RuleFilters {
            edits: filter_edits(filters),
            ..RuleFilters::default()
        },
        mirrors: rule_mirrors(filters),
        backends: (rule.backend_refs.iter().flatten())
            .map(|r| BackendIn {
                group: r.group.as_deref(),
                kind: r.kind.as_deref(),
                namespace: r.namespace.as_deref(),
                name: &r.name,
                port: r.port,
                weight: r.weight,
                edits: filter_edits(r.filters.as_deref().unwrap_or(&[])),
            })
            .collect(),
    }
}

/// The `RequestMirror` filters of a rule (each numbered among them).
fn rule_mirrors(filters: &[GrpcRouteRulesFilters]) -> Vec<MirrorIn<'_>> {
    let mirrors = filters
        .iter()
        .filter(|f| f.r#type == GrpcRouteRulesFiltersType::RequestMirror);
    (mirrors.enumerate())
        .filter_map(|(j, f)| {
            let m = f.request_mirror.as_ref()?;
            let r = &m.backend_ref;
            Some(MirrorIn {
                filter: j,
                backend: BackendIn {
                    group: r.group.as_deref(),
                    kind: r.kind.as_deref(),
                    namespace: r.namespace.as_deref(),
                    name: &r.name,
                    port: r.port,
                    weight: None,
                    edits: None,
                },
                per_million: mirror_share(
                    m.percent,
                    m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
                ),
            })
        })
        .collect()
}

/// One GRPCRoute: attaches it to the listeners of sluice's Gateways it names, and adds its rules.
pub(super) fn grpc_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    key: &ObjKey,
    route: &Prepared<GrpcRoute>,
) {
    let r = RouteIn {
        route: &**route,
        key,
        refused: &route.ready().refused,
    };
    attach_route(b, snapshot, gateways, controller, r);
}

/// What the route uses that sluice does not route yet, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &GrpcRoute) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut no = |path: String, message: &str| {
        out.push(FieldError::new(path, cond::UNSUPPORTED_VALUE, message));
    };
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
                    format!("{field}.filters[{j}].type"),
                    "sluice applies RequestHeaderModifier, ResponseHeaderModifier and RequestMirror filters to GRPCRoutes; remove this one",
                );
            }
        }
        for (j, r) in rule.backend_refs.iter().flatten().enumerate() {
            for (k, f) in r.filters.iter().flatten().enumerate() {
                if !matches!(
                    f.r#type,
                    GrpcRouteRulesBackendRefsFiltersType::RequestHeaderModifier
                        | GrpcRouteRulesBackendRefsFiltersType::ResponseHeaderModifier
                ) {
                    no(
                        format!("{field}.backendRefs[{j}].filters[{k}].type"),
                        super::gwroute::BACKEND_FILTERS_ROUTED,
                    );
                }
            }
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
