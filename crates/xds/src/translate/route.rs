//! Route configurations: `ingress_http` (every host, TLS hosts redirecting to HTTPS) and one
//! `https/<host>` per TLS host (served only on that host's filter chain, so a TLS connection for one
//! host can never reach another host's routes).
//!
//! In `ingress_http`, the TLS hosts whose every plain-HTTP request gets the same 301 to HTTPS
//! ([`redirects_everything`]) share one virtual host, [`HTTPS_REDIRECT_VHOST`], that names them all
//! as its domains. Envoy's work on each update of the configuration (decoding, building and freeing
//! its route table) grows with the number of virtual hosts and routes, not of domains: a cluster
//! whose hosts mostly serve HTTPS costs Envoy one virtual host for all of them.
//!
//! With route shards (more than one, [`super::RouteShards`]), `ingress_http` is cut into
//! `ingress_http/<k>`: each exact host in the shard [`shard_of`] its name, each wildcard host and
//! the catch-all host in every shard (a request of any shard may match them), and the shared
//! redirect host of each shard naming that shard's hosts. An update of one exact host is an
//! update of one shard's configuration.

use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, RuntimeFractionalPercent,
    header_value_option::HeaderAppendAction,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy,
    Route as EnvoyRoute, RouteAction as EnvoyRouteAction, RouteConfiguration, RouteMatch,
    VirtualHost as EnvoyVhost, WeightedCluster as EnvoyWeightedCluster,
    header_matcher::HeaderMatchSpecifier,
    query_parameter_matcher::QueryParameterMatchSpecifier,
    redirect_action::{PathRewriteSpecifier, RedirectResponseCode, SchemeRewriteSpecifier},
    retry_policy,
    route::Action,
    route_action::{
        ClusterNotFoundResponseCode, ClusterSpecifier, HostRewriteSpecifier, RequestMirrorPolicy,
    },
    route_match::PathSpecifier,
    weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatchAndSubstitute, RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};

use super::wire_encode::{self, PathField, PlainAction};
use super::{duration, u32v};
use sluice_core::dag::{
    Cors, Dag, HeaderEdit, HeaderEdits, HeaderMatch, HeaderOp, INVALID_BACKEND_CLUSTER, Mirror,
    PathMatch, QueryMatch, QueryOp, Redirect, Route, RouteAction, VirtualHost,
};
use sluice_core::validate::common::Timeout;
use std::borrow::Cow;
use std::sync::LazyLock;

pub use super::http_shards::{
    HTTP_ROUTE_CONFIG, MAX_HTTP_ROUTE_SHARDS, ROUTE_SHARD_HEADER, http_route_config_name,
    shard_headers_to_remove, shard_lua, shard_of, shards_of,
};

/// What Envoy retries on when a route asks for retries.
pub const RETRY_ON: &str = "5xx,connect-failure,reset";
/// What an HTTPRoute rule's `retry` retries besides its status codes: connection failures,
/// refused streams, resets and tries that ran out of their per-try time (Envoy counts those as
/// resets).
pub const RETRY_ON_CONNECTION: &str = "connect-failure,refused-stream,reset";

/// Envoy's retry policy of a route's [`sluice_core::dag::RetryPolicy`].
fn build_retry_policy(p: &sluice_core::dag::RetryPolicy) -> RetryPolicy {
    let (retry_on, retriable_status_codes) = match &p.on {
        sluice_core::dag::RetryOn::Default => (RETRY_ON.to_string(), Vec::new()),
        sluice_core::dag::RetryOn::Codes(codes) if codes.is_empty() => {
            (RETRY_ON_CONNECTION.to_string(), Vec::new())
        }
        sluice_core::dag::RetryOn::Codes(codes) => (
            format!("retriable-status-codes,{RETRY_ON_CONNECTION}"),
            codes.iter().map(|c| u32::from(*c)).collect(),
        ),
    };
    RetryPolicy {
        retry_on,
        retriable_status_codes,
        num_retries: Some(u32v(p.count)),
        per_try_timeout: p.per_try_timeout.map(duration),
        // Envoy's exponential backoff starts at the base and is capped at ten times it (its
        // default ratio).
        retry_back_off: p.backoff.map(|b| retry_policy::RetryBackOff {
            base_interval: Some(duration(b)),
            max_interval: Some(duration(b.saturating_mul(10))),
        }),
        ..Default::default()
    }
}

