//! HTTPRoutes of the Gateway API: their rules as routes (path (prefix, exact or regular
//! expression), header, query parameter and method matches, weighted Service backends, timeouts,
//! header filters, rewrites, redirects, mirrors and CORS), attached to sluice's Gateways by
//! [`super::gwroute`]. The rules are written down in `docs/gateway-api.md`.

use std::str::FromStr;

use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesFiltersRequestRedirectPathType,
    HttpRouteRulesFiltersRequestRedirectScheme, HttpRouteRulesFiltersType,
    HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatches,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType, HttpRouteSpec,
};

use super::gwroute::{
    GatewayRoute, OwnRule, RuleFilters, RuleMatch, unsupported_backend_filters,
    unsupported_value as no,
};
use super::model::{
    Cors, HeaderMatch, HeaderOp, PathMatch, QueryMatch, QueryOp, Redirect, Rewrite,
};
use crate::api::Kind;
use crate::api::gateway_route::RouteSpec;
use crate::validate::common::Timeout;
use crate::validate::gateway::validate_http_route_with;
use crate::validate::{FieldError, Verdict};

impl GatewayRoute for HttpRoute {
    const KIND: Kind = Kind::HttpRoute;
    type Spec = HttpRouteSpec;

    fn spec(&self) -> &HttpRouteSpec {
        &self.spec
    }

    fn validate(&self, v: Verdict, spec: &RouteSpec) -> Verdict {
        validate_http_route_with(v, self, spec)
    }

    fn unsupported(&self, spec: &RouteSpec) -> Vec<FieldError> {
        unsupported_in(self, spec)
    }

    /// Each rule's matches, and what its redirect, rewrite, CORS policy, timeouts and retries do.
    fn own_rules(&self) -> Vec<OwnRule> {
        let rules = self.spec.rules.iter().flatten();
        rules
            .map(|rule| OwnRule {
                matches: rule_matches(rule),
                filters: RuleFilters {
                    redirect: rule_redirect(rule),
                    rewrite: rule_rewrite(rule),
                    cors: rule_cors(rule),
                    timeout: rule_timeout(rule),
                    retry: rule_retry(rule),
                    ..RuleFilters::default()
                },
                ..OwnRule::default()
            })
            .collect()
    }
}

/// What the route uses that sluice does not route yet, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &HttpRoute) -> Vec<FieldError> {
    unsupported_in(route, &RouteSpec::read(&route.spec).unwrap_or_default())
}

/// [`unsupported`] of the route's shared fields read already.
fn unsupported_in(route: &HttpRoute, spec: &RouteSpec) -> Vec<FieldError> {
    let mut out = Vec::new();
    const PREFIX_MATCH: &str = "ReplacePrefixMatch replaces the prefix a PathPrefix match took; every match of the rule needs a PathPrefix path (or use ReplaceFullPath)";
    for (i, rule) in route.spec.rules.iter().flatten().enumerate() {
        let field = format!("spec.rules[{i}]");
        // Whether a match of the rule takes paths by something else than a prefix, which a
        // ReplacePrefixMatch (of a rewrite or a redirect) has nothing to replace in.
        let exact = (rule.matches.iter().flatten()).any(|m| {
            let t = m.path.as_ref().and_then(|p| p.r#type.as_ref());
            t.is_some_and(|t| *t != HttpRouteRulesMatchesPathType::PathPrefix)
        });
        for (j, f) in rule.filters.iter().flatten().enumerate() {
            match f.r#type {
                HttpRouteRulesFiltersType::RequestHeaderModifier
                | HttpRouteRulesFiltersType::ResponseHeaderModifier => {}
                HttpRouteRulesFiltersType::UrlRewrite => {
                    let path = f.url_rewrite.as_ref().and_then(|r| r.path.as_ref());
                    if exact
                        && path.is_some_and(|p| {
                            p.r#type == HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch
                        })
                    {
                        no(
                            &mut out,
                            format!("{field}.filters[{j}].urlRewrite.path.type"),
                            PREFIX_MATCH,
                        );
                    }
                }
                HttpRouteRulesFiltersType::RequestRedirect => {
                    let path = f.request_redirect.as_ref().and_then(|r| r.path.as_ref());
                    if exact
                        && path.is_some_and(|p| {
                            p.r#type
                                == HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch
                        })
                    {
                        no(
                            &mut out,
                            format!("{field}.filters[{j}].requestRedirect.path.type"),
                            PREFIX_MATCH,
                        );
                    }
                }
                HttpRouteRulesFiltersType::RequestMirror | HttpRouteRulesFiltersType::Cors => {}
                _ => no(
                    &mut out,
                    format!("{field}.filters[{j}].type"),
                    "sluice applies RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite and CORS filters; remove this one",
                ),
            }
        }
        if let Some(shared) = spec.rules.get(i) {
            unsupported_backend_filters(&mut out, &field, shared);
        }
        if rule.session_persistence.is_some() {
            no(
                &mut out,
                format!("{field}.sessionPersistence"),
                "sluice does not keep sessions on one backend yet; remove sessionPersistence (requests are balanced over the backends' endpoints)",
            );
        }
    }
    out
}

