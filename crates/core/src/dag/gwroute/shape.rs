//! The one internal shape the four route kinds of the Gateway API (HTTPRoute, GRPCRoute,
//! TLSRoute, TCPRoute) are lowered into when they arrive ([`RouteShape`]): parents
//! (`parentRefs`), hostnames, and rules with their matches, filters and backends
//! (`backendRefs`). What the API defines once for every kind is read through one type
//! ([`crate::api::gateway_route`]); each kind's file adds only what is its own
//! ([`GatewayRoute::own_rules`]: matches, redirects, rewrites, CORS, timeouts, retries).
//! Attaching, statuses and backends are written once over the shape's borrowed views
//! ([`RouteShape::head`], [`RouteShape::rules`]).

use serde::Serialize;

use super::super::gateway_common::GROUP;
use super::super::model::{
    Cors, HeaderEdit, HeaderEdits, HeaderMatch, PathMatch, QueryMatch, Redirect, Rewrite,
    UpstreamProtocol,
};
use crate::api::gateway_route::{self as shared, RouteSpec};
use crate::api::{Kind, ObjKey};
use crate::validate::common::Timeout;
use crate::validate::{FieldError, Verdict};

/// A route kind of the Gateway API as it is lowered on arrival: the generated type's `spec`
/// (whose shared fields are read as [`RouteSpec`]) and what only the kind has.
pub(in crate::dag) trait GatewayRoute: kube::Resource {
    /// The route's kind.
    const KIND: Kind;
    /// The generated type of its `spec`.
    type Spec: Serialize;

    fn spec(&self) -> &Self::Spec;

    /// The kind's single-object rules, given its shared fields (`v` holds what reading them
    /// found).
    fn validate(&self, v: Verdict, spec: &RouteSpec) -> Verdict;

    /// What the route uses that sluice does not route yet, given its shared fields (asked only
    /// of a route without problems).
    fn unsupported(&self, spec: &RouteSpec) -> Vec<FieldError>;

    /// What each rule has of the kind's own (one per rule, in order): its matches and what its
    /// filters other than header modifiers and mirrors do. None for a kind without such.
    fn own_rules(&self) -> Vec<OwnRule> {
        Vec::new()
    }
}

/// A route of any kind, lowered once when it arrives ([`crate::store::Prepared`]).
#[derive(Debug)]
pub struct RouteShape {
    pub(in crate::dag) kind: Kind,
    pub(in crate::dag) generation: Option<i64>,
    /// Its parents, hostnames, and each rule's backends and filters.
    pub(in crate::dag) spec: RouteSpec,
    /// Each rule's own parts, by the index of `spec.rules`.
    pub(in crate::dag) rules: Vec<OwnRule>,
}

/// A rule's matches, what its filters do, and the header changes of each of its backendRefs.
#[derive(Debug, Default)]
pub(in crate::dag) struct OwnRule {
    /// Its matches (one of every request for an HTTP rule of none; none for a connection
    /// route).
    pub matches: Vec<RuleMatch>,
    pub filters: RuleFilters,
    /// The header changes of each backendRef's filters.
    pub backend_edits: Vec<Option<HeaderEdits>>,
}

impl RouteShape {
    /// `route` lowered, its shared fields read already (`spec`).
    pub(in crate::dag) fn lower<R: GatewayRoute>(route: &R, spec: RouteSpec) -> RouteShape {
        let mut own = route.own_rules().into_iter();
        let rules = (spec.rules.iter())
            .map(|rule| {
                let mut r = own.next().unwrap_or_default();
                r.filters.edits = filter_edits(&rule.filters);
                r.backend_edits = (rule.backend_refs.iter())
                    .map(|b| filter_edits(&b.filters))
                    .collect();
                r
            })
            .collect();
        RouteShape {
            kind: R::KIND,
            generation: route.meta().generation,
            spec,
            rules,
        }
    }