/// Name of the route configuration of one TLS host's filter chain.
pub fn https_route_config_name(host: &str) -> String {
    format!("https/{host}")
}

/// Name of the virtual host of `ingress_http` shared by the hosts that [redirect every plain-HTTP
/// request to HTTPS](redirects_everything). No host can have this name (`_` is not allowed in host
/// names), so it never clashes with a host's own virtual host.
pub const HTTPS_REDIRECT_VHOST: &str = "https_redirect";

/// The HTTP route configuration: every host that routes HTTP, spread over `shards` shards
/// ([`shards_of`]), in shard order. Routes of TLS hosts answer 301 to HTTPS unless they permit
/// insecure requests. Virtual hosts are in name order: the hosts' own in the model's order, and
/// [`HTTPS_REDIRECT_VHOST`] where its name sorts among them. With more than one shard, each
/// configuration also removes [`ROUTE_SHARD_HEADER`] from the requests it routes.
pub fn build_http_route_configs(dag: &Dag, shards: u16) -> Vec<RouteConfiguration> {
    let fallback = dag.vhosts.get("*").map(|v| &**v);
    let n = usize::from(shards.max(1));
    let mut redirected: Vec<Vec<&str>> = vec![Vec::new(); n];
    let mut virtual_hosts: Vec<Vec<EnvoyVhost>> = if n == 1 {
        vec![Vec::with_capacity(dag.vhosts.len())]
    } else {
        vec![Vec::new(); n]
    };
    for v in dag.vhosts.values().filter(|v| v.serves_http()) {
        let range = shards_of(&v.host, shards);
        if redirects_everything(v) {
            for k in range {
                redirected[k].push(v.host.as_str());
            }
            continue;
        }
        let vhost = build_http_vhost(v, fallback);
        let (last, rest) = virtual_hosts[range].split_last_mut().expect("a shard");
        for shard in rest {
            shard.push(vhost.clone());
        }
        last.push(vhost);
    }
    (virtual_hosts.into_iter().zip(redirected).enumerate())
        .map(|(k, (mut virtual_hosts, redirected))| {
            if !redirected.is_empty() {
                let at = virtual_hosts.partition_point(|v| v.name.as_str() < HTTPS_REDIRECT_VHOST);
                virtual_hosts.insert(at, build_https_redirect_vhost(redirected));
            }
            RouteConfiguration {
                name: http_route_config_name(k, shards),
                virtual_hosts,
                request_headers_to_remove: shard_headers_to_remove(shards),
                ..Default::default()
            }
        })
        .collect()
}

/// One host of the HTTP route configuration (`fallback` is the model's `*` host, whose routes a
/// `*.suffix` host carries as well). Only hosts without a TCP proxy are in that configuration.
pub fn build_http_vhost(v: &VirtualHost, fallback: Option<&VirtualHost>) -> EnvoyVhost {
    let mut routes = Vec::with_capacity(v.routes.len());
    http_vhost_routes(v, fallback, |r, shape| {
        routes.push(build_http_route(r, shape))
    });
    EnvoyVhost {
        name: v.host.clone(),
        domains: vec![v.host.clone()],
        routes,
        ..Default::default()
    }
}

/// `build_http_vhost(v, fallback).encode_to_vec()`, byte for byte, without the message: its name
/// and its one domain ([`wire_encode::vhost_head`]), then each route as it is made. A virtual
/// host sets no other field. The routes nearly every host has ([`plain_route`]) are written
/// directly; the others are built and encoded by prost. Encoding the whole message measured
/// each route once more.
pub fn encode_http_vhost(v: &VirtualHost, fallback: Option<&VirtualHost>) -> Vec<u8> {
    let mut out = wire_encode::vhost_head(&v.host, v.routes.len());
    http_vhost_routes(v, fallback, |r, shape| put_route(r, shape, &mut out));
    out
}

