//! The virtual hosts of one place routes are served at, as a build makes them: Envoy's shared
//! listeners, or one port of a Gateway's own address ([`super::Builder`]).

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashMap, HashTable};

use super::model::*;
use super::sort::sorted_entries;
use crate::api::ObjectRef;

/// A virtual host being built, with the match identity (path and header conditions) of each of its
/// routes for duplicate detection: the table holds indexes into `vhost.routes`, once the host has
/// [`INDEX_ROUTES_FROM`] routes (fewer are compared one by one).
///
/// The host is made shared, as the model holds it, when it is made (and changed through
/// [`VhostAcc::get_mut`] while the build alone holds it): [`Builder::finish`] then hands it to
/// the model as it is, instead of copying each host to a new place.
pub(super) struct VhostAcc {
    pub(super) vhost: Arc<VirtualHost>,
    pub(super) matches: HashTable<usize>,
}

impl VhostAcc {
    /// The host, to change. The build holds the only reference until it finishes, so this never
    /// copies it.
    pub(super) fn get_mut(&mut self) -> &mut VirtualHost {
        Arc::make_mut(&mut self.vhost)
    }
}

/// The virtual hosts of one place routes are served at: Envoy's shared listeners, or one port of
/// a Gateway's own address.
///
/// The hosts are in the order they were first named; `index` finds them by name. Kept in a
/// vector rather than in the table itself: the table's entries stay small (a few thousand fit in
/// the CPU's caches where whole hosts would not), and so do the vector's (each host is shared
/// from the start, see [`VhostAcc`]).
pub(super) struct Hosts {
    pub(super) vhosts: Vec<VhostAcc>,
    /// The position in `vhosts` of each host, by its name (`VirtualHost::host`).
    index: HashTable<usize>,
}

impl Hosts {
    pub(super) fn with_capacity(n: usize) -> Hosts {
        Hosts {
            vhosts: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
        }
    }

    /// The position of the virtual host of a lowercase name, created on first use with the
    /// owner `owner` gives.
    pub(super) fn id(
        &mut self,
        hasher: &DefaultHashBuilder,
        host: &str,
        owner: impl FnOnce() -> Option<ObjectRef>,
    ) -> usize {
        let vhosts = &self.vhosts;
        let hash = hasher.hash_one(host);
        if let Some(&i) = self.index.find(hash, |&i| vhosts[i].vhost.host == host) {
            return i;
        }
        let i = vhosts.len();
        self.vhosts.push(VhostAcc {
            vhost: Arc::new(VirtualHost {
                host: host.to_string(),
                tls: None,
                tcp_proxy: None,
                tls_passthrough: None,
                routes: Vec::new(),
                owner: owner(),
                isolated: false,
            }),
            matches: HashTable::new(),
        });
        let vhosts = &self.vhosts;
        (self.index).insert_unique(hash, i, |&j| hasher.hash_one(vhosts[j].vhost.host.as_str()));
        i
    }

    /// Adds a route to the host at `i`; see [`Builder::add_route`].
    pub(super) fn add_route(
        &mut self,
        hasher: &DefaultHashBuilder,
        i: usize,
        mut route: Route,
    ) -> Result<(), Box<(ObjectRef, Route)>> {
        route.headers.sort();
        if let Some(e) = route.extras.as_deref_mut() {
            e.query.sort();
        }
        let acc = &mut self.vhosts[i];
        let routes = &acc.vhost.routes;
        let same = |&i: &usize| {
            let r = &routes[i];
            r.path == route.path && r.headers == route.headers && r.query() == route.query()
        };
        if routes.len() < INDEX_ROUTES_FROM {
            // Few routes: compared one by one, no table.
            if let Some(i) = (0..routes.len()).find(same) {
                return Err(Box::new((routes[i].source.clone(), route)));
            }
        } else {
            let hash_of = |r: &Route| match_hash(hasher, r);
            if acc.matches.is_empty() {
                // The table starts with the routes compared one by one so far.
                acc.matches
                    .reserve(2 * routes.len(), |&j| hash_of(&routes[j]));
                for (j, r) in routes.iter().enumerate() {
                    acc.matches
                        .insert_unique(hash_of(r), j, |&k| hash_of(&routes[k]));
                }
            }
            if let Some(&i) = acc.matches.find(hash_of(&route), same) {
                return Err(Box::new((routes[i].source.clone(), route)));
            }
            let i = routes.len();
            acc.matches
                .insert_unique(hash_of(&route), i, |&j| hash_of(&routes[j]));
        }
        acc.get_mut().routes.push(route);
        Ok(())
    }

