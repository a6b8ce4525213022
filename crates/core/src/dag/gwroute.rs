//! Routes of the Gateway API (HTTPRoute, GRPCRoute) attached to sluice's Gateways
//! ([`super::gateway`]): which listeners a route's parents select and allow it on, the
//! hostnames it serves there, its backends, and its statuses. What each kind's rules mean is
//! [`super::httproute`]'s and [`super::grpcroute`]'s. The rules are written down in
//! `docs/gateway-api.md`.

use std::collections::BTreeMap;

use super::backend_tls::BackendTls;
use super::gateway::{
    GATEWAY_MIN_TLS, GROUP, GatewayAcc, attached_to_gateway, cond, condition, granted,
    refs_resolved,
};
use super::model::{
    ClusterName, Clusters, Cors, EntryKey, GatewayApiStatus, GatewayCondition, HeaderEdits,
    HeaderMatch, INVALID_BACKEND_CLUSTER, Mirror, ParentStatus, PathMatch, QueryMatch, Rewrite,
    Route, RouteAction, RouteExtras, UNAVAILABLE_BACKEND_CLUSTER, UpstreamProtocol, VhostTls,
    WeightedCluster,
};
pub(super) use super::tally::Tally;
use super::{BackendRef, Builder, PortRef};
use crate::api::{Kind, LbStrategy, ObjKey, ObjectRef};
use crate::store::{APP_PROTOCOL_WSS, AppProtocol, Snapshot};
use crate::validate::common::Timeout;

/// One match of a rule: the conditions a request meets to take the rule.
pub(super) struct RuleMatch {
    pub path: PathMatch,
    pub headers: Vec<HeaderMatch>,
    pub query: Vec<QueryMatch>,
}

impl RuleMatch {
    /// The match of every request.
    pub fn everything() -> RuleMatch {
        RuleMatch {
            path: PathMatch::prefix("/"),
            headers: Vec::new(),
            query: Vec::new(),
        }
    }
}

/// A rule as routes: its matches and what each route of them does.
pub(super) struct BuiltRule {
    pub matches: Vec<RuleMatch>,
    pub action: RouteAction,
    pub timeout: Option<Timeout>,
    /// A per-try timeout (HTTPRoute `timeouts.backendRequest`).
    pub retry: Option<crate::dag::RetryPolicy>,
    pub edits: Option<HeaderEdits>,
    pub rewrite: Option<Rewrite>,
    pub mirrors: Vec<Mirror>,
    /// The rule's CORS policy (HTTPRoute `CORS` filter).
    pub cors: Option<Cors>,
    /// The header changes of each backend of `action` ([`RouteExtras::backend_edits`]).
    pub backend_edits: Vec<Option<HeaderEdits>>,
}

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

/// Whether every request host `host` takes is one `pattern` takes too (lowercase names, either
/// may be a wildcard, which takes one or more labels): `*.example.com` covers `a.example.com`
/// and `*.a.example.com`.
fn covers(pattern: &str, host: &str) -> bool {
    pattern == host
        || match (pattern.strip_prefix('*'), host.strip_prefix('*')) {
            (Some(p), Some(h)) => h.len() > p.len() && h.ends_with(p),
            (Some(_), None) => hostname_matches(pattern, host),
            (None, _) => false,
        }
}

/// Whether requests for `host`, which a route serves through a listener of `port` and
/// `hostname`, belong to another listener of the Gateway (`listeners`: the port and hostname of
/// each that takes HTTP routes, [`GatewayAcc::http_hostnames`]): one on the same port whose
/// hostname is more specific and covers `host`. The Gateway API routes a request only with the
/// routes of the most specific listener that takes it (listener isolation), so the route does
/// not serve that host.
pub(super) fn taken_by_narrower_listener(
    listeners: &[(i32, Option<String>)],
    (port, hostname): (i32, Option<&str>),
    host: &str,
) -> bool {
    listeners.iter().any(|(p, other)| {
        let Some(other) = other.as_deref() else {
            return false;
        };
        let narrower = hostname.is_none_or(|h| h != other && covers(h, other));
        *p == port && narrower && covers(other, host)
    })
}