/// `build_https_route_config(v)`: its name and its encoding, byte for byte, made as
/// [`encode_http_vhost`] makes a plain-HTTP virtual host.
pub fn encode_https_route_config(v: &VirtualHost) -> (String, Vec<u8>) {
    let mut vhost = wire_encode::vhost_head(&v.host, v.routes.len());
    for r in &v.routes {
        let shape = HttpShape::Own {
            host: &v.host,
            redirect: false,
        };
        put_route(r, shape, &mut vhost);
    }
    let name = https_route_config_name(&v.host);
    let out = wire_encode::route_config_of_one(&name, &vhost);
    (name, out)
}

/// Appends `build_http_route(r, shape)` as a route of a virtual host: directly when
/// [`plain_route`] takes it, else built and encoded by prost.
fn put_route(r: &Route, shape: HttpShape<'_>, out: &mut Vec<u8>) {
    match plain_route(r, shape) {
        Some(plain) => wire_encode::put_plain_route(plain.field, &plain.path, plain.action, out),
        None => wire_encode::put_route(&build_http_route(r, shape), out),
    }
}

/// Where a route of a virtual host comes from: a plain-HTTP virtual host of `ingress_http`, or
/// the one of a TLS host's own configuration (its own routes, none redirected).
#[derive(Clone, Copy)]
enum HttpShape<'a> {
    /// The host's own route: `host` is the virtual host's name; `redirect` when it answers 301
    /// to HTTPS (a TLS host's route that does not permit insecure requests).
    Own { host: &'a str, redirect: bool },
    /// A route of the catch-all host `*` at the end of the wildcard host `wildcard`.
    CatchAll { wildcard: &'a str },
}

/// The routes of a plain-HTTP virtual host, in order, each handed to `each` with its shape.
fn http_vhost_routes<'a>(
    v: &'a VirtualHost,
    fallback: Option<&'a VirtualHost>,
    mut each: impl FnMut(&'a Route, HttpShape<'a>),
) {
    for r in &v.routes {
        let redirect = v.tls.is_some() && !r.permit_insecure;
        each(
            r,
            HttpShape::Own {
                host: &v.host,
                redirect,
            },
        );
    }
    // Envoy's `*.foo.com` also takes `a.b.foo.com`; such requests belong to `*` unless a route
    // of the wildcard's that spans labels (the Gateway API's) took them, or a Gateway listener's
    // hostname takes the host (isolated). Its routes follow, restricted to hosts the wildcard
    // does not match in one label.
    if let (Some(fb), true) = (fallback, v.host.starts_with("*.") && !v.isolated) {
        for r in &fb.routes {
            each(r, HttpShape::CatchAll { wildcard: &v.host });
        }
    }
}

/// The Envoy route of one route of a virtual host ([`HttpShape`]).
fn build_http_route(r: &Route, shape: HttpShape<'_>) -> EnvoyRoute {
    match shape {
        HttpShape::Own { host, redirect } => {
            let action = if redirect {
                redirect_to_https()
            } else {
                build_action(r)
            };
            build_route(host, r, action)
        }
        HttpShape::CatchAll { wildcard } => {
            let mut route = build_route("*", r, build_action(r));
            if let Some(m) = route.r#match.as_mut() {
                let mut not_single = single_label_authority(wildcard);
                not_single.invert_match = true;
                m.headers.insert(0, not_single);
            }
            route
        }
    }
}

/// A route [`wire_encode::put_plain_route`] writes: its path and where the path goes, and its
/// action. The path is the route's own, or a string prefix with `//` merged.
struct PlainRoute<'a> {
    field: PathField,
    path: Cow<'a, str>,
    action: PlainAction<'a>,
}

