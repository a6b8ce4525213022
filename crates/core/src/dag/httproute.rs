//! HTTPRoutes of the Gateway API: their rules as routes (path (prefix, exact or regular
//! expression), header, query parameter and method matches, weighted Service backends, timeouts,
//! header filters, rewrites, redirects, mirrors and CORS), attached to sluice's Gateways by
//! [`super::gwroute`]. The rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;
use std::str::FromStr;

use gateway_api::apis::experimental::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesBackendRefsFiltersType, HttpRouteRulesFilters,
    HttpRouteRulesFiltersRequestRedirectPathType, HttpRouteRulesFiltersRequestRedirectScheme,
    HttpRouteRulesFiltersType, HttpRouteRulesFiltersUrlRewritePathType, HttpRouteRulesMatches,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};

use super::Builder;
use super::gateway_acc::GatewayAcc;
use super::gateway_common::cond;
use super::gwroute::{
    BackendIn, GatewayRoute, MirrorIn, ParentIn, ReadyRoute, RouteHead, RouteIn, RuleFilters,
    RuleIn, RuleMatch, attach_route, filter_edits, mirror_share,
};
use super::model::{
    Cors, HeaderMatch, HeaderOp, PathMatch, QueryMatch, QueryOp, Redirect, Rewrite,
};
use crate::api::{Kind, ObjKey};
use crate::store::{Prepare, Prepared, Snapshot};
use crate::validate::FieldError;
use crate::validate::common::Timeout;
use crate::validate::gateway::validate_http_route;

impl Prepare for HttpRoute {
    type Ready = ReadyRoute;

    fn prepare(_key: &ObjKey, route: &Self) -> ReadyRoute {
        ReadyRoute::new(validate_http_route(route).errors, || unsupported(route))
    }
}

impl GatewayRoute for HttpRoute {
    const KIND: Kind = Kind::HttpRoute;

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

/// An HTTPRoute's rule in the shape of every route kind's.
fn rule_in(rule: &HttpRouteRules) -> RuleIn<'_> {
    let filters = rule.filters.as_deref().unwrap_or(&[]);
    RuleIn {
        matches: rule_matches(rule),
        filters: RuleFilters {
            edits: filter_edits(filters),
            redirect: rule_redirect(rule),
            rewrite: rule_rewrite(rule),
            cors: rule_cors(rule),
            timeout: rule_timeout(rule),
            retry: rule_retry(rule),
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
fn rule_mirrors(filters: &[HttpRouteRulesFilters]) -> Vec<MirrorIn<'_>> {
    let mirrors = filters
        .iter()
        .filter(|f| f.r#type == HttpRouteRulesFiltersType::RequestMirror);
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

/// One HTTPRoute: attaches it to the listeners of sluice's Gateways it names, and adds its rules.
pub(super) fn http_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    key: &ObjKey,
    route: &Prepared<HttpRoute>,
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
pub fn unsupported(route: &HttpRoute) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut no = |path: String, message: &str| {
        out.push(FieldError::new(path, cond::UNSUPPORTED_VALUE, message));
    };
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
                            format!("{field}.filters[{j}].requestRedirect.path.type"),
                            PREFIX_MATCH,
                        );
                    }
                }
                HttpRouteRulesFiltersType::RequestMirror | HttpRouteRulesFiltersType::Cors => {}
                _ => no(
                    format!("{field}.filters[{j}].type"),
                    "sluice applies RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite and CORS filters; remove this one",
                ),
            }
        }
        for (j, r) in rule.backend_refs.iter().flatten().enumerate() {
            for (k, f) in r.filters.iter().flatten().enumerate() {
                if !matches!(
                    f.r#type,
                    HttpRouteRulesBackendRefsFiltersType::RequestHeaderModifier
                        | HttpRouteRulesBackendRefsFiltersType::ResponseHeaderModifier
                ) {
                    no(
                        format!("{field}.backendRefs[{j}].filters[{k}].type"),
                        super::gwroute::BACKEND_FILTERS_ROUTED,
                    );
                }
            }
        }
        if rule.session_persistence.is_some() {
            no(
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
