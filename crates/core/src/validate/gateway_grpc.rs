//! The rules of a GRPCRoute: its method matches (gRPC names, or RE2 expressions checked as the
//! path expression Envoy runs), and the hostnames, header matches, filters and backends it
//! shares with HTTPRoute ([`super::routes::validate_route`]).

use gateway_api::apis::standard::grpcroutes::{
    GrpcRoute, GrpcRouteRules, GrpcRouteRulesMatches, GrpcRouteRulesMatchesHeadersType,
    GrpcRouteRulesMatchesMethod, GrpcRouteRulesMatchesMethodType,
};

use super::routes::{KindChecks, read_spec, validate_header_match, validate_route};
use crate::api::gateway_route::RouteSpec;
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
    let mut v = Verdict::default();
    let spec = read_spec(&mut v, &r.spec);
    validate_grpc_route_with(v, r, &spec)
}

/// [`validate_grpc_route`] of the route's shared fields read already (`v` holds what reading
/// them found).
pub fn validate_grpc_route_with(v: Verdict, r: &GrpcRoute, spec: &RouteSpec) -> Verdict {
    validate_route(v, spec, &Rules(r.spec.rules.as_deref().unwrap_or_default()))
}

/// A GRPCRoute's rules, for the checks of their method matches.
struct Rules<'a>(&'a [GrpcRouteRules]);

impl KindChecks for Rules<'_> {
    fn matches(&self, v: &mut Verdict, i: usize, base: &str) {
        let matches = self.0.get(i).and_then(|r| r.matches.as_deref());
        for (j, m) in matches.unwrap_or_default().iter().enumerate() {
            validate_match(v, &format!("{base}.matches[{j}]"), m);
        }
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