/// The rule's CORS policy: its first `CORS` filter's (the Gateway API allows one a rule). A
/// preflight's answer is kept 5 seconds when `maxAge` is not set, as the Gateway API asks.
fn rule_cors(rule: &HttpRouteRules) -> Option<Cors> {
    let c = (rule.filters.iter().flatten())
        .find(|f| f.r#type == HttpRouteRulesFiltersType::Cors)?
        .cors
        .as_ref()?;
    let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
    Some(Cors {
        allow_origins: list(&c.allow_origins),
        allow_methods: list(&c.allow_methods),
        allow_headers: list(&c.allow_headers),
        expose_headers: list(&c.expose_headers),
        max_age: c.max_age.unwrap_or(5),
        allow_credentials: c.allow_credentials == Some(true),
    })
}

/// The path, header and query parameter conditions of a rule's matches (one match of every
/// request when it has none).
fn rule_matches(rule: &HttpRouteRules) -> Vec<RuleMatch> {
    let matches = rule.matches.as_deref().unwrap_or(&[]);
    if matches.is_empty() {
        return vec![RuleMatch::everything()];
    }
    matches
        .iter()
        .map(|m| {
            let path = match &m.path {
                None => PathMatch::prefix("/"),
                Some(p) => {
                    let value = p.value.as_deref().filter(|v| !v.is_empty()).unwrap_or("/");
                    match p.r#type {
                        Some(HttpRouteRulesMatchesPathType::Exact) => {
                            PathMatch::Exact(value.into())
                        }
                        Some(HttpRouteRulesMatchesPathType::RegularExpression) => {
                            PathMatch::Regex(value.into())
                        }
                        _ => PathMatch::prefix(value),
                    }
                }
            };
            let mut headers: Vec<HeaderMatch> = (m.headers.iter().flatten())
                .map(|h| HeaderMatch {
                    name: h.name.to_ascii_lowercase(),
                    op: match h.r#type {
                        Some(HttpRouteRulesMatchesHeadersType::RegularExpression) => {
                            HeaderOp::Regex(h.value.clone())
                        }
                        _ => HeaderOp::Exact(h.value.clone()),
                    },
                })
                .collect();
            if let Some(method) = &m.method
                && let Ok(serde_json::Value::String(method)) = serde_json::to_value(method)
            {
                headers.push(HeaderMatch {
                    name: ":method".to_string(),
                    op: HeaderOp::Exact(method),
                });
            }
            RuleMatch {
                path,
                headers,
                query: query_matches(m),
            }
        })
        .collect()
}

/// The query parameter conditions of a match. Of entries with the same name only the first
/// counts, as the Gateway API asks (its schema lets no two through the API server).
fn query_matches(m: &HttpRouteRulesMatches) -> Vec<QueryMatch> {
    let mut out: Vec<QueryMatch> = Vec::new();
    for q in m.query_params.iter().flatten() {
        if out.iter().any(|o| o.name == q.name) {
            continue;
        }
        out.push(QueryMatch {
            name: q.name.clone(),
            op: match q.r#type {
                Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) => {
                    QueryOp::Regex(q.value.clone())
                }
                _ => QueryOp::Exact(q.value.clone()),
            },
        });
    }
    out
}

