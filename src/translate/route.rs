//! Route configurations: `ingress_http` (every host, TLS hosts redirecting to HTTPS) and one
//! `https/<host>` per TLS host (served only on that host's filter chain, so a TLS connection for one
//! host can never reach another host's routes).
//!
//! In `ingress_http`, the TLS hosts whose every plain-HTTP request gets the same 301 to HTTPS
//! ([`redirects_everything`]) share one virtual host, [`HTTPS_REDIRECT_VHOST`], that names them all
//! as its domains. Envoy's work on each update of the configuration (decoding, building and freeing
//! its route table) grows with the number of virtual hosts and routes, not of domains: a cluster
//! whose hosts mostly serve HTTPS costs Envoy one virtual host for all of them.

use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, RedirectAction, RetryPolicy, Route as EnvoyRoute,
    RouteAction as EnvoyRouteAction, RouteConfiguration, RouteMatch, VirtualHost as EnvoyVhost,
    WeightedCluster as EnvoyWeightedCluster,
    header_matcher::HeaderMatchSpecifier,
    redirect_action::{RedirectResponseCode, SchemeRewriteSpecifier},
    route::Action,
    route_action::ClusterSpecifier,
    route_match::PathSpecifier,
    weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};

use super::{duration, u32v};
use crate::dag::{Dag, HeaderMatch, HeaderOp, PathMatch, Route, RouteAction, VirtualHost};
use crate::validate::common::Timeout;
use crate::xds::wire::{put_string, string_len};

/// Name of the route configuration of the plain HTTP listener.
pub const HTTP_ROUTE_CONFIG: &str = "ingress_http";

/// What Envoy retries on when a route asks for retries.
pub const RETRY_ON: &str = "5xx,connect-failure,reset";

/// Name of the route configuration of one TLS host's filter chain.
pub fn https_route_config_name(host: &str) -> String {
    format!("https/{host}")
}

/// Name of the virtual host of `ingress_http` shared by the hosts that [redirect every plain-HTTP
/// request to HTTPS](redirects_everything). No host can have this name (`_` is not allowed in host
/// names), so it never clashes with a host's own virtual host.
pub const HTTPS_REDIRECT_VHOST: &str = "https_redirect";

/// The HTTP route configuration: every host that routes HTTP. Routes of TLS hosts answer 301 to
/// HTTPS unless they permit insecure requests. Virtual hosts are in name order: the hosts' own in
/// the model's order, and [`HTTPS_REDIRECT_VHOST`] where its name sorts among them.
pub fn build_http_route_config(dag: &Dag) -> RouteConfiguration {
    let fallback = dag.vhosts.get("*").map(|v| &**v);
    let mut redirected = Vec::new();
    let mut virtual_hosts = super::collect_sized(
        dag.vhosts.len(),
        dag.vhosts
            .values()
            .filter(|v| v.tcp_proxy.is_none())
            .filter(|v| {
                let shared = redirects_everything(v);
                if shared {
                    redirected.push(v.host.as_str());
                }
                !shared
            })
            .map(|v| build_http_vhost(v, fallback)),
    );
    if !redirected.is_empty() {
        let at = virtual_hosts.partition_point(|v| v.name.as_str() < HTTPS_REDIRECT_VHOST);
        virtual_hosts.insert(at, build_https_redirect_vhost(redirected));
    }
    RouteConfiguration {
        name: HTTP_ROUTE_CONFIG.to_string(),
        virtual_hosts,
        ..Default::default()
    }
}

/// One host of the HTTP route configuration (`fallback` is the model's `*` host, whose routes a
/// `*.suffix` host carries as well). Only hosts without a TCP proxy are in that configuration.
pub fn build_http_vhost(v: &VirtualHost, fallback: Option<&VirtualHost>) -> EnvoyVhost {
    let mut routes = Vec::with_capacity(v.routes.len());
    http_vhost_routes(v, fallback, |r| routes.push(r));
    EnvoyVhost {
        name: v.host.clone(),
        domains: vec![v.host.clone()],
        routes,
        ..Default::default()
    }
}

