//! HTTPRoutes of the Gateway API attached to sluice's Gateways ([`super::gateway`]): which
//! listeners a route's parents select and allow it on, the hostnames it serves there, and its
//! rules as routes (path, header and method matches, weighted Service backends, a request
//! timeout). The rules are written down in `docs/gateway-api.md`.

use std::collections::BTreeMap;
use std::str::FromStr;

use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteParentRefs, HttpRouteRules, HttpRouteRulesFilters,
    HttpRouteRulesFiltersRequestRedirectPathType, HttpRouteRulesFiltersRequestRedirectScheme,
    HttpRouteRulesFiltersType, HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
};

use super::gateway::{GATEWAY_MIN_TLS, GROUP, GatewayAcc, Namespaces, cond, condition, granted};
use super::model::{
    Clusters, GatewayApiStatus, GatewayCondition, HeaderEdit, HeaderEdits, HeaderMatch, HeaderOp,
    ParentStatus, PathMatch, Redirect, Route, RouteAction, UpstreamProtocol, VhostTls,
    WeightedCluster,
};
use super::{BackendRef, Builder, PortRef};
use crate::api::{Kind, LbStrategy, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::common::Timeout;
use crate::validate::gateway::validate_http_route;

/// A rule as routes: its matches (path and header conditions), its action, its timeout and its
/// header changes.
type BuiltRule = (
    Vec<(PathMatch, Vec<HeaderMatch>)>,
    RouteAction,
    Option<Timeout>,
    Option<Box<HeaderEdits>>,
);

/// Whether `pattern` (a host name, or `*.` and a suffix) matches the host name `host`.
/// A wildcard matches one or more labels in front of its suffix, not the suffix alone.
fn hostname_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => {
            host.len() > suffix.len() && host.ends_with(suffix) && !host.starts_with('*')
        }
        None => pattern == host,
    }
}

/// The hostnames a route serves through a listener: where the listener's hostname and the
/// route's meet (the more specific of the two). Empty when they do not meet.
pub fn listener_route_hosts(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let route: Vec<String> = route.iter().map(|h| h.to_ascii_lowercase()).collect();
    let mut out = match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_string()],
        (None, false) => route,
        (Some(l), true) => vec![l.to_string()],
        (Some(l), false) => route
            .into_iter()
            .filter_map(|h| {
                if h == l || hostname_matches(l, &h) {
                    Some(h)
                } else if hostname_matches(&h, l) {
                    Some(l.to_string())
                } else {
                    None
                }
            })
            .collect(),
    };
    out.sort();
    out.dedup();
    out
}

/// What one parent of a route attaches to: hostnames, each with its TLS Secret (HTTPS
/// listeners) and whether it is served over plain HTTP (HTTP listeners).
#[derive(Default)]
struct Attachment {
    /// Host → (TLS Secret id, served over plain HTTP).
    hosts: BTreeMap<String, (Option<String>, bool)>,
}

fn parent_status(
    controller: &str,
    route_ns: &str,
    p: &HttpRouteParentRefs,
    conditions: Vec<GatewayCondition>,
) -> ParentStatus {
    ParentStatus {
        namespace: p.namespace.clone().unwrap_or_else(|| route_ns.to_string()),
        name: p.name.clone(),
        section_name: p.section_name.clone(),
        port: p.port,
        controller_name: controller.to_string(),
        conditions,
    }
}