/// The hostnames a route serves through a listener: where the listener's hostname and the
/// route's meet (the more specific of the two, also of two wildcards: `*.example.com` and
/// `*.a.example.com` meet at `*.a.example.com`). Empty when they do not meet.
pub fn listener_route_hosts(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let route: Vec<String> = route.iter().map(|h| h.to_ascii_lowercase()).collect();
    let mut out = match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_string()],
        (None, false) => route,
        (Some(l), true) => vec![l.to_string()],
        (Some(l), false) => route
            .into_iter()
            .filter_map(|h| {
                if covers(l, &h) {
                    Some(h)
                } else if covers(&h, l) {
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

/// Why a route is refused for a filter on a backendRef other than the header modifiers.
pub(super) const BACKEND_FILTERS_ROUTED: &str = "sluice applies RequestHeaderModifier and ResponseHeaderModifier filters on a backendRef; move this one to the rule's filters";

/// How a route serves one host: the TLS Secret id (HTTPS listeners), whether over plain HTTP,
/// whether a listener's hostname takes it.
type HostAttachment = (Option<String>, bool, bool);

/// What one parent of a route attaches to: hostnames, each with its TLS Secret (HTTPS
/// listeners), whether it is served over plain HTTP (HTTP listeners) and whether a listener's
/// hostname takes it ([`VirtualHost::isolated`] for a wildcard).
#[derive(Default)]
struct Attachment {
    /// (Where it is served, host) → (TLS Secret id, served over plain HTTP, taken by a
    /// listener's hostname).
    hosts: BTreeMap<(Option<EntryKey>, String), HostAttachment>,
}

/// The header changes ([`HeaderEdits`]) of a rule's filters, of any route kind: `$filters`
/// iterates filters with the `request_header_modifier` and `response_header_modifier` fields of
/// the Gateway API (their `set`, `add` and `remove`); names are lowercased.
macro_rules! rule_header_edits {
    ($filters:expr) => {{
        macro_rules! edit {
            ($edit:expr, $m:expr) => {{
                let (edit, m) = ($edit, $m);
                let pair =
                    |name: &String, value: &String| (name.to_ascii_lowercase(), value.clone());
                edit.set
                    .extend(m.set.iter().flatten().map(|h| pair(&h.name, &h.value)));
                edit.add
                    .extend(m.add.iter().flatten().map(|h| pair(&h.name, &h.value)));
                edit.remove
                    .extend(m.remove.iter().flatten().map(|n| n.to_ascii_lowercase()));
            }};
        }
        let mut edits = $crate::dag::model::HeaderEdits::default();
        for f in $filters {
            if let Some(m) = &f.request_header_modifier {
                edit!(&mut edits.request, m);
            }
            if let Some(m) = &f.response_header_modifier {
                edit!(&mut edits.response, m);
            }
        }
        (!(edits.request.is_empty() && edits.response.is_empty())).then_some(edits)
    }};
}
pub(super) use rule_header_edits;

/// The [`Mirror`]s of a rule's `RequestMirror` filters (`$filters`, an iterator of them, of
/// either route kind) whose backends resolve; the others are noted on the route's ResolvedRefs
/// condition (`$resolved`) and mirror nothing, as the Gateway API asks. `$from` is the route's
/// kind and namespace, `$i` the rule's index, `$protocol` the backends' [`UpstreamProtocol`].
macro_rules! rule_mirrors {
    ($b:expr, $snapshot:expr, $from:expr, $i:expr, $filters:expr, $resolved:expr, $protocol:ident) => {{
        let mut mirrors: Vec<$crate::dag::model::Mirror> = Vec::new();
        for (j, f) in $filters.enumerate() {
            let Some(m) = f.request_mirror.as_ref() else {
                continue;
            };
            let r = &m.backend_ref;
            let backend = $crate::dag::gwroute::BackendIn {
                group: r.group.as_deref(),
                kind: r.kind.as_deref(),
                namespace: r.namespace.as_deref(),
                name: &r.name,
                port: r.port,
                weight: None,
                edits: None,
            };
            let field = format!("spec.rules[{}].filters[{j}].requestMirror.backendRef", $i);
            let protocol = $crate::dag::model::UpstreamProtocol::$protocol;
            match $crate::dag::gwroute::resolve_backend(
                $b, $snapshot, $from, &field, &backend, protocol,
            ) {
                Ok(cluster) => mirrors.push($crate::dag::model::Mirror {
                    cluster,
                    per_million: $crate::dag::gwroute::mirror_share(
                        m.percent,
                        m.fraction.as_ref().map(|f| (f.numerator, f.denominator)),
                    ),
                }),
                Err((reason, message)) => {
                    $crate::dag::gwroute::unresolved($resolved, reason, &message)
                }
            }
        }
        mirrors
    }};
}
pub(super) use rule_mirrors;

/// A mirror's share of the requests in millionths: `percent`, else `fraction` (numerator and
/// denominator, 100 by default), else every request. Out-of-range values (the webhook refuses
/// them) are held to 0–100%.
pub(super) fn mirror_share(percent: Option<i32>, fraction: Option<(i32, Option<i32>)>) -> u32 {
    const ALL: i64 = 1_000_000;
    let share = match (percent, fraction) {
        (Some(p), _) => i64::from(p) * (ALL / 100),
        (None, Some((numerator, denominator))) => match i64::from(denominator.unwrap_or(100)) {
            d if d <= 0 => 0,
            d => i64::from(numerator) * ALL / d,
        },
        (None, None) => ALL,
    };
    u32::try_from(share.clamp(0, ALL)).unwrap_or(0)
}

/// The [`RouteIn`] of a route of any kind (`$route`, a prepared route whose object has the
/// Gateway API's `metadata` and `spec.parentRefs` / `spec.hostnames`): what its
/// [`ReadyRoute`] says refuses it.
macro_rules! route_in {
    ($kind:expr, $key:expr, $route:expr) => {{
        let route = $route;
        let refused = &route.ready().refused;
        let parents = $crate::dag::gwroute::parents_in!(route.spec.parent_refs);
        $crate::dag::gwroute::RouteIn {
            kind: $kind,
            key: $key,
            generation: route.metadata.generation,
            parents,
            hostnames: route.spec.hostnames.as_deref().unwrap_or(&[]),
            refused,
        }
    }};
}
pub(super) use route_in;

/// The [`ParentIn`]s of a route of any kind (`$refs`: its `spec.parentRefs`).
macro_rules! parents_in {
    ($refs:expr) => {
        ($refs.iter().flatten())
            .map(|p| $crate::dag::gwroute::ParentIn {
                group: p.group.as_deref(),
                kind: p.kind.as_deref(),
                namespace: p.namespace.as_deref(),
                name: &p.name,
                section_name: p.section_name.as_deref(),
                port: p.port,
            })
            .collect::<Vec<_>>()
    };
}
pub(super) use parents_in;

/// The clusters a TCPRoute's or TLSRoute's rule (`$rule`, whose `backendRefs` have no filters)
/// sends connections to: see [`connection_clusters`].
macro_rules! rule_connections {
    ($b:expr, $snapshot:expr, $kind:expr, $ns:expr, $rule:expr, $resolved:expr) => {{
        let refs: Vec<$crate::dag::gwroute::BackendIn<'_>> = ($rule.backend_refs.iter())
            .map(|r| $crate::dag::gwroute::BackendIn {
                group: r.group.as_deref(),
                kind: r.kind.as_deref(),
                namespace: r.namespace.as_deref(),
                name: &r.name,
                port: r.port,
                weight: r.weight,
                edits: None,
            })
            .collect();
        $crate::dag::gwroute::connection_clusters($b, $snapshot, $kind, $ns, &refs, $resolved)
    }};
}
pub(super) use rule_connections;

/// The clusters, weighted, a route of `kind` in namespace `ns` sends connections to (plain TCP
/// to its backends, `refs`); None when no backend resolves. What does not resolve goes to
/// `resolved`, and its weight's share to a cluster of no endpoints (those connections close).
pub(super) fn connection_clusters(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    kind: &str,
    ns: &str,
    refs: &[BackendIn<'_>],
    resolved: &mut GatewayCondition,
) -> Option<Clusters> {
    let protocol = UpstreamProtocol::Tcp;
    match rule_action(b, snapshot, kind, ns, 0, refs, protocol, resolved).0 {
        RouteAction::Forward(clusters) => Some(clusters),
        _ => None,
    }
}

/// What sluice does not route in a TCPRoute or TLSRoute (`kind`, with `rules` rules): more than
/// one rule (a connection goes to one rule's backends).
pub(super) fn one_rule(kind: &str, rules: usize) -> Vec<crate::validate::FieldError> {
    match rules {
        0 | 1 => Vec::new(),
        n => vec![crate::validate::FieldError::new(
            "spec.rules",
            cond::UNSUPPORTED_VALUE,
            format!(
                "sluice sends a {kind}'s connections to the backends of one rule, and this route has {n}; put every backendRef in one rule (weights split the connections)"
            ),
        )],
    }
}

/// The [`BackendIn`]s of a rule of any route kind.
macro_rules! backends_of {
    ($rule:expr) => {
        ($rule.backend_refs.iter().flatten())
            .map(|r| $crate::dag::gwroute::BackendIn {
                group: r.group.as_deref(),
                kind: r.kind.as_deref(),
                namespace: r.namespace.as_deref(),
                name: &r.name,
                port: r.port,
                weight: r.weight,
                edits: $crate::dag::gwroute::rule_header_edits!(r.filters.iter().flatten()),
            })
            .collect::<Vec<_>>()
    };
}
pub(super) use backends_of;

/// A route's `parentRefs` entry, of any route kind.
pub(super) struct ParentIn<'r> {
    pub group: Option<&'r str>,
    pub kind: Option<&'r str>,
    pub namespace: Option<&'r str>,
    pub name: &'r str,
    pub section_name: Option<&'r str>,
    pub port: Option<i32>,
}

impl ParentIn<'_> {
    /// The ListenerSet this parentRef names (its key, the namespace defaulting to the route's
    /// `route_ns`), None when it names something else (a Gateway, another kind).
    pub fn listener_set(&self, route_ns: &str) -> Option<ObjKey> {
        let ours = self.group.unwrap_or(GROUP) == GROUP && self.kind == Some("ListenerSet");
        ours.then(|| ObjKey::new(self.namespace.unwrap_or(route_ns), self.name))
    }
}

/// A rule's `backendRefs` entry, of any route kind.
pub(super) struct BackendIn<'r> {
    pub group: Option<&'r str>,
    pub kind: Option<&'r str>,
    pub namespace: Option<&'r str>,
    pub name: &'r str,
    pub port: Option<i32>,
    pub weight: Option<i32>,
    /// The header changes of the backendRef's filters.
    pub edits: Option<HeaderEdits>,
}

/// What attaching needs of a route of any kind.
pub(super) struct RouteIn<'r> {
    pub kind: Kind,
    pub key: &'r ObjKey,
    pub generation: Option<i64>,
    pub parents: Vec<ParentIn<'r>>,
    pub hostnames: &'r [String],
    /// What refuses the route on every parent: its single-object problems and what sluice does
    /// not route yet.
    pub refused: &'r [String],
}