/// `build_http_route(r, shape)` as a [`PlainRoute`], when the route is one nearly every host
/// has: a host's own route (not a wildcard's), no header conditions, and a 301 to HTTPS, a 503,
/// or one cluster with neither timeout nor retries; None for any other route. Building and
/// dropping the Envoy `Route` (2,272 bytes) for each of them took more than a quarter of a 10k
/// translation.
fn plain_route<'a>(r: &'a Route, shape: HttpShape<'_>) -> Option<PlainRoute<'a>> {
    let HttpShape::Own { host, redirect } = shape else {
        return None;
    };
    if host.starts_with("*.") || !r.headers.is_empty() || r.extras.is_some() {
        return None;
    }
    let action = if redirect {
        PlainAction::Fixed(&REDIRECT)
    } else {
        plain_action(r)?
    };
    let (field, path) = match &r.path {
        PathMatch::Exact(p) => (PathField::Path, Cow::Borrowed(&**p)),
        PathMatch::Prefix(p) if &**p == "/" => (PathField::Prefix, Cow::Borrowed("/")),
        PathMatch::Prefix(p) => (PathField::PathSeparatedPrefix, Cow::Borrowed(&**p)),
        PathMatch::StringPrefix(p) if p.contains("//") => {
            (PathField::Prefix, Cow::Owned(merge_slashes(p)))
        }
        PathMatch::StringPrefix(p) => (PathField::Prefix, Cow::Borrowed(&**p)),
        PathMatch::Regex(_) => return None,
    };
    Some(PlainRoute {
        field,
        path,
        action,
    })
}

/// The encoded actions of [`plain_route`]s: a 301 to HTTPS, a 503, a 500.
static REDIRECT: LazyLock<Vec<u8>> =
    LazyLock::new(|| wire_encode::action_bytes(redirect_to_https()));
static UNAVAILABLE: LazyLock<Vec<u8>> = LazyLock::new(|| wire_encode::action_bytes(unavailable()));
static INVALID: LazyLock<Vec<u8>> = LazyLock::new(|| wire_encode::action_bytes(invalid()));

/// The action of a host's own route that is not redirected, when [`plain_route`] can write it.
fn plain_action(r: &Route) -> Option<PlainAction<'_>> {
    Some(match &r.action {
        RouteAction::Unavailable(_) => PlainAction::Fixed(&UNAVAILABLE),
        RouteAction::Invalid(_) => PlainAction::Fixed(&INVALID),
        RouteAction::Redirect(_) => return None,
        RouteAction::Forward(cs) => {
            let mut live = cs.iter().filter(|c| c.weight > 0);
            match (live.next(), live.next()) {
                (None, _) => PlainAction::Fixed(&UNAVAILABLE),
                (Some(one), None) if r.timeout.is_none() && r.retry.is_none() => {
                    PlainAction::Cluster(&one.cluster)
                }
                _ => return None,
            }
        }
    })
}

/// Whether every plain-HTTP request for this host gets the same answer, a 301 to HTTPS: a TLS host
/// (not a wildcard or the catch-all host, whose virtual hosts carry more than their own routes)
/// none of whose routes permits insecure requests, one of which matches every request (path
/// prefix `/`, no header conditions). Such a host's own virtual host would be a list of the same
/// redirect; it is one of the domains of [`HTTPS_REDIRECT_VHOST`] instead, with the same effect.
pub fn redirects_everything(v: &VirtualHost) -> bool {
    v.tls.is_some()
        && v.tcp_proxy.is_none()
        && !v.host.starts_with('*')
        && v.routes.iter().all(|r| !r.permit_insecure)
        && v.routes
            .iter()
            .any(|r| r.headers.is_empty() && r.query().is_empty() && r.path.is_catch_all())
}