/// One HTTPRoute: attaches it to the listeners of sluice's Gateways it names, and adds its rules.
pub(super) fn http_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    key: &ObjKey,
    route: &HttpRoute,
) {
    let obj = ObjectRef {
        kind: Kind::HttpRoute,
        key: key.clone(),
    };
    let ns = key.namespace.to_string();
    let parents: Vec<(usize, &HttpRouteParentRefs, ObjKey)> =
        (route.spec.parent_refs.iter().flatten())
            .enumerate()
            .filter(|(_, p)| {
                p.group.as_deref().unwrap_or(GROUP) == GROUP
                    && p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
            })
            .map(|(i, p)| {
                (
                    i,
                    p,
                    ObjKey::new(p.namespace.as_deref().unwrap_or(&ns), p.name.as_str()),
                )
            })
            .filter(|(_, _, k)| gateways.contains_key(k))
            .collect();
    if parents.is_empty() {
        b.set_ignored(&obj, "no parent is a Gateway of sluice's");
        return;
    }
    b.track_generation_of(&obj, route.metadata.generation);
    let mut statuses = Vec::new();
    let hostnames = route.spec.hostnames.as_deref().unwrap_or(&[]);

    // The route's own problems refuse it on every parent.
    let verdict = validate_http_route(route);
    let mut problems: Vec<String> = verdict.errors.iter().map(ToString::to_string).collect();
    let unsupported: Vec<String> = unsupported(route).iter().map(ToString::to_string).collect();
    let refused = if !problems.is_empty() {
        Some((cond::UNSUPPORTED_VALUE, problems.join("; ")))
    } else if !unsupported.is_empty() {
        Some((cond::UNSUPPORTED_VALUE, unsupported.join("; ")))
    } else {
        None
    };

    let mut attachment = Attachment::default();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let mut selected = 0;
        let mut allowed = 0;
        let mut hosted = 0;
        let mut https_without_host = false;
        for l in gw.listeners.iter_mut().flatten() {
            if p.section_name.as_deref().is_some_and(|s| s != l.name)
                || p.port.is_some_and(|port| port != l.port)
            {
                continue;
            }
            selected += 1;
            if l.from == Namespaces::Same && gw_key.namespace != key.namespace {
                continue;
            }
            allowed += 1;
            let mut hosts = listener_route_hosts(l.hostname.as_deref(), hostnames);
            if l.tls.is_some() && hosts.iter().any(|h| h == "*") {
                // TLS is chosen by the SNI host name: every host of an HTTPS listener is named.
                hosts.retain(|h| h != "*");
                https_without_host = true;
            }
            if hosts.is_empty() {
                continue;
            }
            hosted += 1;
            if refused.is_some() {
                continue;
            }
            l.attached += 1;
            for h in hosts {
                let e = attachment.hosts.entry(h).or_insert((None, false));
                match &l.tls {
                    Some(secret) => {
                        e.0.get_or_insert_with(|| secret.clone());
                    }
                    None => e.1 = true,
                }
            }
        }
        let field = format!("spec.parentRefs[{i}]");
        let accepted = if let Some((reason, why)) = &refused {
            condition(cond::ACCEPTED, false, reason, why.clone())
        } else if selected == 0 {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_PARENT,
                format!(
                    "{field}: Gateway {gw_key} has no accepted listener with this sectionName and port"
                ),
            )
        } else if allowed == 0 {
            condition(
                cond::ACCEPTED,
                false,
                cond::NOT_ALLOWED_BY_LISTENERS,
                format!(
                    "{field}: the listeners of Gateway {gw_key} take routes of namespace {:?} only (allowedRoutes.namespaces.from: Same); set it to All to take this route",
                    &*gw_key.namespace
                ),
            )
        } else if hosted == 0 && https_without_host {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_LISTENER_HOSTNAME,
                format!(
                    "{field}: an HTTPS listener of Gateway {gw_key} serves named hosts only; set spec.hostnames or the listener's hostname"
                ),
            )
        } else if hosted == 0 {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_LISTENER_HOSTNAME,
                format!(
                    "{field}: no hostname of this route matches a listener hostname of Gateway {gw_key}"
                ),
            )
        } else {
            condition(cond::ACCEPTED, true, cond::ACCEPTED, "attached to Gateway")
        };
        statuses.push((*i, p, accepted));
    }

    // Rules → routes on every attached host.
    let mut resolved = condition(
        cond::RESOLVED_REFS,
        true,
        cond::RESOLVED_REFS,
        "references resolved",
    );
    let mut host_conflicts = Vec::new();
    let mut route_conflicts = Vec::new();
    if !attachment.hosts.is_empty() {
        let rules = route.spec.rules.as_deref().unwrap_or(&[]);
        let built: Vec<BuiltRule> = rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let action = rule_action(b, snapshot, &ns, i, rule, &mut resolved);
                let edits = rule_header_edits(rule);
                (rule_matches(rule), action, rule_timeout(rule), edits)
            })
            .collect();
        for (host, (tls, insecure)) in &attachment.hosts {
            if let Some(owner) = b.host_owner(host) {
                host_conflicts.push(format!("{host:?} is owned by {owner}"));
                continue;
            }
            if let Some(secret) = tls {
                let v = b.vhost(host);
                match &v.tls {
                    Some(t) if t.secret != *secret => {
                        route_conflicts.push(format!(
                            "host {host:?} already uses TLS Secret {:?}; the listener's Secret {secret:?} is not used",
                            t.secret
                        ));
                    }
                    Some(_) => {}
                    None => {
                        v.tls = Some(VhostTls {
                            secret: secret.clone(),
                            min_version: GATEWAY_MIN_TLS,
                        })
                    }
                }
            }
            for (matches, action, timeout, edits) in &built {
                for (path, headers) in matches {
                    let r = Route {
                        path: path.clone(),
                        headers: headers.clone(),
                        action: action.clone(),
                        permit_insecure: *insecure,
                        timeout: *timeout,
                        retry: None,
                        headers_edit: edits.clone(),
                        source: obj.clone(),
                    };
                    if let Err(conflict) = b.add_route(host, r)
                        && conflict.0 != obj
                    {
                        route_conflicts.push(format!(
                            "{} on host {host:?} is already defined by {}",
                            describe(path, headers),
                            conflict.0
                        ));
                    }
                }
            }
        }
    }
    let all_hosts_taken =
        !attachment.hosts.is_empty() && host_conflicts.len() == attachment.hosts.len();
    let mut parents = Vec::new();
    for (_, p, mut accepted) in statuses {
        if accepted.status && all_hosts_taken {
            accepted = condition(
                cond::ACCEPTED,
                false,
                cond::HOST_CONFLICT,
                format!(
                    "every hostname of this route belongs to another object: {}",
                    host_conflicts.join("; ")
                ),
            );
        } else if accepted.status && !(host_conflicts.is_empty() && route_conflicts.is_empty()) {
            let notes: Vec<&str> = (host_conflicts.iter().chain(&route_conflicts))
                .map(String::as_str)
                .collect();
            accepted.message = format!("attached to Gateway; not routed: {}", notes.join("; "));
        }
        if !accepted.status && !problems.contains(&accepted.message) {
            problems.push(accepted.message.clone());
        }
        parents.push(parent_status(
            controller,
            &ns,
            p,
            vec![accepted, resolved.clone()],
        ));
    }
    b.set_gateway_status(
        &obj,
        GatewayApiStatus {
            parents,
            ..Default::default()
        },
    );
    if !resolved.status {
        problems.push(resolved.message.clone());
    }
    problems.extend(route_conflicts);
    if problems.is_empty() {
        b.set_valid(&obj, "accepted HTTPRoute");
    }
    for p in problems {
        b.set_invalid(&obj, crate::api::status::reason::INVALID_SPEC, p);
    }
}