/// What a build reads of an HTTPRoute or GRPCRoute besides the object, worked out when the
/// route arrives ([`crate::store::Prepared`]): the single-object rules' problems, or, when it has
/// none, what it uses that sluice does not route yet. Both follow from the object alone, and a
/// build of many routes spent a quarter of its time checking them again.
pub struct ReadyRoute {
    pub refused: Box<[String]>,
}

impl ReadyRoute {
    pub(super) fn new(
        errors: Vec<crate::validate::FieldError>,
        unsupported: impl FnOnce() -> Vec<crate::validate::FieldError>,
    ) -> Self {
        let refused = if errors.is_empty() {
            unsupported()
        } else {
            errors
        };
        ReadyRoute {
            refused: refused.iter().map(ToString::to_string).collect(),
        }
    }
}

fn parent_status(
    controller: &str,
    route_ns: &str,
    p: &ParentIn<'_>,
    conditions: Vec<GatewayCondition>,
) -> ParentStatus {
    ParentStatus {
        kind: p.listener_set(route_ns).map(|_| "ListenerSet"),
        namespace: p.namespace.unwrap_or(route_ns).to_string(),
        name: p.name.to_string(),
        section_name: p.section_name.map(str::to_string),
        port: p.port,
        controller_name: controller.to_string(),
        conditions,
    }
}