    /// Its parents, hostnames and generation.
    pub(in crate::dag) fn head(&self) -> RouteHead<'_> {
        RouteHead {
            generation: self.generation,
            parents: self.spec.parent_refs.iter().map(ParentIn::of).collect(),
            hostnames: &self.spec.hostnames,
        }
    }

    /// Every Service it names, as (namespace as written, name): its backends and its mirrors'.
    pub(in crate::dag) fn services(&self) -> Vec<(Option<&str>, &str)> {
        let rules = self.spec.rules.iter();
        let backends = (rules.clone().flat_map(|r| &r.backend_refs))
            .map(|b| (b.namespace.as_deref(), b.name.as_str()));
        let filters = rules.flat_map(|r| &r.filters);
        let mirrors = (filters.filter_map(|f| f.request_mirror.as_ref())).map(|m| {
            (
                m.backend_ref.namespace.as_deref(),
                m.backend_ref.name.as_str(),
            )
        });
        backends.chain(mirrors).collect()
    }

    /// Its rules (read only for a route attached to sluice's Gateways and not refused).
    pub(in crate::dag) fn rules(&self) -> Vec<RuleIn<'_>> {
        (self.spec.rules.iter().zip(&self.rules))
            .map(|(rule, own)| RuleIn {
                matches: &own.matches,
                filters: &own.filters,
                mirrors: rule_mirrors(&rule.filters),
                backends: (rule.backend_refs.iter().zip(&own.backend_edits))
                    .map(|(r, edits)| BackendIn {
                        group: r.group.as_deref(),
                        kind: r.kind.as_deref(),
                        namespace: r.namespace.as_deref(),
                        name: &r.name,
                        port: r.port,
                        weight: r.weight,
                        edits: edits.as_ref(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The `RequestMirror` filters of a rule (each numbered among them).
fn rule_mirrors(filters: &[shared::Filter]) -> Vec<MirrorIn<'_>> {
    let mirrors = filters.iter().filter(|f| f.type_ == shared::REQUEST_MIRROR);
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

/// What attaching reads of a route of any kind before its rules.
pub(in crate::dag) struct RouteHead<'r> {
    pub generation: Option<i64>,
    pub parents: Vec<ParentIn<'r>>,
    /// `spec.hostnames` (none for a TCPRoute).
    pub hostnames: &'r [String],
}

/// A route's `parentRefs` entry, of any route kind.
pub(in crate::dag) struct ParentIn<'r> {
    pub group: Option<&'r str>,
    pub kind: Option<&'r str>,
    pub namespace: Option<&'r str>,
    pub name: &'r str,
    pub section_name: Option<&'r str>,
    pub port: Option<i32>,
}

impl<'r> ParentIn<'r> {
    fn of(p: &'r shared::ParentRef) -> Self {
        ParentIn {
            group: p.group.as_deref(),
            kind: p.kind.as_deref(),
            namespace: p.namespace.as_deref(),
            name: &p.name,
            section_name: p.section_name.as_deref(),
            port: p.port,
        }
    }

    /// The ListenerSet this parentRef names (its key, the namespace defaulting to the route's
    /// `route_ns`), None when it names something else (a Gateway, another kind).
    pub fn listener_set(&self, route_ns: &str) -> Option<ObjKey> {
        let ours = self.group.unwrap_or(GROUP) == GROUP && self.kind == Some("ListenerSet");
        ours.then(|| ObjKey::new(self.namespace.unwrap_or(route_ns), self.name))
    }
}

/// A rule's `backendRefs` entry (or a mirror's `backendRef`), of any route kind.
pub(in crate::dag) struct BackendIn<'r> {
    pub group: Option<&'r str>,
    pub kind: Option<&'r str>,
    pub namespace: Option<&'r str>,
    pub name: &'r str,
    pub port: Option<i32>,
    pub weight: Option<i32>,
    /// The header changes of the backendRef's filters.
    pub edits: Option<&'r HeaderEdits>,
}

/// A rule's `RequestMirror` filter.
pub(in crate::dag) struct MirrorIn<'r> {
    /// The filter's index in the rule's filters (status messages name it).
    pub filter: usize,
    pub backend: BackendIn<'r>,
    /// Its share of the requests ([`mirror_share`]).
    pub per_million: u32,
}

/// One match of a rule: the conditions a request meets to take the rule.
#[derive(Debug)]
pub(in crate::dag) struct RuleMatch {
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

/// What a rule's filters (and timeouts and retries) do besides mirroring; what a kind does not
/// have stays None.
#[derive(Debug, Default)]
pub(in crate::dag) struct RuleFilters {
    /// The header changes of its header modifier filters.
    pub edits: Option<HeaderEdits>,
    /// A `RequestRedirect`: the rule answers it, its backends and mirrors take no requests.
    pub redirect: Option<Redirect>,
    pub rewrite: Option<Rewrite>,
    /// The rule's CORS policy (HTTPRoute `CORS` filter).
    pub cors: Option<Cors>,
    pub timeout: Option<Timeout>,
    /// A per-try timeout and retries (HTTPRoute `timeouts.backendRequest`, `retry`).
    pub retry: Option<crate::dag::RetryPolicy>,
}

/// A rule of any route kind, as the build reads it.
pub(in crate::dag) struct RuleIn<'r> {
    /// Its matches (one of every request for a rule of none; none for a connection route).
    pub matches: &'r [RuleMatch],
    pub filters: &'r RuleFilters,
    pub mirrors: Vec<MirrorIn<'r>>,
    pub backends: Vec<BackendIn<'r>>,
}

/// The protocol sluice speaks to the backends of a route of `kind`: HTTP/1.1 (upgraded where
/// the Service port says so) for an HTTPRoute, cleartext HTTP/2 for a GRPCRoute, the
/// connection's bytes for a TCPRoute or TLSRoute.
pub(in crate::dag) fn upstream_protocol(kind: Kind) -> UpstreamProtocol {
    match kind {
        Kind::HttpRoute => UpstreamProtocol::Http,
        Kind::GrpcRoute => UpstreamProtocol::H2c,
        _ => UpstreamProtocol::Tcp,
    }
}

/// A mirror's share of the requests in millionths: `percent`, else `fraction` (numerator and
/// denominator, 100 by default), else every request. Out-of-range values (the webhook refuses
/// them) are held to 0–100%.
pub(in crate::dag) fn mirror_share(
    percent: Option<i32>,
    fraction: Option<(i32, Option<i32>)>,
) -> u32 {
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

/// The header changes of header modifier filters: a rule's or a backendRef's, of an HTTPRoute or
/// a GRPCRoute.
fn filter_edits(filters: &[shared::Filter]) -> Option<HeaderEdits> {
    let mut edits = HeaderEdits::default();
    for f in filters {
        if let Some(m) = &f.request_header_modifier {
            add_modifier(&mut edits.request, m);
        }
        if let Some(m) = &f.response_header_modifier {
            add_modifier(&mut edits.response, m);
        }
    }
    some_edits(edits)
}

/// One header modifier's changes, names in lower case.
fn add_modifier(edit: &mut HeaderEdit, m: &shared::HeaderModifier) {
    let pair = |h: &shared::Header| (h.name.to_ascii_lowercase(), h.value.clone());
    edit.set.extend(m.set.iter().map(pair));
    edit.add.extend(m.add.iter().map(pair));
    (edit.remove).extend(m.remove.iter().map(|n| n.to_ascii_lowercase()));
}

/// `edits`, None when they change no header.
pub(in crate::dag) fn some_edits(edits: HeaderEdits) -> Option<HeaderEdits> {
    (!(edits.request.is_empty() && edits.response.is_empty())).then_some(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_share_prefers_percent_then_fraction() {
        assert_eq!(mirror_share(None, None), 1_000_000);
        assert_eq!(mirror_share(Some(25), Some((1, Some(2)))), 250_000);
        assert_eq!(mirror_share(None, Some((1, Some(4)))), 250_000);
        assert_eq!(mirror_share(None, Some((5, None))), 50_000);
        assert_eq!(mirror_share(None, Some((1, Some(0)))), 0);
        assert_eq!(mirror_share(Some(200), None), 1_000_000);
    }

    #[test]
    fn edits_lowercase_names_and_keep_values() {
        let m = shared::HeaderModifier {
            set: vec![shared::Header {
                name: "X-A".into(),
                value: "V".into(),
            }],
            add: vec![],
            remove: vec!["X-B".into()],
        };
        let mut edits = HeaderEdits::default();
        add_modifier(&mut edits.request, &m);
        let edits = some_edits(edits).expect("edits");
        assert_eq!(
            edits.request.set,
            vec![("x-a".to_string(), "V".to_string())]
        );
        assert_eq!(edits.request.remove, vec!["x-b".to_string()]);
        assert!(some_edits(HeaderEdits::default()).is_none());
    }

    #[test]
    fn backends_of_connections_are_spoken_to_as_streams() {
        assert_eq!(upstream_protocol(Kind::HttpRoute), UpstreamProtocol::Http);
        assert_eq!(upstream_protocol(Kind::GrpcRoute), UpstreamProtocol::H2c);
        assert_eq!(upstream_protocol(Kind::TcpRoute), UpstreamProtocol::Tcp);
        assert_eq!(upstream_protocol(Kind::TlsRoute), UpstreamProtocol::Tcp);
    }
}