/// What the route uses that sluice does not route yet, one error per field (reason
/// `UnsupportedValue`). The webhook refuses these in routes attached to sluice's Gateways.
pub fn unsupported(route: &HttpRoute) -> Vec<FieldError> {
    let mut out = Vec::new();
    let mut no = |path: String, message: &str| {
        out.push(FieldError::new(path, cond::UNSUPPORTED_VALUE, message));
    };
    const FILTERS: &str = "sluice does not apply backendRef filters yet; use the rule's filters";
    for (i, rule) in route.spec.rules.iter().flatten().enumerate() {
        let field = format!("spec.rules[{i}]");
        for (j, f) in rule.filters.iter().flatten().enumerate() {
            match f.r#type {
                HttpRouteRulesFiltersType::RequestHeaderModifier
                | HttpRouteRulesFiltersType::ResponseHeaderModifier => {}
                HttpRouteRulesFiltersType::RequestRedirect => {
                    let path = f.request_redirect.as_ref().and_then(|r| r.path.as_ref());
                    if path.is_some_and(|p| {
                        p.r#type == HttpRouteRulesFiltersRequestRedirectPathType::ReplacePrefixMatch
                    }) {
                        no(
                            format!("{field}.filters[{j}].requestRedirect.path.type"),
                            "ReplacePrefixMatch is not supported by sluice yet; use ReplaceFullPath",
                        );
                    }
                }
                _ => no(
                    format!("{field}.filters[{j}].type"),
                    "sluice applies RequestHeaderModifier, ResponseHeaderModifier and RequestRedirect filters; remove this one",
                ),
            }
        }
        for (j, m) in rule.matches.iter().flatten().enumerate() {
            if matches!(
                m.path.as_ref().and_then(|p| p.r#type.as_ref()),
                Some(HttpRouteRulesMatchesPathType::RegularExpression)
            ) {
                no(
                    format!("{field}.matches[{j}].path.type"),
                    "RegularExpression is not supported by sluice yet; use Exact or PathPrefix",
                );
            }
            if m.query_params.as_ref().is_some_and(|q| !q.is_empty()) {
                no(
                    format!("{field}.matches[{j}].queryParams"),
                    "query parameter matches are not supported by sluice yet; remove them",
                );
            }
        }
        for (j, r) in rule.backend_refs.iter().flatten().enumerate() {
            if r.filters.as_ref().is_some_and(|f| !f.is_empty()) {
                no(format!("{field}.backendRefs[{j}].filters"), FILTERS);
            }
        }
        if rule
            .timeouts
            .as_ref()
            .is_some_and(|t| t.backend_request.is_some())
        {
            no(
                format!("{field}.timeouts.backendRequest"),
                "not supported by sluice yet; use timeouts.request",
            );
        }
    }
    out
}

