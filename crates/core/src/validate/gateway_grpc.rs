//! The rules of a GRPCRoute: its method matches (gRPC names, or RE2 expressions checked as the
//! path expression Envoy runs), and the hostnames, header matches, filters and backends it
//! shares with HTTPRoute ([`super::routes::validate_route`]).

use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRules, GrpcRouteRulesBackendRefs, GrpcRouteRulesBackendRefsFilters,
    GrpcRouteRulesFilters, GrpcRouteRulesMatches, GrpcRouteRulesMatchesHeadersType,
    GrpcRouteRulesMatchesMethod, GrpcRouteRulesMatchesMethodType,
};

use super::filters::{FilterFields, HeaderModifier, MirrorFields, RouteFilter, headers, names};
use super::routes::{
    Backend, BackendTarget, FilteredBackend, RouteRule, validate_header_match, validate_route,
};
use crate::validate::common::check_regex;
use crate::validate::{FieldError, Verdict};

/// The path expression of a GRPCRoute `RegularExpression` method match: `/<service>/<method>`,
/// a part not given (or empty) taking any name.
pub fn grpc_path_regex(service: Option<&str>, method: Option<&str>) -> String {
    let part = |p: Option<&str>| p.filter(|p| !p.is_empty()).unwrap_or("[^/]+").to_string();
    format!("/(?:{})/(?:{})", part(service), part(method))
}

fn is_grpc_service(s: &str) -> bool {
    let s = s.strip_prefix('.').unwrap_or(s);
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut b = part.bytes();
            b.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        })
}

fn is_grpc_method(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Host names, method and header matches (RE2 regexes), filters and backends of a GRPCRoute.
pub fn validate_grpc_route(r: &GrpcRoute) -> Verdict {
    let spec = &r.spec;
    validate_route(
        spec.hostnames.as_deref().unwrap_or_default(),
        (spec.parent_refs.iter().flatten()).map(|p| (p.port, p.section_name.as_deref())),
        spec.rules.as_deref().unwrap_or_default(),
    )
}

impl RouteRule for GrpcRouteRules {
    type Filter = GrpcRouteRulesFilters;
    type Backend = GrpcRouteRulesBackendRefs;

    fn name(&self) -> Option<&String> {
        self.name.as_ref()
    }

    fn filters(&self) -> &[GrpcRouteRulesFilters] {
        self.filters.as_deref().unwrap_or_default()
    }

    fn backend_refs(&self) -> &[GrpcRouteRulesBackendRefs] {
        self.backend_refs.as_deref().unwrap_or_default()
    }

    fn validate_matches(&self, v: &mut Verdict, base: &str) {
        for (j, m) in self.matches.iter().flatten().enumerate() {
            validate_match(v, &format!("{base}.matches[{j}]"), m);
        }
    }
}

impl Backend for GrpcRouteRulesBackendRefs {
    fn target(&self) -> BackendTarget<'_> {
        BackendTarget {
            group: self.group.as_deref(),
            kind: self.kind.as_deref(),
            port: self.port,
            weight: self.weight,
        }
    }
}

impl FilteredBackend for GrpcRouteRulesBackendRefs {
    type Filter = GrpcRouteRulesBackendRefsFilters;

    fn filters(&self) -> &[GrpcRouteRulesBackendRefsFilters] {
        self.filters.as_deref().unwrap_or_default()
    }
}

/// One match (`at` names it): its method and headers.
fn validate_match(v: &mut Verdict, at: &str, m: &GrpcRouteRulesMatches) {
    if let Some(method) = &m.method {
        validate_method(v, &format!("{at}.method"), method);
    }
    for (k, h) in m.headers.iter().flatten().enumerate() {
        let regex = matches!(
            h.r#type,
            Some(GrpcRouteRulesMatchesHeadersType::RegularExpression)
        );
        validate_header_match(v, &format!("{at}.headers[{k}]"), &h.name, &h.value, regex);
    }
}

/// A method match (`mat` names it): a service, a method or both, as gRPC names or RE2
/// expressions.
fn validate_method(v: &mut Verdict, mat: &str, method: &GrpcRouteRulesMatchesMethod) {
    let regex = matches!(
        method.r#type,
        Some(GrpcRouteRulesMatchesMethodType::RegularExpression)
    );
    let errors_before = v.errors.len();
    if method.service.is_none() && method.method.is_none() {
        v.error(FieldError::spec(
            mat,
            "must name a service, a method, or both",
        ));
    }
    if let Some(s) = &method.service {
        if regex {
            check_regex(v, &format!("{mat}.service"), s);
        } else if !is_grpc_service(s) {
            v.error(FieldError::invalid(
                format!("{mat}.service"),
                s,
                "must be a fully qualified gRPC service name like \"package.Service\"",
            ));
        }
    }
    if let Some(s) = &method.method {
        if regex {
            check_regex(v, &format!("{mat}.method"), s);
        } else if !is_grpc_method(s) {
            v.error(FieldError::invalid(
                format!("{mat}.method"),
                s,
                "must be a gRPC method name (letters, digits and '_', not starting with a digit)",
            ));
        }
    }
    // Two expressions each within Envoy's bounds can be past them together: the
    // path expression Envoy runs is checked as a whole.
    if regex && v.errors.len() == errors_before {
        let path = grpc_path_regex(method.service.as_deref(), method.method.as_deref());
        check_regex(v, mat, &path);
    }
}

// ---- the two filter types: a rule's and a backendRef's ----

impl RouteFilter for GrpcRouteRulesFilters {
    fn fields(&self) -> FilterFields<'_> {
        FilterFields {
            request_headers: self
                .request_header_modifier
                .as_ref()
                .map(|m| HeaderModifier {
                    set: headers(&m.set, |h| (h.name.as_str(), h.value.as_str())),
                    add: headers(&m.add, |h| (h.name.as_str(), h.value.as_str())),
                    remove: names(&m.remove),
                }),
            response_headers: self
                .response_header_modifier
                .as_ref()
                .map(|m| HeaderModifier {
                    set: headers(&m.set, |h| (h.name.as_str(), h.value.as_str())),
                    add: headers(&m.add, |h| (h.name.as_str(), h.value.as_str())),
                    remove: names(&m.remove),
                }),
            mirror: self.request_mirror.as_ref().map(|m| MirrorFields {
                port: m.backend_ref.port,
                percent: m.percent,
                fraction: m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
            }),
            ..FilterFields::default()
        }
    }
}

impl RouteFilter for GrpcRouteRulesBackendRefsFilters {
    fn fields(&self) -> FilterFields<'_> {
        FilterFields {
            request_headers: self
                .request_header_modifier
                .as_ref()
                .map(|m| HeaderModifier {
                    set: headers(&m.set, |h| (h.name.as_str(), h.value.as_str())),
                    add: headers(&m.add, |h| (h.name.as_str(), h.value.as_str())),
                    remove: names(&m.remove),
                }),
            response_headers: self
                .response_header_modifier
                .as_ref()
                .map(|m| HeaderModifier {
                    set: headers(&m.set, |h| (h.name.as_str(), h.value.as_str())),
                    add: headers(&m.add, |h| (h.name.as_str(), h.value.as_str())),
                    remove: names(&m.remove),
                }),
            mirror: self.request_mirror.as_ref().map(|m| MirrorFields {
                port: m.backend_ref.port,
                percent: m.percent,
                fraction: m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
            }),
            ..FilterFields::default()
        }
    }
}