/// The virtual host of the hosts that [redirect everything](redirects_everything): one route, a
/// 301 to HTTPS for every request. `hosts` in the model's order.
pub fn build_https_redirect_vhost<'a>(hosts: impl IntoIterator<Item = &'a str>) -> EnvoyVhost {
    EnvoyVhost {
        name: HTTPS_REDIRECT_VHOST.to_string(),
        domains: hosts.into_iter().map(str::to_string).collect(),
        routes: vec![EnvoyRoute {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                ..Default::default()
            }),
            action: Some(redirect_to_https()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The route configuration of one TLS host's filter chain.
pub fn build_https_route_config(v: &VirtualHost) -> RouteConfiguration {
    RouteConfiguration {
        name: https_route_config_name(&v.host),
        virtual_hosts: vec![EnvoyVhost {
            name: v.host.clone(),
            domains: vec![v.host.clone()],
            routes: v
                .routes
                .iter()
                .map(|r| build_route(&v.host, r, build_action(r)))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn build_route(host: &str, r: &Route, action: Action) -> EnvoyRoute {
    let path_specifier = match &r.path {
        PathMatch::Exact(p) => PathSpecifier::Path(String::from(&**p)),
        PathMatch::Prefix(p) if &**p == "/" => PathSpecifier::Prefix("/".to_string()),
        PathMatch::Prefix(p) => PathSpecifier::PathSeparatedPrefix(String::from(&**p)),
        // Envoy merges slashes in request paths before routing: a prefix with `//` could
        // never match, so it is merged the same way.
        PathMatch::StringPrefix(p) => PathSpecifier::Prefix(merge_slashes(p)),
        // Envoy matches the whole path, without its query, after merging slashes.
        PathMatch::Regex(re) => PathSpecifier::SafeRegex(RegexMatcher {
            regex: String::from(&**re),
            ..Default::default()
        }),
    };
    let mut headers = Vec::new();
    if host.starts_with("*.") && !r.wildcard_spans_labels() {
        headers.push(single_label_authority(host));
    }
    headers.extend(r.headers.iter().map(build_header_matcher));
    let mut route = EnvoyRoute {
        r#match: Some(RouteMatch {
            headers,
            query_parameters: r.query().iter().map(build_query_matcher).collect(),
            path_specifier: Some(path_specifier),
            ..Default::default()
        }),
        action: Some(action),
        ..Default::default()
    };
    if let Some(cors) = r.cors() {
        route
            .typed_per_filter_config
            .insert(CORS_FILTER.to_string(), super::any(&build_cors(cors)));
    }
    if let Some(edits) = r.headers_edit() {
        (
            route.request_headers_to_add,
            route.request_headers_to_remove,
            route.response_headers_to_add,
            route.response_headers_to_remove,
        ) = header_fields(edits);
    }
    route
}

/// The name of Envoy's CORS filter, which every HTTP connection manager of sluice's has; a
/// route's policy is its configuration for that route.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";

/// A route's CORS policy as Envoy's. Envoy answers a preflight (`OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`) from an allowed origin itself, with the policy's headers and
/// `Access-Control-Allow-Origin` set to the request's origin; a preflight from another origin is
/// answered without them (not forwarded to the backend, so that no backend answers it by
/// accident); other requests from an allowed origin get `Access-Control-Allow-Origin`,
/// `-Allow-Credentials` and `-Expose-Headers` added to their answers.
fn build_cors(c: &Cors) -> CorsPolicy {
    let join = |l: &[String]| l.join(",");
    CorsPolicy {
        allow_origin_string_match: c.allow_origins.iter().map(|o| origin_matcher(o)).collect(),
        allow_methods: join(&c.allow_methods),
        allow_headers: join(&c.allow_headers),
        expose_headers: join(&c.expose_headers),
        max_age: c.max_age.to_string(),
        allow_credentials: c.allow_credentials.then(|| super::boolv(true)),
        forward_not_matching_preflights: Some(super::boolv(false)),
        ..Default::default()
    }
}

/// An allowed origin as Envoy matches it against a request's `Origin`: `*` any origin, a host
/// starting with `*` any labels in its place (the Gateway API's wildcard reaches to the left
/// over any number of labels), any other origin itself; the scheme and host in any letter case.
fn origin_matcher(origin: &str) -> StringMatcher {
    let safe_regex = |regex: String| StringMatcher {
        match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
            regex,
            ..Default::default()
        })),
        ignore_case: false,
    };
    if origin == "*" {
        return safe_regex(".*".to_string());
    }
    match origin.split_once("://") {
        Some((scheme, host)) if host.starts_with('*') => safe_regex(format!(
            "(?i){}://[^/:]+{}",
            regex::escape(scheme),
            regex::escape(&host[1..])
        )),
        _ => StringMatcher {
            match_pattern: Some(MatchPattern::Exact(origin.to_string())),
            ignore_case: true,
        },
    }
}

/// Envoy's four header fields of [`HeaderEdits`], as a route and a weighted cluster both name
/// them: requests' headers to add and to remove, then answers'.
type HeaderFields = (
    Vec<HeaderValueOption>,
    Vec<String>,
    Vec<HeaderValueOption>,
    Vec<String>,
);

fn header_fields(edits: &HeaderEdits) -> HeaderFields {
    (
        header_options(&edits.request),
        edits.request.remove.clone(),
        header_options(&edits.response),
        edits.response.remove.clone(),
    )
}

/// The headers a [`HeaderEdit`] sets and adds, as Envoy's options. Envoy reads `%` in a
/// header value as the start of a command (`%DOWNSTREAM_REMOTE_ADDRESS%`); the values are
/// literal text, so each `%` is doubled.
fn header_options(edit: &HeaderEdit) -> Vec<HeaderValueOption> {
    let option = |(name, value): &(String, String), action: HeaderAppendAction| HeaderValueOption {
        header: Some(HeaderValue {
            key: name.clone(),
            value: value.replace('%', "%%"),
            ..Default::default()
        }),
        append_action: action as i32,
        ..Default::default()
    };
    (edit
        .set
        .iter()
        .map(|h| option(h, HeaderAppendAction::OverwriteIfExistsOrAdd)))
    .chain((edit.add.iter()).map(|h| option(h, HeaderAppendAction::AppendIfExistsOrAdd)))
    .collect()
}

/// A redirect of the Gateway API's `RequestRedirect`.
/// The redirect of a route that matched `matched`.
fn build_redirect(r: &Redirect, matched: &PathMatch) -> Action {
    let response_code = match r.status {
        302 => RedirectResponseCode::Found,
        303 => RedirectResponseCode::SeeOther,
        307 => RedirectResponseCode::TemporaryRedirect,
        308 => RedirectResponseCode::PermanentRedirect,
        _ => RedirectResponseCode::MovedPermanently,
    };
    Action::Redirect(RedirectAction {
        host_redirect: r.hostname.clone().unwrap_or_default(),
        port_redirect: r.port.unwrap_or(0),
        response_code: response_code as i32,
        scheme_rewrite_specifier: r.scheme.clone().map(SchemeRewriteSpecifier::SchemeRedirect),
        path_rewrite_specifier: match (&r.prefix, matched) {
            (Some(to), PathMatch::Prefix(prefix)) => Some(PathRewriteSpecifier::RegexRewrite(
                prefix_rewrite(prefix, to),
            )),
            _ => r.path.clone().map(PathRewriteSpecifier::PathRedirect),
        },
        ..Default::default()
    })
}

pub use sluice_core::dag::lookup::merge_slashes;

/// `:authority` is one label followed by the wildcard's suffix (any case, optional port).
fn single_label_authority(wildcard_host: &str) -> HeaderMatcher {
    let suffix = wildcard_host.trim_start_matches('*');
    HeaderMatcher {
        name: ":authority".to_string(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
                regex: format!("(?i)[^.:]+{}(:[0-9]+)?", regex::escape(suffix)),
                ..Default::default()
            })),
            ignore_case: false,
        })),
        ..Default::default()
    }
}

