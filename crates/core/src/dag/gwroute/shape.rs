//! The one internal shape the four route kinds of the Gateway API (HTTPRoute, GRPCRoute,
//! TLSRoute, TCPRoute) are lowered into: parents (`parentRefs`), hostnames, and rules with their
//! matches, filters and backends (`backendRefs`). Each kind's file lowers it
//! ([`GatewayRoute`]); attaching, statuses and backends are written once over this shape.

use super::super::gateway_common::GROUP;
use super::super::model::{
    Cors, HeaderEdit, HeaderEdits, HeaderMatch, PathMatch, QueryMatch, Redirect, Rewrite,
    UpstreamProtocol,
};
use crate::api::{Kind, ObjKey};
use crate::validate::common::Timeout;
use crate::validate::gateway::{HeaderModifier, RouteFilter};

/// A route kind of the Gateway API as the build reads it: each of the four generated types
/// lowers itself into the shared shape.
pub(in crate::dag) trait GatewayRoute {
    /// The route's kind.
    const KIND: Kind;

    /// Its parents, hostnames and generation.
    fn head(&self) -> RouteHead<'_>;

    /// Every Service it names, as (namespace as written, name): its backends and its mirrors'.
    fn services(&self) -> Vec<(Option<&str>, &str)>;

    /// Its rules, lowered (read only for a route attached to sluice's Gateways and not refused).
    fn rules(&self) -> Vec<RuleIn<'_>>;
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

impl ParentIn<'_> {
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
    pub edits: Option<HeaderEdits>,
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
#[derive(Default)]
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

/// A rule of any route kind, lowered.
pub(in crate::dag) struct RuleIn<'r> {
    /// Its matches (one of every request for a rule of none; none for a connection route).
    pub matches: Vec<RuleMatch>,
    pub filters: RuleFilters,
    pub mirrors: Vec<MirrorIn<'r>>,
    pub backends: Vec<BackendIn<'r>>,
}

impl<'r> RuleIn<'r> {
    /// A rule of a route that forwards connections: backends alone.
    pub fn connections(backends: Vec<BackendIn<'r>>) -> Self {
        RuleIn {
            matches: Vec::new(),
            filters: RuleFilters::default(),
            mirrors: Vec::new(),
            backends,
        }
    }
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
/// a GRPCRoute, read through the view validation reads them by ([`RouteFilter`]).
pub(in crate::dag) fn filter_edits<F: RouteFilter>(filters: &[F]) -> Option<HeaderEdits> {
    let mut edits = HeaderEdits::default();
    for f in filters {
        let fields = f.fields();
        if let Some(m) = &fields.request_headers {
            add_modifier(&mut edits.request, m);
        }
        if let Some(m) = &fields.response_headers {
            add_modifier(&mut edits.response, m);
        }
    }
    some_edits(edits)
}

/// One header modifier's changes, names in lower case.
fn add_modifier(edit: &mut HeaderEdit, m: &HeaderModifier<'_>) {
    let pair = |&(name, value): &(&str, &str)| (name.to_ascii_lowercase(), value.to_string());
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
        let m = HeaderModifier {
            set: vec![("X-A", "V")],
            add: vec![],
            remove: vec!["X-B"],
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