/// The path and header conditions of a rule's matches (one match of every path when it has none).
fn rule_matches(rule: &HttpRouteRules) -> Vec<(PathMatch, Vec<HeaderMatch>)> {
    let matches = rule.matches.as_deref().unwrap_or(&[]);
    if matches.is_empty() {
        return vec![(PathMatch::prefix("/"), Vec::new())];
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
            (path, headers)
        })
        .collect()
}

/// The redirect of a rule's `RequestRedirect` filter (the first, when it has more).
fn rule_redirect(rule: &HttpRouteRules) -> Option<Redirect> {
    let r = (rule.filters.iter().flatten()).find_map(|f| match f.r#type {
        HttpRouteRulesFiltersType::RequestRedirect => f.request_redirect.as_ref(),
        _ => None,
    })?;
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
        path: (r.path.as_ref())
            .filter(|p| p.r#type == HttpRouteRulesFiltersRequestRedirectPathType::ReplaceFullPath)
            .and_then(|p| p.replace_full_path.clone()),
        // The Gateway API's default is 302.
        status: r
            .status_code
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| [301, 302, 303, 307, 308].contains(c))
            .unwrap_or(302),
    })
}

/// The header changes of a rule's `RequestHeaderModifier` and `ResponseHeaderModifier` filters.
fn rule_header_edits(rule: &HttpRouteRules) -> Option<Box<HeaderEdits>> {
    macro_rules! edit {
        ($edit:expr, $m:expr) => {{
            let (edit, m) = ($edit, $m);
            let pair = |name: &String, value: &String| (name.to_ascii_lowercase(), value.clone());
            edit.set
                .extend(m.set.iter().flatten().map(|h| pair(&h.name, &h.value)));
            edit.add
                .extend(m.add.iter().flatten().map(|h| pair(&h.name, &h.value)));
            edit.remove
                .extend(m.remove.iter().flatten().map(|n| n.to_ascii_lowercase()));
        }};
    }
    let mut edits = HeaderEdits::default();
    for f in rule.filters.iter().flatten() {
        let f: &HttpRouteRulesFilters = f;
        if let Some(m) = &f.request_header_modifier {
            edit!(&mut edits.request, m);
        }
        if let Some(m) = &f.response_header_modifier {
            edit!(&mut edits.response, m);
        }
    }
    let empty = |e: &HeaderEdit| e.is_empty();
    (!(empty(&edits.request) && empty(&edits.response))).then(|| Box::new(edits))
}

