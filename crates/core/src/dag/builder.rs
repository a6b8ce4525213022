//! The shared state processors write into: host ownership, virtual hosts, clusters (with endpoints
//! resolved from EndpointSlices), TLS secrets and per-object status. Backends are resolved in the
//! store's index of Services and their EndpointSlices ([`crate::store::ServiceIndex`]).

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use hashbrown::hash_map::RawEntryMut;
use hashbrown::{DefaultHashBuilder, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::Options;
use super::halves::Half;
use super::hosts::{EntryAcc, Hosts, Scope};
pub use super::hosts::{route_precedence, vhost_clusters};
use super::model::*;
use super::slots::{ORPHANED, Of, Slot, SlotIndex, StatusSlots};
use super::sort::sorted_entries;
use crate::api::status::reason;
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::{CaBundle, Objects, PortEndpoints, ServicePortRef, Snapshot, TlsSecretData};
use crate::validate::FieldError;

pub use super::clusters::{BackendRef, DEFAULT_HEALTH_CHECK_HOST, PortRef};
pub use super::clusters::{
    cluster_endpoints, clusters_of_service, effective_weights, health_check_policy,
};
pub(super) use super::clusters::{effective_weight, weights_even, write_cluster_name};
pub use crate::store::SERVICE_NAME_LABEL;

#[derive(Clone)]
struct HostClaim {
    owner: ObjectRef,
    created: Option<Time>,
}

/// A virtual host of one build, by its position among the build's hosts ([`Builder::host_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostId(usize);

/// The lowercase form of a host name, borrowed when it already is lowercase.
fn lowercase(host: &str) -> Cow<'_, str> {
    if host.bytes().any(|c| c.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// Shared state of one `dag::build`.
///
/// The maps here are hash maps (hashbrown's fast, randomly seeded hasher): whatever the model exposes
/// is turned into sorted BTreeMaps by [`Builder::finish`], and nothing else iterates them in an order
/// that reaches the output.
pub struct Builder<'a> {
    /// The routing objects to build (all of them, or one part of them in an incremental build).
    pub snapshot: &'a Snapshot,
    /// Where Services, EndpointSlices and Secrets are looked up, and what sizes the delegation
    /// walk's budget: the whole snapshot, whichever part of its routing objects is built.
    pub backing: &'a Snapshot,
    pub options: &'a Options,
    /// The virtual hosts of Envoy's shared listeners.
    hosts: Hosts,
    /// The ports of Gateways with addresses of their own ([`Dag::entries`]).
    entries: std::collections::BTreeMap<EntryKey, EntryAcc>,
    /// Every cluster a backend resolved to, and whether a route of the model uses it (decided
    /// by [`Builder::finish`]: a route refused after its backends resolved uses none).
    /// The clusters are made shared (as the model holds them) when they are made: the table's
    /// entries stay small, and nothing moves a cluster's settings and endpoints again.
    clusters: HashMap<ClusterName, (Arc<Cluster>, bool)>,
    /// The name of the cluster a backend resolves to, written here to look it up: a new
    /// cluster's name is copied from it once, a known one's not at all.
    cluster_name: String,
    /// The TLS Secrets resolved so far, by id (`namespace/name`), and the CA certificates
    /// (`namespace/name/ca.crt`, [`ca_secret_id`]).
    secrets: HashMap<String, TlsSecret>,
    /// The clusters that verify their backends' certificates (few: their CA secrets are the
    /// model's when they are used).
    verifying: Vec<ClusterName>,
    statuses: StatusSlots<'a>,
    /// Each claimed host's first claimant, and any others (most hosts have one: no vector).
    /// Once [`Builder::settle_host_claims`] has run, the first is the host's owner and there
    /// are no others: the table of claims is the table of owners.
    claims: HashMap<String, (HostClaim, Vec<HostClaim>)>,
    /// In a parallel build, the routing objects of `snapshot` this builder builds; None: all.
    half: Option<Half<'a>>,
    /// The ports of Gateway TCP listeners with a TCPRoute, each once.
    tcp_listeners: Vec<(u16, Arc<TcpListener>)>,
    hasher: DefaultHashBuilder,
    /// The BackendTLSPolicies, while the Gateway API objects are built.
    pub(super) backend_tls: Option<super::backend_tls_state::BackendTlsPolicies>,
    /// The route whose rules are being built: its parent Gateways of sluice's (the ancestors of
    /// the BackendTLSPolicies of its backends) and the client certificate they present to TLS
    /// backends (a key into the secrets table).
    pub(super) route_backend: RouteBackendTls,
}

/// What a route's TLS backends depend on of the Gateways it is attached to.
#[derive(Default)]
pub(super) struct RouteBackendTls {
    pub gateways: Vec<ObjKey>,
    pub client_secret: Option<String>,
}

impl<'a> Builder<'a> {
    /// A builder over every routing object of `snapshot`.
    pub fn new(snapshot: &'a Snapshot, options: &'a Options) -> Self {
        Builder::empty(snapshot, snapshot, options, None)
    }

    /// A builder over the routing objects of `part`, looking up everything else in `whole`
    /// (an incremental build of the part of the objects a change affects).
    pub fn partial(part: &'a Snapshot, whole: &'a Snapshot, options: &'a Options) -> Self {
        Builder::empty(part, whole, options, None)
    }

    /// A builder over one half of the routing objects of `snapshot` (a parallel build; see
    /// [`super::parallel`]).
    pub(super) fn half(snapshot: &'a Snapshot, half: Half<'a>, options: &'a Options) -> Self {
        Builder::empty(snapshot, snapshot, options, Some(half))
    }

    /// A builder over the routing objects of `snapshot` (of its `half`), looking up everything
    /// else in `backing`.
    fn empty(
        snapshot: &'a Snapshot,
        backing: &'a Snapshot,
        options: &'a Options,
        half: Option<Half<'a>>,
    ) -> Self {
        let statuses = StatusSlots::new(snapshot, half);
        let routing_objects = statuses.index().len();
        Builder {
            snapshot,
            backing,
            options,
            // Sized for a host per routing object, about what the synthetic clusters and the
            // clusters seen have: growing a table of thousands of hosts step by step rehashes
            // every host at each step.
            hosts: Hosts::with_capacity(routing_objects),
            entries: std::collections::BTreeMap::new(),
            clusters: HashMap::with_capacity(backing.services().len().min(routing_objects)),
            cluster_name: String::new(),
            secrets: HashMap::new(),
            verifying: Vec::new(),
            statuses,
            claims: HashMap::with_capacity(routing_objects),
            half,
            tcp_listeners: Vec::new(),
            hasher: DefaultHashBuilder::default(),
            backend_tls: None,
            route_backend: RouteBackendTls::default(),
        }
    }

    /// Forwards the TCP connections of `port` to `clusters` (a TCPRoute's backends). The port
    /// is one listener's: the Gateway API build gives each port to one listener and one route.
    pub fn add_tcp_listener(&mut self, port: u16, clusters: Clusters, route: ObjectRef) {
        debug_assert!(self.tcp_listeners.iter().all(|(p, _)| *p != port));
        let listener = TcpListener {
            port,
            clusters,
            route,
        };
        self.tcp_listeners.push((port, Arc::new(listener)));
    }

    /// Whether this builder builds the Gateway API objects of its snapshot (in a parallel build,
    /// one half does, as one part).
    pub fn builds_gateway_api(&self) -> bool {
        self.half.is_none_or(|h| h.holds_gateway_api())
    }

    /// The routing objects of one kind this builder builds, in key order, each with its slot
    /// (what its status is said of): `objects` (the builder's snapshot's map of `kind`), or the
    /// objects of it in this builder's half.
    pub fn own<T>(
        &self,
        kind: Kind,
        objects: &'a Objects<T>,
    ) -> impl Iterator<Item = (Slot, &'a ObjKey, &'a Arc<T>)> + use<'a, T> {
        let half = self.half;
        let start = self.statuses.index().start(kind);
        objects
            .iter()
            .enumerate()
            .filter(move |(i, _)| half.is_none_or(|h| h.holds(kind, *i)))
            .zip(start..)
            .map(|((_, (key, o)), slot)| (slot, key, o))
    }

    // ---- status ----

    /// The numbering of the routing objects this builder builds.
    pub(super) fn slot_index(&self) -> &Rc<SlotIndex<'a>> {
        self.statuses.index()
    }

    /// Registers a routing object so it gets a status even if nothing else is said about it.
    pub fn track(&mut self, slot: Slot, meta: &ObjectMeta) {
        self.track_generation(slot, meta.generation);
    }

    /// [`Builder::track`] from the object's generation alone.
    pub fn track_generation(&mut self, slot: Slot, generation: Option<i64>) {
        self.statuses.acc(Of::Slot(slot)).generation = generation;
    }

    /// Records the generation of an object the builder did not number (a Gateway API object).
    pub fn track_generation_of(&mut self, obj: &ObjectRef, generation: Option<i64>) {
        self.statuses.acc(Of::Obj(obj)).generation = generation;
    }

    /// Sets the Gateway API status of a GatewayClass, Gateway or HTTPRoute.
    pub fn set_gateway_status(&mut self, obj: &ObjectRef, status: GatewayApiStatus) {
        self.statuses.acc(Of::Obj(obj)).gateway = Some(Box::new(status));
    }

    /// Marks the object invalid with one more problem, tied to no one field ([`Builder::fail`]).
    pub fn set_invalid<'r>(
        &mut self,
        obj: impl Into<Of<'r>>,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        self.fail(obj, FieldError::new("", reason, message));
    }

    /// Marks the object invalid with one more problem. Invalid is final: later calls to
    /// [`Builder::set_valid`] or [`Builder::set_orphaned`] do not undo it.
    pub fn fail<'r>(&mut self, obj: impl Into<Of<'r>>, problem: FieldError) {
        let acc = self.statuses.acc(obj.into());
        if acc.state != Some(State::Invalid) {
            // A description written while the object still looked valid no longer applies.
            acc.description = None;
        }
        acc.state = Some(State::Invalid);
        acc.messages.push(problem);
    }

    /// Adds a warning, tied to no one field, to the object's status, whatever its state.
    pub fn add_warning<'r>(
        &mut self,
        obj: impl Into<Of<'r>>,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        (self.statuses.acc(obj.into()).warnings).push(FieldError::new("", reason, message));
    }

    /// Gives the object a condition besides Valid and Ready (see [`ObjectStatus::condition`]).
    pub fn set_condition<'r>(&mut self, obj: impl Into<Of<'r>>, condition: Arc<GatewayCondition>) {
        self.statuses.acc(obj.into()).condition = Some(condition);
    }

    /// Marks the object valid (unless already invalid), with the description to show.
    pub fn set_valid<'r>(
        &mut self,
        obj: impl Into<Of<'r>>,
        description: impl Into<Cow<'static, str>>,
    ) {
        self.set_valid_with(obj, || description.into());
    }

    /// [`Builder::set_valid`], making the description only when the object has none yet.
    pub fn set_valid_with<'r>(
        &mut self,
        obj: impl Into<Of<'r>>,
        description: impl FnOnce() -> Cow<'static, str>,
    ) {
        let acc = self.statuses.acc(obj.into());
        if acc.state != Some(State::Invalid) {
            acc.state = Some(State::Valid);
            acc.description.get_or_insert_with(description);
        }
    }

    /// Marks the object orphaned unless something else was decided about it.
    pub fn set_orphaned<'r>(&mut self, obj: impl Into<Of<'r>>) {
        let acc = self.statuses.acc(obj.into());
        if acc.state.is_none() {
            acc.state = Some(State::Orphaned);
            acc.description = Some(ORPHANED.into());
        }
    }

    /// Marks the object ignored (another controller's), with why.
    pub fn set_ignored<'r>(
        &mut self,
        obj: impl Into<Of<'r>>,
        message: impl Into<Cow<'static, str>>,
    ) {
        let acc = self.statuses.acc(obj.into());
        acc.state = Some(State::Ignored);
        acc.description = Some(message.into());
    }

    /// The state decided so far, if any.
    pub fn state_of<'r>(&self, obj: impl Into<Of<'r>>) -> Option<State> {
        self.statuses.get(obj.into()).and_then(|a| a.state)
    }

    // ---- virtual host ownership ----

    /// Records that a root wants to own a host exclusively; [`Builder::settle_host_claims`] picks
    /// the oldest claimant (creationTimestamp, then namespace, then name).
    pub fn claim_host(&mut self, host: &str, owner: ObjectRef, created: Option<Time>) {
        let claim = HostClaim { owner, created };
        match self.claims.entry_ref(lowercase(host).as_ref()) {
            hashbrown::hash_map::EntryRef::Occupied(mut e) => e.get_mut().1.push(claim),
            hashbrown::hash_map::EntryRef::Vacant(e) => {
                e.insert((claim, Vec::new()));
            }
        }
    }

    /// Decides every claimed host's owner and marks the other claimants invalid, naming the owner.
    pub fn settle_host_claims(&mut self) {
        // Hosts with one claimant are owned by it, where they are. Contested hosts are settled
        // in host order, so the messages come out the same on every build.
        let mut contested = Vec::new();
        for (host, (first, others)) in &mut self.claims {
            if !others.is_empty() {
                let mut cs = std::mem::take(others);
                cs.push(first.clone());
                contested.push((host.clone(), cs));
            }
        }
        contested.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (host, mut cs) in contested {
            // Objects without a creationTimestamp (files given to the CLI) count as newest.
            cs.sort_by(|a, b| {
                (a.created.is_none(), &a.created, &a.owner.key, a.owner.kind).cmp(&(
                    b.created.is_none(),
                    &b.created,
                    &b.owner.key,
                    b.owner.kind,
                ))
            });
            let mut cs = cs.into_iter();
            let Some(winner) = cs.next() else {
                continue;
            };
            for loser in cs {
                self.set_invalid(
                    &loser.owner,
                    reason::FQDN_CONFLICT,
                    format!("fqdn {host:?} is already claimed by {} (the oldest object claiming a host owns it)", winner.owner),
                );
            }
            if let Some(claims) = self.claims.get_mut(&host) {
                claims.0 = winner;
            }
        }
    }

    /// The root owning a host, if any.
    pub fn host_owner(&self, host: &str) -> Option<&ObjectRef> {
        let (owner, _) = self.claims.get(lowercase(host).as_ref())?;
        Some(&owner.owner)
    }

    // ---- virtual hosts and routes ----

    /// The virtual host for a host name (lowercased), created on first use, as a number that
    /// finds it again without the name: a root's walk adds all its routes to one host, and
    /// looks its name up once.
    pub fn host_id(&mut self, host: &str) -> HostId {
        let host = lowercase(host);
        self.host_id_lowercase(&host, None)
    }

    /// The virtual host of `host` as [`Builder::host_id`] numbers it, when the object `kind`
    /// `key` owns the host (its claim won); None otherwise. For a root: the host's name is
    /// lowercased and its claim looked up once for both questions.
    pub fn owned_host_id(&mut self, host: &str, kind: Kind, key: &ObjKey) -> Option<HostId> {
        let host = lowercase(host);
        let (claim, _) = self.claims.get(host.as_ref())?;
        if claim.owner.kind != kind || claim.owner.key != *key {
            return None;
        }
        let owner = claim.owner.clone();
        Some(self.host_id_lowercase(&host, Some(owner)))
    }

    /// [`Builder::host_id`] of a lowercase name; `owner` is the host's owner when the caller
    /// has it at hand (looked up among the claims otherwise, when the host is new).
    fn host_id_lowercase(&mut self, host: &str, owner: Option<ObjectRef>) -> HostId {
        let claims = &self.claims;
        let owner = || owner.or_else(|| claims.get(host).map(|(c, _)| c.owner.clone()));
        HostId(self.hosts.id(&self.hasher, host, owner))
    }

    /// Room for `n` routes on a host that has none yet, before an object adds its routes: a host
    /// whose routes all come from one object then holds them in a vector of their number, which
    /// [`Builder::finish`] keeps instead of copying them to one (routes pushed one by one leave
    /// room for four, then eight).
    pub fn expect_routes(&mut self, host: HostId, n: usize) {
        let routes = &mut self.hosts.vhosts[host.0].get_mut().routes;
        if routes.capacity() == 0 {
            routes.reserve_exact(n);
        }
    }

    /// The virtual host for a (lowercased) host name, created on first use.
    pub fn vhost(&mut self, host: &str) -> &mut VirtualHost {
        let id = self.host_id(host);
        self.vhost_at(id)
    }

    /// The virtual host `host` numbers (see [`Builder::host_id`]).
    pub fn vhost_at(&mut self, host: HostId) -> &mut VirtualHost {
        self.hosts.vhosts[host.0].get_mut()
    }

    /// Adds a route to a virtual host. A route whose path and header conditions are identical to one
    /// already there is refused, returning the object that defined the first one, and the route.
    pub fn add_route(&mut self, host: &str, route: Route) -> Result<(), Box<(ObjectRef, Route)>> {
        let id = self.host_id(host);
        self.add_route_to(id, route)
    }

    /// [`Builder::add_route`] to the virtual host `host` numbers.
    pub fn add_route_to(
        &mut self,
        host: HostId,
        route: Route,
    ) -> Result<(), Box<(ObjectRef, Route)>> {
        self.hosts.add_route(&self.hasher, host.0, route)
    }

    // ---- Gateways' own addresses ----

    /// Opens a port of a Gateway's own address (the first listener of the port decides what it
    /// speaks; the Gateway API build refuses listeners of one port that disagree).
    pub fn open_entry(
        &mut self,
        key: &EntryKey,
        address: std::net::IpAddr,
        protocol: EntryProtocol,
        secret: Option<&str>,
        secret_first: bool,
        client_validation: Option<&super::model::ClientValidation>,
    ) {
        let e = self.entries.entry(key.clone()).or_insert_with(|| EntryAcc {
            address,
            protocol,
            hosts: Hosts::with_capacity(0),
            tcp: None,
            default_secret: None,
            https_listeners: Vec::new(),
            client_validation: None,
        });
        if let Some(secret) = secret
            && (secret_first || e.default_secret.is_none())
        {
            e.default_secret = Some(secret.to_string());
        }
        // Every HTTPS listener of a port has the port's validation (it is configured per
        // port), so the first one's is the port's.
        if e.client_validation.is_none() {
            e.client_validation = client_validation.cloned();
        }
    }

    /// Notes an HTTPS listener of an opened port of a Gateway's own address, by its hostname.
    pub fn add_entry_https_listener(&mut self, key: &EntryKey, hostname: Option<&str>) {
        if let Some(e) = self.entries.get_mut(key) {
            e.https_listeners
                .push(hostname.map(str::to_ascii_lowercase));
        }
    }

    /// The owner of a host where `scope` serves it: a root's claim on Envoy's shared listeners;
    /// none at a Gateway's own address, where only that Gateway's routes are served.
    pub fn host_owner_in(&self, scope: Scope<'_>, host: &str) -> Option<&ObjectRef> {
        match scope {
            None => self.host_owner(host),
            Some(_) => None,
        }
    }

    /// [`Builder::vhost`] where `scope` serves it (an entry [`Builder::open_entry`] opened).
    pub fn vhost_in(&mut self, scope: Scope<'_>, host: &str) -> &mut VirtualHost {
        let Some(key) = scope else {
            return self.vhost(host);
        };
        let e = self.entries.get_mut(key).expect("an opened entry");
        let host = lowercase(host);
        let i = e.hosts.id(&self.hasher, &host, || None);
        e.hosts.vhosts[i].get_mut()
    }

    /// [`Builder::add_route`] where `scope` serves the host.
    pub fn add_route_in(
        &mut self,
        scope: Scope<'_>,
        host: &str,
        route: Route,
    ) -> Result<(), Box<(ObjectRef, Route)>> {
        let Some(key) = scope else {
            return self.add_route(host, route);
        };
        let e = self.entries.get_mut(key).expect("an opened entry");
        let host = lowercase(host);
        let i = e.hosts.id(&self.hasher, &host, || None);
        e.hosts.add_route(&self.hasher, i, route)
    }

    /// Forwards the connections of a `TCP` port of a Gateway's address to a TCPRoute's
    /// backends (the first route's, as the Gateway API build decides).
    pub fn set_entry_tcp(&mut self, key: &EntryKey, clusters: Clusters, route: ObjectRef) {
        let e = self.entries.get_mut(key).expect("an opened entry");
        e.tcp.get_or_insert((clusters, route));
    }

    // ---- backends ----

    /// Sorts every virtual host's routes by precedence, drops empty hosts and produces the model:
    /// the clusters and secrets its virtual hosts use (a backend resolved for a route that was
    /// then refused is not part of it).
    pub fn finish(self) -> Dag {
        self.finish_sorted().into_dag()
    }

    /// What [`Builder::finish`] makes the model of: its entries in key order.
    pub(super) fn finish_sorted(self) -> SortedParts {
        let mut clusters = self.clusters;
        let vhosts = self.hosts.finish(&mut clusters);
        let entries: Vec<(EntryKey, Arc<Entry>)> = (self.entries.into_iter())
            .map(|(key, e)| {
                if let Some((tcp, _)) = &e.tcp {
                    for c in tcp {
                        if let Some((_, used)) = clusters.get_mut(&*c.cluster) {
                            *used = true;
                        }
                    }
                }
                let entry = Entry {
                    address: e.address,
                    protocol: e.protocol,
                    vhosts: e.hosts.finish(&mut clusters).into_iter().collect(),
                    tcp: e.tcp,
                    default_secret: e.default_secret,
                    https_listeners: e.https_listeners,
                    client_validation: e.client_validation,
                };
                (key, Arc::new(entry))
            })
            .collect();
        let secrets = used_secrets(&self.secrets, &vhosts, &entries, &self.verifying, &clusters);
        let mut tcp_listeners = self.tcp_listeners;
        tcp_listeners.sort_unstable_by_key(|(port, _)| *port);
        for (_, l) in &tcp_listeners {
            for c in &l.clusters {
                if let Some((_, used)) = clusters.get_mut(&*c.cluster) {
                    *used = true;
                }
            }
        }
        // Room for every cluster at once (a vector collected from a filter grows by doubling).
        let mut used = Vec::with_capacity(clusters.len());
        used.extend(
            (clusters.into_iter())
                .filter(|(_, (_, used))| *used)
                .map(|(name, (c, _))| (name, c)),
        );
        let (statuses, status_places) = self.statuses.into_sorted();
        SortedParts {
            vhosts,
            clusters: sorted_entries(used.into_iter()),
            secrets,
            statuses,
            status_places,
            tcp_listeners,
            entries,
        }
    }
}