    /// The hosts that route or forward anything, their routes sorted by precedence, in name
    /// order; the clusters they use are marked used.
    pub(super) fn finish(
        self,
        clusters: &mut HashMap<ClusterName, (Arc<Cluster>, bool)>,
    ) -> Vec<(String, Arc<VirtualHost>)> {
        sorted_entries(
            self.vhosts
                .into_iter()
                .filter(|a| {
                    let v = &a.vhost;
                    !v.routes.is_empty() || v.tcp_proxy.is_some() || v.tls_passthrough.is_some()
                })
                .map(|mut a| {
                    let v = a.get_mut();
                    let host = v.host.clone();
                    v.routes.sort_by(route_precedence);
                    v.routes = super::exact_vec(std::mem::take(&mut v.routes));
                    // The clusters the model's hosts use, marked while the routes are at hand.
                    for name in vhost_clusters(v) {
                        if let Some((_, used)) = clusters.get_mut(&**name) {
                            *used = true;
                        }
                    }
                    (host, a.vhost)
                }),
        )
    }
}

/// One port of a Gateway's own address, being built.
pub(super) struct EntryAcc {
    pub(super) address: std::net::IpAddr,
    pub(super) protocol: EntryProtocol,
    pub(super) hosts: Hosts,
    pub(super) tcp: Option<(Clusters, ObjectRef)>,
    pub(super) default_secret: Option<String>,
    pub(super) https_listeners: Vec<Option<String>>,
    /// The port's client certificate validation ([`super::model::Entry::client_validation`]).
    pub(super) client_validation: Option<super::model::ClientValidation>,
}

/// Where a Gateway API route is served: on Envoy's shared listeners (None), or at one port of a
/// Gateway's own address.
pub type Scope<'k> = Option<&'k EntryKey>;

/// The number of routes from which a virtual host's duplicate detection goes through a hash table.
/// Most hosts have a handful of routes, and comparing a new route with each is cheaper than
/// hashing it and allocating a table per host.
pub(super) const INDEX_ROUTES_FROM: usize = 8;

fn match_hash(hasher: &DefaultHashBuilder, r: &Route) -> u64 {
    hasher.hash_one((&r.path, &r.headers, r.query()))
}

/// The names of the clusters a virtual host's routes, TCP proxy and TLS passthrough forward to
/// (with repeats).
pub fn vhost_clusters(v: &VirtualHost) -> impl Iterator<Item = &ClusterName> {
    let routes = v.routes.iter().flat_map(|r| match &r.action {
        RouteAction::Forward(cs) => cs.as_slice(),
        RouteAction::Unavailable(_) | RouteAction::Invalid(_) | RouteAction::Redirect(_) => &[],
    });
    let mirrors = v
        .routes
        .iter()
        .flat_map(|r| r.mirrors().iter().map(|m| &m.cluster));
    let proxied = v.tcp_proxy.iter().chain(&v.tls_passthrough).flatten();
    (routes.chain(proxied)).map(|c| &c.cluster).chain(mirrors)
}

/// Route precedence: exact paths first, then regular expressions (longer first), then longer
/// prefixes, then (same path) more header conditions, then more query parameter conditions, then
/// a stable order.
pub fn route_precedence(a: &Route, b: &Route) -> std::cmp::Ordering {
    use std::cmp::Reverse;
    fn rank(r: &Route) -> (u8, Reverse<usize>, u8, Reverse<usize>, Reverse<usize>) {
        let (class, sub) = match &r.path {
            PathMatch::Exact(_) => (0, 0),
            PathMatch::Regex(_) => (1, 0),
            PathMatch::Prefix(_) => (2, 0),
            PathMatch::StringPrefix(_) => (2, 1),
        };
        (
            class,
            Reverse(r.path.value().len()),
            sub,
            Reverse(r.headers.len()),
            Reverse(r.query().len()),
        )
    }
    let by_rank = rank(a).cmp(&rank(b));
    // Between Gateway API routes a tie goes to the older route, then to its earlier rule, as the
    // Gateway API says: the order they were added in (routes oldest first, rules in order), which
    // the stable sort keeps.
    let gateway_api = |r: &Route| {
        matches!(
            r.source.kind,
            crate::api::Kind::HttpRoute
                | crate::api::Kind::GrpcRoute
                | crate::api::Kind::TlsRoute
                | crate::api::Kind::TcpRoute
        )
    };
    if by_rank.is_eq() && gateway_api(a) && gateway_api(b) {
        return by_rank;
    }
    by_rank
        .then_with(|| a.path.cmp(&b.path))
        .then_with(|| a.headers.cmp(&b.headers))
        .then_with(|| a.query().cmp(b.query()))
        .then_with(|| a.source.cmp(&b.source))
}