/// A rule's `timeouts.request` (zero: no timeout).
fn rule_timeout(rule: &HttpRouteRules) -> Option<Timeout> {
    let request = rule.timeouts.as_ref()?.request.as_deref()?;
    let d = gateway_api::Duration::from_str(request).ok()?;
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Some(if nanos == 0 {
        Timeout::Infinite
    } else {
        Timeout::After(std::time::Duration::from_nanos(nanos))
    })
}

/// A rule's backends as a route action; what cannot be resolved goes to `resolved` (the route's
/// ResolvedRefs condition). A rule none of whose backends resolve answers 503.
fn rule_action(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    ns: &str,
    i: usize,
    rule: &HttpRouteRules,
    resolved: &mut GatewayCondition,
) -> RouteAction {
    if let Some(redirect) = rule_redirect(rule) {
        // A redirect answers itself: the rule's backends take no requests.
        return RouteAction::Redirect(Box::new(redirect));
    }
    let refs = rule.backend_refs.as_deref().unwrap_or(&[]);
    if refs.is_empty() {
        return RouteAction::Unavailable(format!("spec.rules[{i}] has no backendRefs"));
    }
    let mut clusters = Clusters::new();
    let mut failed = None;
    for (j, r) in refs.iter().enumerate() {
        let field = format!("spec.rules[{i}].backendRefs[{j}]");
        let to_ns = r.namespace.as_deref().unwrap_or(ns);
        let group = r.group.as_deref().unwrap_or("");
        let kind = r.kind.as_deref().unwrap_or("Service");
        let found = if !group.is_empty() || kind != "Service" {
            Err((
                cond::INVALID_KIND,
                format!(
                    "{field}: sluice routes to Services (group \"\", kind Service), not {kind} of group {group:?}"
                ),
            ))
        } else if to_ns != ns && !granted(snapshot, "HTTPRoute", ns, "Service", to_ns, &r.name) {
            Err((
                cond::REF_NOT_PERMITTED,
                format!(
                    "{field}: Service \"{to_ns}/{}\" is in another namespace and no ReferenceGrant there lets HTTPRoutes of {ns:?} use it",
                    r.name
                ),
            ))
        } else if let Some(port) = r.port {
            let backend = BackendRef {
                namespace: to_ns,
                service: &r.name,
                port: PortRef::Number(port),
                protocol: UpstreamProtocol::Http,
                lb: LbStrategy::RoundRobin,
                health_check: None,
                outlier_detection: None,
            };
            b.cluster_for(&backend)
                .map_err(|m| (cond::BACKEND_NOT_FOUND, format!("{field}: {}", m.message)))
        } else {
            Err((
                cond::UNSUPPORTED_VALUE,
                format!("{field}.port: a Service backend needs a port"),
            ))
        };
        match found {
            Ok(cluster) => {
                let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
                if weight == 0 {
                    continue;
                }
                match clusters.iter_mut().find(|c| c.cluster == cluster) {
                    Some(c) => c.weight = c.weight.saturating_add(weight),
                    None => clusters.push(WeightedCluster { cluster, weight }),
                }
            }
            Err((reason, message)) => {
                if resolved.status {
                    *resolved = condition(cond::RESOLVED_REFS, false, reason, message.clone());
                } else {
                    resolved.message = format!("{}; {message}", resolved.message);
                }
                failed = Some(message);
            }
        }
    }
    if clusters.is_empty() {
        return RouteAction::Unavailable(
            failed.unwrap_or_else(|| format!("every backendRef of spec.rules[{i}] has weight 0")),
        );
    }
    RouteAction::Forward(clusters)
}

/// A match as a status message names it.
fn describe(path: &PathMatch, headers: &[HeaderMatch]) -> String {
    let path = match path {
        PathMatch::Exact(p) => format!("path {p:?} (Exact)"),
        PathMatch::Prefix(p) | PathMatch::StringPrefix(p) => format!("path {p:?} (PathPrefix)"),
    };
    match headers.len() {
        0 => path,
        1 => format!("{path} with 1 header condition"),
        n => format!("{path} with {n} header conditions"),
    }
}