/// A header condition. Values are matched literally (`%` has no meaning in matchers).
pub fn build_header_matcher(h: &HeaderMatch) -> HeaderMatcher {
    let string = |p: MatchPattern| {
        Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(p),
            ignore_case: false,
        }))
    };
    let (spec, invert, missing_as_empty) = match &h.op {
        HeaderOp::Exact(v) => (string(MatchPattern::Exact(v.clone())), false, false),
        HeaderOp::Contains(v) => (string(MatchPattern::Contains(v.clone())), false, false),
        // An absent header does not contain the text either: treat it as empty, then invert.
        HeaderOp::NotContains(v) => (string(MatchPattern::Contains(v.clone())), true, true),
        HeaderOp::Present => (Some(HeaderMatchSpecifier::PresentMatch(true)), false, false),
        HeaderOp::Absent => (Some(HeaderMatchSpecifier::PresentMatch(true)), true, false),
        HeaderOp::Regex(re) => (
            string(MatchPattern::SafeRegex(RegexMatcher {
                regex: re.clone(),
                ..Default::default()
            })),
            false,
            false,
        ),
    };
    HeaderMatcher {
        name: h.name.clone(),
        invert_match: invert,
        treat_missing_header_as_empty: missing_as_empty,
        header_match_specifier: spec,
    }
}