/// Attaches a route to the listeners of sluice's Gateways it names and adds the routes
/// `build_rules` makes of its rules to every hostname it serves there (only when it serves
/// any); records its status.
pub(super) fn attach_route(
    b: &mut Builder<'_>,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    r: RouteIn<'_>,
    build_rules: impl FnOnce(&mut Builder<'_>, &mut GatewayCondition) -> Vec<BuiltRule>,
) {
    let obj = ObjectRef {
        kind: r.kind,
        key: r.key.clone(),
    };
    let kind_name = r.kind.kind();
    let Some(parents) = sluices_parents(b, &obj, &r.parents, r.generation, gateways) else {
        return;
    };
    let mut statuses = Vec::new();
    let hostnames = r.hostnames;
    let refused = (!r.refused.is_empty()).then(|| (cond::UNSUPPORTED_VALUE, r.refused.join("; ")));

    let mut attachment = Attachment::default();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let mut tally = Tally::default();
        let mut hosted = 0;
        let mut https_without_host = false;
        let mut narrowed = false;
        let isolation = &gw.http_hostnames;
        let scopes: Vec<Option<Option<EntryKey>>> = (gw.listeners.iter())
            .map(|l| l.as_ref().and_then(|l| gw.scope(l.port)))
            .collect();
        for (l, scope) in gw.listeners.iter_mut().zip(scopes) {
            let Some(l) = l else { continue };
            if !tally.takes(b.snapshot, p, gw_key, l, r.key, kind_name) {
                continue;
            }
            let mut hosts = listener_route_hosts(l.hostname.as_deref(), hostnames);
            let this = (l.port, l.hostname.as_deref());
            let before = hosts.len();
            hosts.retain(|h| !taken_by_narrower_listener(isolation, this, h));
            narrowed |= before > 0 && hosts.is_empty();
            let shared = matches!(scope, Some(None));
            if shared && l.tls.is_some() && hosts.iter().any(|h| h == "*") {
                // On Envoy's shared HTTPS listener TLS is chosen by the SNI host name: every
                // host of an HTTPS listener is named. A Gateway's own TLS port has a default
                // filter chain, which serves the catch-all host.
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
            // A Gateway without an address, or a listener whose certificate does not resolve,
            // serves its routes nowhere (their statuses say why).
            let Some(scope) = scope.filter(|_| l.programmed) else {
                continue;
            };
            for h in hosts {
                let at = (scope.clone(), h);
                let e = attachment.hosts.entry(at).or_insert((None, false, false));
                e.2 |= l.hostname.is_some();
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
        } else if let Some(no) = tally.refusal(&field, gw_key, &r.key.namespace, kind_name) {
            no
        } else if hosted == 0 && https_without_host {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_LISTENER_HOSTNAME,
                format!(
                    "{field}: an HTTPS listener of Gateway {gw_key} serves named hosts only; set spec.hostnames or the listener's hostname"
                ),
            )
        } else if hosted == 0 && narrowed {
            condition(
                cond::ACCEPTED,
                false,
                cond::NO_MATCHING_LISTENER_HOSTNAME,
                format!(
                    "{field}: the hostnames this route shares with the listeners it names belong to more specific listeners of Gateway {gw_key}, which alone route their requests; attach the route to those"
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
            attached_to_gateway()
        };
        statuses.push((*p, accepted));
    }

    // Rules → routes on every attached host.
    let mut resolved = refs_resolved();
    let mut host_conflicts = Vec::new();
    let mut route_conflicts = Vec::new();
    // The rules' references are resolved (for ResolvedRefs) even where the route serves no
    // host: its listener's certificate may not resolve, say.
    // The backends' TLS (BackendTLSPolicy) depends on the Gateways: they are the policies'
    // ancestors, and present their client certificate, when they all present the same one.
    let parent_gateways: Vec<ObjKey> = parents.iter().map(|(_, _, k)| k.clone()).collect();
    let mut clients = (parent_gateways.iter())
        .filter_map(|k| gateways.get(k))
        .map(|g| g.backend_client.as_ref().and_then(|(_, id)| id.clone()));
    let first = clients.next().flatten();
    let client_secret = match clients.all(|c| c == first) {
        true => first,
        false => None,
    };
    b.route_backend = super::builder::RouteBackendTls {
        gateways: parent_gateways,
        client_secret,
    };
    let built = match refused {
        None => build_rules(b, &mut resolved),
        Some(_) => Vec::new(),
    };
    b.route_backend = Default::default();
    {
        for ((scope, host), (tls, insecure, isolated)) in &attachment.hosts {
            let scope = scope.as_ref();
            if let Some(owner) = b.host_owner_in(scope, host) {
                host_conflicts.push(format!("{host:?} is owned by {owner}"));
                continue;
            }
            if *isolated && host.starts_with("*.") {
                b.vhost_in(scope, host).isolated = true;
            }
            if let Some(secret) = tls {
                let v = b.vhost_in(scope, host);
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
            for rule in &built {
                let action = listener_port_redirect(&rule.action, scope, tls.is_some());
                for m in &rule.matches {
                    let r = Route {
                        path: m.path.clone(),
                        headers: m.headers.clone(),
                        action: action.clone(),
                        permit_insecure: *insecure,
                        timeout: rule.timeout,
                        retry: rule.retry.clone(),
                        extras: RouteExtras {
                            query: m.query.clone(),
                            headers_edit: rule.edits.clone(),
                            rewrite: rule.rewrite.clone(),
                            mirrors: rule.mirrors.clone(),
                            cors: rule.cors.clone(),
                            backend_edits: rule.backend_edits.clone(),
                        }
                        .boxed(),
                        source: obj.clone(),
                    };
                    if let Err(conflict) = b.add_route_in(scope, host, r)
                        && conflict.0 != obj
                    {
                        route_conflicts.push(format!(
                            "{} on host {host:?} is already defined by {}",
                            describe(m),
                            conflict.0
                        ));
                    }
                }
            }
        }
    }
    let all_hosts_taken =
        !attachment.hosts.is_empty() && host_conflicts.len() == attachment.hosts.len();
    for (_, accepted) in &mut statuses {
        if accepted.status && all_hosts_taken {
            *accepted = condition(
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
    }
    let route_ns = &r.key.namespace;
    record_status(
        b,
        &obj,
        controller,
        route_ns,
        statuses,
        resolved,
        route_conflicts,
    );
}

/// A redirect naming neither scheme nor port keeps the port of the listener the request came in
/// on, as the Gateway API says: at a Gateway's own address that is the port Envoy listens on
/// (written when it is not the scheme's own port, which a URL leaves out). On Envoy's shared
/// listeners the port the client used is not known, and the redirect names none.
fn listener_port_redirect(
    action: &RouteAction,
    scope: Option<&EntryKey>,
    tls: bool,
) -> RouteAction {
    match (action, scope) {
        (RouteAction::Redirect(r), Some(key)) if r.scheme.is_none() && r.port.is_none() => {
            let default = if tls { 443 } else { 80 };
            if key.port == default {
                return action.clone();
            }
            let mut r = r.clone();
            r.port = Some(u32::from(key.port));
            RouteAction::Redirect(r)
        }
        _ => action.clone(),
    }
}

/// The parents of a route (`obj`) that are Gateways of sluice's or ListenerSets naming one, each
/// with its index in `parentRefs` and the Gateway's key; None when it has none (the route is then
/// marked ignored: another controller's). Otherwise the route's generation is tracked for its
/// status. Which listeners of the Gateway a parent selects is [`super::tally::Tally::takes`]'s:
/// a Gateway's own, or the ListenerSet's.
pub(super) fn sluices_parents<'p, 'r>(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    parents: &'p [ParentIn<'r>],
    generation: Option<i64>,
    gateways: &BTreeMap<ObjKey, GatewayAcc>,
) -> Option<Vec<(usize, &'p ParentIn<'r>, ObjKey)>> {
    let ours: Vec<_> = (parents.iter().enumerate())
        .filter_map(|(i, p)| {
            if let Some(set) = p.listener_set(&obj.key.namespace) {
                // The Gateway the ListenerSet names, when it is one of sluice's.
                let ls = b.snapshot.listener_sets.get(&set)?;
                let parent = &ls.spec.parent_ref;
                let ns = parent.namespace.as_deref().unwrap_or(&set.namespace);
                let gateway = ObjKey::new(ns, parent.name.as_str());
                let gw = gateways.get(&gateway)?;
                return gw
                    .listener_sets
                    .contains_key(&set)
                    .then_some((i, p, gateway));
            }
            let gateway_ref =
                p.group.unwrap_or(GROUP) == GROUP && p.kind.unwrap_or("Gateway") == "Gateway";
            let gateway = ObjKey::new(p.namespace.unwrap_or(&obj.key.namespace), p.name);
            (gateway_ref && gateways.contains_key(&gateway)).then_some((i, p, gateway))
        })
        .collect();
    // The generation, also of a route that is not sluice's: the status writer releases what it
    // wrote on one that was, and writes nothing older than what the cluster holds.
    b.track_generation_of(obj, generation);
    if ours.is_empty() {
        b.set_ignored(obj, "no parent is a Gateway of sluice's");
        return None;
    }
    Some(ours)
}

/// Records a route's status: for each parent its `Accepted` condition and the route's
/// `ResolvedRefs`; the route is invalid with every refusal, unresolved reference and `more`
/// problem, else valid.
pub(super) fn record_status(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    controller: &str,
    route_ns: &str,
    statuses: Vec<(&ParentIn<'_>, GatewayCondition)>,
    resolved: GatewayCondition,
    more: Vec<String>,
) {
    let mut problems: Vec<String> = Vec::new();
    let parents = (statuses.into_iter())
        .map(|(p, accepted)| {
            if !accepted.status && !problems.contains(&accepted.message) {
                problems.push(accepted.message.clone());
            }
            parent_status(controller, route_ns, p, vec![accepted, resolved.clone()])
        })
        .collect();
    b.set_gateway_status(
        obj,
        GatewayApiStatus {
            parents,
            ..Default::default()
        },
    );
    if !resolved.status {
        problems.push(resolved.message.clone());
    }
    problems.extend(more);
    if problems.is_empty() {
        b.set_valid(obj, format!("accepted {}", obj.kind.kind()));
    }
    for p in problems {
        b.set_invalid(obj, crate::api::status::reason::INVALID_SPEC, p);
    }
}

/// A rule's backends as a route action; what cannot be resolved goes to `resolved` (the route's
/// ResolvedRefs condition). A rule none of whose backends resolve answers 500 (HTTPRoute) or 503
/// (GRPCRoute); the weight of those that do not resolve, beside some that do, goes to
/// [`INVALID_BACKEND_CLUSTER`] or [`UNAVAILABLE_BACKEND_CLUSTER`], which answer the same.
/// With the action, the header changes of each of its backends
/// ([`RouteExtras::backend_edits`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn rule_action(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    from_kind: &str,
    ns: &str,
    i: usize,
    refs: &[BackendIn<'_>],
    protocol: UpstreamProtocol,
    resolved: &mut GatewayCondition,
) -> (RouteAction, Vec<Option<HeaderEdits>>) {
    // What a rule with no valid backend answers: the Gateway API asks for a 500 from an
    // HTTPRoute and for UNAVAILABLE from a GRPCRoute (the 503 Envoy turns into it).
    let no_backend = |why: String| match from_kind {
        "HTTPRoute" => RouteAction::Invalid(why),
        _ => RouteAction::Unavailable(why),
    };
    if refs.is_empty() {
        return (
            no_backend(format!("spec.rules[{i}] has no backendRefs")),
            Vec::new(),
        );
    }
    let mut clusters = Clusters::new();
    let mut edits: Vec<Option<HeaderEdits>> = Vec::new();
    let mut failed = None;
    // The weights of the backends that are not valid: their share of the requests fails.
    let mut failed_weight: u32 = 0;
    let from = (from_kind, ns);
    for (j, r) in refs.iter().enumerate() {
        let field = format!("spec.rules[{i}].backendRefs[{j}]");
        match resolve_backend(b, snapshot, from, &field, r, protocol) {
            Ok(cluster) => {
                let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
                if weight == 0 {
                    continue;
                }
                // Two backendRefs of one Service are one backend, unless their filters differ.
                let same = (clusters.iter_mut().zip(&edits))
                    .find(|(c, e)| c.cluster == cluster && **e == r.edits);
                match same {
                    Some((c, _)) => c.weight = c.weight.saturating_add(weight),
                    None => {
                        clusters.push(WeightedCluster { cluster, weight });
                        edits.push(r.edits.clone());
                    }
                }
            }
            Err((reason, message)) => {
                let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
                failed_weight = failed_weight.saturating_add(weight);
                // A backend whose BackendTLSPolicy is not accepted resolves: the policy's
                // status says why its requests fail.
                if reason != super::backend_tls::reason::POLICY_NOT_ACCEPTED {
                    unresolved(resolved, reason, &message);
                }
                failed = Some(message);
            }
        }
    }
    if clusters.is_empty() {
        let action = match failed {
            Some(why) => no_backend(why),
            None => RouteAction::Unavailable(format!(
                "every backendRef of spec.rules[{i}] has weight 0"
            )),
        };
        return (action, Vec::new());
    }
    if failed_weight > 0 {
        let cluster = match from_kind {
            "HTTPRoute" => INVALID_BACKEND_CLUSTER,
            _ => UNAVAILABLE_BACKEND_CLUSTER,
        };
        clusters.push(WeightedCluster {
            cluster: cluster.into(),
            weight: failed_weight,
        });
        edits.push(None);
    }
    if edits.iter().all(Option::is_none) {
        edits = Vec::new();
    }
    (RouteAction::Forward(clusters), edits)
}

/// The cluster of a backend (`field` names it in messages) of a route of kind `from.0` in
/// namespace `from.1`, or why it has none: the condition's reason and a message.
pub(super) fn resolve_backend(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    (from_kind, ns): (&str, &str),
    field: &str,
    r: &BackendIn<'_>,
    protocol: UpstreamProtocol,
) -> Result<ClusterName, (&'static str, String)> {
    let to_ns = r.namespace.unwrap_or(ns);
    let group = r.group.unwrap_or("");
    let kind = r.kind.unwrap_or("Service");
    if !group.is_empty() || kind != "Service" {
        Err((
            cond::INVALID_KIND,
            format!(
                "{field}: sluice routes to Services (group \"\", kind Service), not {kind} of group {group:?}"
            ),
        ))
    } else if to_ns != ns && !granted(snapshot, from_kind, ns, "Service", to_ns, r.name) {
        Err((
            cond::REF_NOT_PERMITTED,
            format!(
                "{field}: Service \"{to_ns}/{}\" is in another namespace and no ReferenceGrant there lets {from_kind}s of {ns:?} use it",
                r.name
            ),
        ))
    } else if let Some(port) = r.port {
        // What the Service port's `appProtocol` says it speaks: an HTTP backend that speaks
        // cleartext HTTP/2 gets it; one that wants TLS is refused (sluice speaks it to no
        // Gateway API backend yet). A stream's backend is spoken to as it is.
        let service_port = (protocol != UpstreamProtocol::Tcp)
            .then(|| {
                let svc = b.backing.services().get(&ObjKey::new(to_ns, r.name))?;
                let p = svc.ports.iter().find(|p| p.port == port)?;
                Some((p.app_protocol, p.name.clone()))
            })
            .flatten();
        let (app_protocol, port_name) = service_port.unwrap_or_default();
        // The BackendTLSPolicy of the port, for the backends of HTTP routes.
        let policy = match (protocol, b.backend_tls.as_mut()) {
            (UpstreamProtocol::Tcp, _) | (_, None) => BackendTls::None,
            (_, Some(policies)) => policies.backend(
                &ObjKey::new(to_ns, r.name),
                port_name.as_deref(),
                &b.route_backend.gateways,
            ),
        };
        let validation = match policy {
            BackendTls::None => None,
            BackendTls::Verify(v) => Some(v),
            BackendTls::Refused(why) => {
                return Err((
                    super::backend_tls::reason::POLICY_NOT_ACCEPTED,
                    format!("{field}: {why}"),
                ));
            }
        };
        let protocol = match (protocol, app_protocol) {
            (_, AppProtocol::WebSocketTls) => {
                return Err((
                    cond::UNSUPPORTED_PROTOCOL,
                    format!(
                        "{field}: port {port} of Service \"{to_ns}/{}\" has appProtocol {APP_PROTOCOL_WSS} (WebSockets over TLS), and sluice speaks TLS to no Gateway API backend; serve the WebSockets on a port of appProtocol kubernetes.io/ws or none",
                        r.name
                    ),
                ));
            }
            // A BackendTLSPolicy: TLS, HTTP/2 inside it where the port speaks HTTP/2.
            (UpstreamProtocol::Http, AppProtocol::H2c) if validation.is_some() => {
                UpstreamProtocol::H2
            }
            (UpstreamProtocol::H2c, _) if validation.is_some() => UpstreamProtocol::H2,
            (UpstreamProtocol::Http, _) if validation.is_some() => UpstreamProtocol::Https,
            (UpstreamProtocol::Http, AppProtocol::H2c) => UpstreamProtocol::H2c,
            (other, _) => other,
        };
        let backend = BackendRef {
            namespace: to_ns,
            service: r.name,
            port: PortRef::Number(port),
            protocol,
            lb: LbStrategy::RoundRobin,
            health_check: None,
            outlier_detection: None,
        };
        let client = (validation.is_some())
            .then(|| b.route_backend.client_secret.clone())
            .flatten();
        b.cluster_tls(&backend, validation.as_ref(), client.as_deref())
            .map_err(|m| (cond::BACKEND_NOT_FOUND, format!("{field}: {}", m.message)))
    } else {
        Err((
            cond::UNSUPPORTED_VALUE,
            format!("{field}.port: a Service backend needs a port"),
        ))
    }
}

/// Records a backend that does not resolve on the route's ResolvedRefs condition: the first
/// sets it false with its reason, each one's message is added.
pub(super) fn unresolved(resolved: &mut GatewayCondition, reason: &'static str, message: &str) {
    if resolved.status {
        *resolved = condition(cond::RESOLVED_REFS, false, reason, message.to_string());
    } else {
        resolved.message = format!("{}; {message}", resolved.message);
    }
}

/// A match as a status message names it.
pub(super) fn describe(m: &RuleMatch) -> String {
    let path = match &m.path {
        PathMatch::Exact(p) => format!("path {p:?} (Exact)"),
        PathMatch::Prefix(p) | PathMatch::StringPrefix(p) => format!("path {p:?} (PathPrefix)"),
        PathMatch::Regex(p) => format!("path {p:?} (RegularExpression)"),
    };
    let count = |n: usize, what: &str| match n {
        0 => None,
        1 => Some(format!("1 {what} condition")),
        n => Some(format!("{n} {what} conditions")),
    };
    let conditions: Vec<String> = [
        count(m.headers.len(), "header"),
        count(m.query.len(), "query parameter"),
    ]
    .into_iter()
    .flatten()
    .collect();
    match conditions.is_empty() {
        true => path,
        false => format!("{path} with {}", conditions.join(" and ")),
    }
}