/// The maps of a model as vectors of distinct keys in key order (a build's result before it
/// becomes the model's persistent maps: two of them merge in one pass).
pub(super) struct SortedParts {
    pub vhosts: Vec<(String, Arc<VirtualHost>)>,
    pub clusters: Vec<(ClusterName, Arc<Cluster>)>,
    pub secrets: Vec<(String, TlsSecret)>,
    pub statuses: Vec<(ObjectRef, ObjectStatus)>,
    /// The place of each status's object in the snapshot, when every status is of an object
    /// the build numbered (see [`super::slots::Place`]).
    pub status_places: Option<Vec<super::slots::Place>>,
    pub tcp_listeners: Vec<(u16, Arc<TcpListener>)>,
    pub entries: Vec<(EntryKey, Arc<Entry>)>,
}

/// The secrets the model holds, each once, sorted by name: those of its hosts' TLS (on the shared
/// listeners and on the ports of Gateways' own addresses), the ports' default certificates and
/// client CAs, and those of the clusters that verify their backends when a route uses them.
fn used_secrets(
    table: &HashMap<String, TlsSecret>,
    vhosts: &[(String, Arc<VirtualHost>)],
    entries: &[(EntryKey, Arc<Entry>)],
    verifying: &[ClusterName],
    clusters: &HashMap<ClusterName, (Arc<Cluster>, bool)>,
) -> Vec<(String, TlsSecret)> {
    let mut secrets = Vec::new();
    let entry_hosts = entries.iter().flat_map(|(_, e)| e.vhosts.values());
    for v in vhosts.iter().map(|(_, v)| v).chain(entry_hosts) {
        if let Some(tls) = &v.tls
            && let Some(s) = table.get(&tls.secret)
        {
            secrets.push((tls.secret.clone(), s.clone()));
        }
    }
    // The ports' default certificates and the CA certificates their clients' are verified
    // with.
    let entry_secrets = entries.iter().flat_map(|(_, e)| {
        (e.default_secret.iter()).chain(e.client_validation.iter().map(|v| &v.ca_secret))
    });
    for id in entry_secrets {
        if let Some(s) = table.get(id) {
            secrets.push((id.clone(), s.clone()));
        }
    }
    // The CA certificates of the clusters that verify their backends, when a route uses
    // them (of the routes above: a Gateway's TCP listener never verifies a backend).
    // So are the client certificates they present (a Gateway's backend TLS).
    for name in verifying {
        if let Some((c, true)) = clusters.get(name) {
            for id in super::model::cluster_secrets(c) {
                if let Some(s) = table.get(id) {
                    secrets.push((id.to_string(), s.clone()));
                }
            }
        }
    }
    // Hosts and clusters sharing a secret name it once.
    secrets.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    secrets.dedup_by(|a, b| a.0 == b.0);
    secrets
}

impl SortedParts {
    pub(super) fn into_dag(self) -> Dag {
        // Each part's keys are distinct and in order (see `finish_sorted`).
        Dag {
            vhosts: Map::from_distinct_sorted(self.vhosts),
            clusters: Map::from_distinct_sorted(self.clusters),
            secrets: Map::from_distinct_sorted(self.secrets),
            statuses: Map::from_distinct_sorted(self.statuses),
            tcp_listeners: Map::from_distinct_sorted(self.tcp_listeners),
            entries: Map::from_distinct_sorted(self.entries),
        }
    }
}

#[path = "builder_backends.rs"]
mod backends;

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
