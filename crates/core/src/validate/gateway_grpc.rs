//! The rules of a GRPCRoute: its method matches (gRPC names, or RE2 expressions checked as the
//! path expression Envoy runs), and the hostnames, header matches, filters and backends it
//! shares with HTTPRoute.

use gateway_api::apis::standard::grpcroutes::{GrpcRoute, GrpcRouteRulesMatchesMethodType};

use super::*;

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
    validate_hostnames(&mut v, r.spec.hostnames.iter().flatten());
    validate_parent_refs(
        &mut v,
        r.spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| (p.port, p.section_name.as_deref())),
    );
    validate_rule_names(
        &mut v,
        r.spec.rules.iter().flatten().map(|r| r.name.as_ref()),
    );
    for (i, rule) in r.spec.rules.iter().flatten().enumerate() {
        let base = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().flatten().enumerate() {
            let at = format!("{base}.matches[{j}]");
            if let Some(method) = &m.method {
                let mat = format!("{at}.method");
                let regex = matches!(
                    method.r#type,
                    Some(GrpcRouteRulesMatchesMethodType::RegularExpression)
                );
                let errors_before = v.errors.len();
                if method.service.is_none() && method.method.is_none() {
                    v.error(FieldError::spec(
                        mat.clone(),
                        "must name a service, a method, or both",
                    ));
                }
                if let Some(s) = &method.service {
                    if regex {
                        check_regex(&mut v, &format!("{mat}.service"), s);
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
                        check_regex(&mut v, &format!("{mat}.method"), s);
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
                    check_regex(&mut v, &mat, &path);
                }
            }
            for (k, h) in m.headers.iter().flatten().enumerate() {
                let regex = matches!(
                    h.r#type,
                    Some(gateway_api::apis::standard::grpcroutes::GrpcRouteRulesMatchesHeadersType::RegularExpression)
                );
                validate_header_match(
                    &mut v,
                    &format!("{at}.headers[{k}]"),
                    &h.name,
                    &h.value,
                    regex,
                );
            }
        }
        for (k, f) in rule.filters.iter().flatten().enumerate() {
            grpc_filter!(&mut v, &format!("{base}.filters[{k}]"), f);
        }
        for (b, be) in rule.backend_refs.iter().flatten().enumerate() {
            let at = format!("{base}.backendRefs[{b}]");
            validate_backend_ref(
                &mut v,
                &at,
                be.group.as_deref(),
                be.kind.as_deref(),
                be.port,
                be.weight,
            );
            for (k, f) in be.filters.iter().flatten().enumerate() {
                grpc_filter!(&mut v, &format!("{at}.filters[{k}]"), f);
            }
        }
    }
    v
}