/// Envoy's matcher of a query parameter condition: the first value of the name, compared as it
/// is written in the request.
fn build_query_matcher(q: &QueryMatch) -> QueryParameterMatcher {
    let pattern = match &q.op {
        QueryOp::Exact(v) => MatchPattern::Exact(v.clone()),
        QueryOp::Regex(re) => MatchPattern::SafeRegex(RegexMatcher {
            regex: re.clone(),
            ..Default::default()
        }),
    };
    QueryParameterMatcher {
        name: q.name.clone(),
        query_parameter_match_specifier: Some(QueryParameterMatchSpecifier::StringMatch(
            StringMatcher {
                match_pattern: Some(pattern),
                ignore_case: false,
            },
        )),
    }
}

/// Envoy's policy of a [`Mirror`]: every request, or a share in millionths. Envoy sends the
/// copy with `-shadow` appended to its `Host`, which tells a mirror's backend the copies from the
/// requests it serves itself.
fn build_mirror(m: &Mirror) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster: String::from(&*m.cluster),
        runtime_fraction: (m.per_million < 1_000_000).then(|| RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator: m.per_million,
                denominator: DenominatorType::Million as i32,
            }),
            runtime_key: String::new(),
        }),
        ..Default::default()
    }
}

fn redirect_to_https() -> Action {
    Action::Redirect(RedirectAction {
        response_code: RedirectResponseCode::MovedPermanently as i32,
        scheme_rewrite_specifier: Some(SchemeRewriteSpecifier::HttpsRedirect(true)),
        ..Default::default()
    })
}

fn unavailable() -> Action {
    Action::DirectResponse(DirectResponseAction {
        status: 503,
        ..Default::default()
    })
}