/// `build_http_vhost(v, fallback).encode_to_vec()`, byte for byte, without the message: its name
/// (field 1) and its one domain (field 2) written here, then each route encoded by prost (field
/// 3) as it is made. prost writes a message's fields in the order of their numbers, and a virtual
/// host sets no other field. Encoding the whole message measured each route once more.
pub fn encode_http_vhost(v: &VirtualHost, fallback: Option<&VirtualHost>) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint};
    let host = v.host.as_str();
    let mut out = Vec::with_capacity(2 * string_len(1, host) + 2 + 96 * v.routes.len());
    put_string(1, host, &mut out);
    // The one domain: an entry of a list, written even when empty.
    encode_key(2, WireType::LengthDelimited, &mut out);
    encode_varint(host.len() as u64, &mut out);
    out.extend_from_slice(host.as_bytes());
    http_vhost_routes(v, fallback, |r| {
        prost::encoding::message::encode(3, &r, &mut out)
    });
    out
}

/// The routes of a plain-HTTP virtual host, in order, each handed to `each`.
fn http_vhost_routes(
    v: &VirtualHost,
    fallback: Option<&VirtualHost>,
    mut each: impl FnMut(EnvoyRoute),
) {
    for r in &v.routes {
        let action = if v.tls.is_some() && !r.permit_insecure {
            redirect_to_https()
        } else {
            build_action(r)
        };
        each(build_route(&v.host, r, action));
    }
    // Envoy's `*.foo.com` also takes `a.b.foo.com`; such requests belong to `*`. Its routes
    // follow, restricted to hosts the wildcard does not match.
    if let (Some(fb), true) = (fallback, v.host.starts_with("*.")) {
        for r in &fb.routes {
            let mut route = build_route("*", r, build_action(r));
            if let Some(m) = route.r#match.as_mut() {
                let mut not_single = single_label_authority(&v.host);
                not_single.invert_match = true;
                m.headers.insert(0, not_single);
            }
            each(route);
        }
    }
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
            .any(|r| r.headers.is_empty() && r.path.is_catch_all())
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
        PathMatch::Exact(p) => PathSpecifier::Path(p.to_string()),
        PathMatch::Prefix(p) if &**p == "/" => PathSpecifier::Prefix("/".to_string()),
        PathMatch::Prefix(p) => PathSpecifier::PathSeparatedPrefix(p.to_string()),
        // Envoy merges slashes in request paths before routing: a prefix with `//` could
        // never match, so it is merged the same way.
        PathMatch::StringPrefix(p) => PathSpecifier::Prefix(merge_slashes(p)),
    };
    let mut headers = Vec::new();
    if host.starts_with("*.") {
        headers.push(single_label_authority(host));
    }
    headers.extend(r.headers.iter().map(build_header_matcher));
    EnvoyRoute {
        r#match: Some(RouteMatch {
            headers,
            path_specifier: Some(path_specifier),
            ..Default::default()
        }),
        action: Some(action),
        ..Default::default()
    }
}

pub use crate::dag::lookup::merge_slashes;

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

fn build_action(r: &Route) -> Action {
    let clusters = match &r.action {
        RouteAction::Unavailable(_) => return unavailable(),
        RouteAction::Forward(cs) => cs,
    };
    let live: Vec<_> = clusters.iter().filter(|c| c.weight > 0).collect();
    let specifier = match live.as_slice() {
        [] => return unavailable(),
        [one] => ClusterSpecifier::Cluster(one.cluster.to_string()),
        many => ClusterSpecifier::WeightedClusters(EnvoyWeightedCluster {
            clusters: many
                .iter()
                .map(|c| ClusterWeight {
                    name: c.cluster.to_string(),
                    weight: Some(u32v(c.weight)),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    };
    let timeout = r.timeout.as_ref().map(|t| match t {
        Timeout::Infinite => duration(std::time::Duration::ZERO),
        Timeout::After(d) => duration(*d),
    });
    let retry_policy = r.retry.as_ref().map(|p| RetryPolicy {
        retry_on: RETRY_ON.to_string(),
        num_retries: Some(u32v(p.count)),
        per_try_timeout: p.per_try_timeout.map(duration),
        ..Default::default()
    });
    Action::Route(EnvoyRouteAction {
        cluster_specifier: Some(specifier),
        timeout,
        retry_policy,
        ..Default::default()
    })
}