/// The redirect of a rule's `RequestRedirect` filter (the first, when it has more).
fn rule_redirect(rule: &HttpRouteRules) -> Option<Redirect> {
    let r = (rule.filters.iter().flatten()).find_map(|f| match f.r#type {
        HttpRouteRulesFiltersType::RequestRedirect => f.request_redirect.as_ref(),
        _ => None,
    })?;
    let of_type = |t| (r.path.as_ref()).filter(|p| p.r#type == t);
    Some(Redirect {
        scheme: r.scheme.as_ref().map(|s| {
            match s {
                HttpRouteRulesFiltersRequestRedirectScheme::Http => "http",
                HttpRouteRulesFiltersRequestRedirectScheme::Https => "https",
            }
            .to_string()
        }),
        hostname: r.hostname.clone().filter(|h| !h.is_empty()),
        port: r.port.and_then(|p| u32::try_from(p).ok()),
        path: of_type(HttpRouteRulesFiltersRequestRedirectPathType::ReplaceFullPath)
            .and_then(|p| p.replace_full_path.clone()),
        prefix: of_type(HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch)
            .map(|p| p.replace_prefix_match.clone().unwrap_or_else(|| "/".into())),
        // The Gateway API's default is 302.
        status: r
            .status_code
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| [301, 302, 303, 307, 308].contains(c))
            .unwrap_or(302),
    })
}

/// The rewrite of a rule's `URLRewrite` filter (the first, when it has more).
fn rule_rewrite(rule: &HttpRouteRules) -> Option<Rewrite> {
    let r = (rule.filters.iter().flatten()).find_map(|f| match f.r#type {
        HttpRouteRulesFiltersType::UrlRewrite => f.url_rewrite.as_ref(),
        _ => None,
    })?;
    let of_type = |t| (r.path.as_ref()).filter(|p| p.r#type == t);
    let rewrite = Rewrite {
        hostname: r.hostname.clone().filter(|h| !h.is_empty()),
        path: of_type(HttpRouteRulesFiltersUrlRewritePathType::ReplaceFullPath)
            .and_then(|p| p.replace_full_path.clone()),
        prefix: of_type(HttpRouteRulesFiltersUrlRewritePathType::ReplacePrefixMatch)
            .map(|p| p.replace_prefix_match.clone().unwrap_or_else(|| "/".into())),
    };
    (rewrite != Rewrite::default()).then_some(rewrite)
}

/// A rule's `timeouts.request` (zero: no timeout).
fn rule_timeout(rule: &HttpRouteRules) -> Option<Timeout> {
    let request = rule.timeouts.as_ref()?.request.as_deref()?;
    Some(match duration_of(request)? {
        std::time::Duration::ZERO => Timeout::Infinite,
        d => Timeout::After(d),
    })
}

/// A rule's `retry` and `timeouts.backendRequest`.
///
/// - `timeouts.backendRequest` alone: the time each request to a backend may take, as Envoy's
///   per-try timeout with no retries (a try that runs out answers 504).
/// - `retry`: up to `attempts` more tries (1 when unset, Envoy's default), on an answer with one
///   of `codes`, a connection failure, a refused stream or reset, or a try that ran out of its
///   `backendRequest` time; at least `backoff` apart. The whole request, tries included, stays
///   bounded by `timeouts.request`.
///
/// Zero, or none, `backendRequest`: no per-try bound.
fn rule_retry(rule: &HttpRouteRules) -> Option<crate::dag::RetryPolicy> {
    let backend = rule
        .timeouts
        .as_ref()
        .and_then(|t| t.backend_request.as_deref());
    let per_try_timeout = backend.and_then(duration_of).filter(|d| !d.is_zero());
    let Some(retry) = &rule.retry else {
        return per_try_timeout.map(|d| crate::dag::RetryPolicy::new(0, Some(d)));
    };
    let count = retry.attempts.map_or(1, |a| u32::try_from(a).unwrap_or(0));
    let codes = (retry.codes.iter().flatten())
        .filter_map(|c| u16::try_from(*c).ok())
        .collect::<std::collections::BTreeSet<_>>();
    Some(crate::dag::RetryPolicy {
        count,
        per_try_timeout,
        on: crate::dag::RetryOn::Codes(codes.into_iter().collect()),
        backoff: retry
            .backoff
            .as_deref()
            .and_then(duration_of)
            .filter(|d| !d.is_zero()),
    })
}

/// A Gateway API duration (`1h2m3s4ms`); None when it is not one (the webhook refuses those).
fn duration_of(text: &str) -> Option<std::time::Duration> {
    let d = gateway_api::Duration::from_str(text).ok()?;
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Some(std::time::Duration::from_nanos(nanos))
}