/// A virtual host answering every request for `domain` with 421 Misdirected Request: on a TLS
/// connection whose SNI picked another listener than the request's Host does (RFC 9110
/// 15.5.20), so the client retries on a connection of its own for that host.
pub fn build_misdirected_vhost(domain: &str) -> EnvoyVhost {
    EnvoyVhost {
        name: format!("misdirected/{domain}"),
        domains: vec![domain.to_string()],
        routes: vec![EnvoyRoute {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                ..Default::default()
            }),
            action: Some(Action::DirectResponse(DirectResponseAction {
                status: 421,
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The answer of a route with no valid backend (Gateway API).
fn invalid() -> Action {
    Action::DirectResponse(DirectResponseAction {
        status: 500,
        ..Default::default()
    })
}

/// The rewrite of the segment-wise prefix `matched` (a route's PathPrefix, which every path it
/// takes starts with, then a `/` or nothing) by `to`: `/foo` → `/bar` takes `/foo/x` to
/// `/bar/x` and `/foo` to `/bar`; `/foo` → `/` takes `/foo/x` to `/x` and `/foo` to `/`. Only
/// the path is rewritten; the query string stays.
fn prefix_rewrite(matched: &str, to: &str) -> RegexMatchAndSubstitute {
    let matched = regex::escape(matched.trim_end_matches('/'));
    let to = to.trim_end_matches('/');
    let (regex, substitution) = match to.is_empty() {
        // The prefix and the `/` after it become one `/`.
        true => (format!("^{matched}/?"), "/".to_string()),
        // A `\` in the new prefix is literal, not a reference to a group.
        false => (format!("^{matched}"), to.replace('\\', "\\\\")),
    };
    RegexMatchAndSubstitute {
        pattern: Some(RegexMatcher {
            regex,
            ..Default::default()
        }),
        substitution,
    }
}

fn build_action(r: &Route) -> Action {
    let clusters = match &r.action {
        RouteAction::Unavailable(_) => return unavailable(),
        RouteAction::Invalid(_) => return invalid(),
        RouteAction::Redirect(redirect) => return build_redirect(redirect, &r.path),
        RouteAction::Forward(cs) => cs,
    };
    // Each backend with its header changes, if any (filters on a Gateway API backendRef).
    let live: Vec<_> = (clusters.iter().enumerate())
        .filter(|(_, c)| c.weight > 0)
        .map(|(k, c)| (c, r.backend_edits(k)))
        .collect();
    let specifier = match live.as_slice() {
        [] => return unavailable(),
        [(one, None)] => ClusterSpecifier::Cluster(String::from(&*one.cluster)),
        many => ClusterSpecifier::WeightedClusters(EnvoyWeightedCluster {
            clusters: many
                .iter()
                .map(|(c, edits)| {
                    let mut weighted = ClusterWeight {
                        name: String::from(&*c.cluster),
                        weight: Some(u32v(c.weight)),
                        ..Default::default()
                    };
                    if let Some(e) = edits {
                        (
                            weighted.request_headers_to_add,
                            weighted.request_headers_to_remove,
                            weighted.response_headers_to_add,
                            weighted.response_headers_to_remove,
                        ) = header_fields(e);
                    }
                    weighted
                })
                .collect(),
            ..Default::default()
        }),
    };
    let timeout = r.timeout.as_ref().map(|t| match t {
        Timeout::Infinite => duration(std::time::Duration::ZERO),
        Timeout::After(d) => duration(*d),
    });
    let retry_policy = r.retry.as_ref().map(build_retry_policy);
    let mut action = EnvoyRouteAction {
        cluster_specifier: Some(specifier),
        timeout,
        retry_policy,
        request_mirror_policies: r.mirrors().iter().map(build_mirror).collect(),
        ..Default::default()
    };
    if live
        .iter()
        .any(|(c, _)| &*c.cluster == INVALID_BACKEND_CLUSTER)
    {
        // An HTTPRoute's invalid backend's share answers 500 (its cluster is nowhere).
        action.cluster_not_found_response_code =
            ClusterNotFoundResponseCode::InternalServerError as i32;
    }
    if let Some(rewrite) = r.rewrite() {
        action.host_rewrite_specifier =
            (rewrite.hostname.clone()).map(HostRewriteSpecifier::HostRewriteLiteral);
        // The whole path: every path the route takes becomes this one (a `\` in it is
        // literal, not a reference to a group).
        action.regex_rewrite = rewrite.path.as_ref().map(|path| RegexMatchAndSubstitute {
            pattern: Some(RegexMatcher {
                regex: "^.*$".to_string(),
                ..Default::default()
            }),
            substitution: path.replace('\\', "\\\\"),
        });
        if let (Some(to), PathMatch::Prefix(matched)) = (&rewrite.prefix, &r.path) {
            action.regex_rewrite = Some(prefix_rewrite(matched, to));
        }
    }
    Action::Route(action)
}
