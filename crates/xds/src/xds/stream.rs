//! The xDS protocol of one ADS stream as a synchronous state machine: requests and snapshot
//! changes go in, responses come out. No I/O, no async: the gRPC server only moves messages.
//!
//! Per resource type it tracks the subscription (wildcard and/or names), what was sent, what the
//! client acknowledged and the one response in flight. Rules:
//! - SotW: a request whose nonce is not the latest sent for its type is stale and ignored; a
//!   request with the latest nonce ACKs (or, with `error_detail`, NACKs) it. A NACK is logged and
//!   counted and nothing is resent: the client keeps its last good config until the next change.
//!   Listener and cluster responses carry every resource of the set; route, endpoint and secret
//!   responses only those the client lacks or holds in another version (the protocol's grouping
//!   rule: what a response leaves out, the client keeps).
//! - Delta: subscribe/unsubscribe are always applied; only added or changed resources are sent,
//!   and names the client holds that are gone are listed as removed. `initial_resource_versions`
//!   of a reconnecting client count as already sent.
//! - At most one response per type is in flight.
//! - Make-before-break: listeners and routes are sent only once clusters are settled (the
//!   cluster response acknowledged, endpoints requested for every cluster and acknowledged);
//!   clusters, endpoints and secrets that disappeared are kept (sent again as they were) until the
//!   client acknowledged the listeners and routes that no longer use them.
//!
//! Work follows what changed, not the number of resources: each type records what its set was
//! last computed from (the snapshot's resources of the type, shared between snapshots, and the
//! subscription). A request looks at its own type (and, for listeners and routes, at the types
//! they keep alive), a snapshot change at the types whose resources changed; a type whose basis
//! is current, that owes no answer and keeps nothing for make-before-break is skipped without
//! computing anything. An ACK thus walks no type's resources (beyond a SotW request's own names,
//! and a cluster ACK comparing versions to find clusters whose endpoints must be resent).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};

use super::cache::{Resource, ResourceMap, ResourceName, Snapshot, TypeSnapshot};
use super::resources::ResourceType;
use super::wire::{DeltaResponse, SotwResponse};
use sluice_core::pmap::DiffItem;

/// Counters shared by every stream of a server (exported on `/metrics` by [`register_stats`]).
#[derive(Debug, Default)]
pub struct Stats {
    /// Responses Envoy rejected (NACKs).
    pub nacks: Counter,
    /// Responses sent.
    pub responses: Counter,
    /// Streams opened.
    pub streams: Counter,
}

/// Registers a server's [`Stats`] as `sluice_xds_*` counters.
pub fn register_stats(registry: &mut Registry, stats: std::sync::Arc<Stats>) {
    registry.register(
        "sluice_xds_nacks",
        "xDS responses Envoy rejected (NACK)",
        stats.nacks.clone(),
    );
    registry.register(
        "sluice_xds_responses",
        "xDS responses sent",
        stats.responses.clone(),
    );
    registry.register(
        "sluice_xds_streams",
        "xDS streams opened",
        stats.streams.clone(),
    );
}

/// Which flavour of xDS the stream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Sotw,
    Delta,
}

/// What the state machine asks the transport to send.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    Sotw(SotwResponse),
    Delta(DeltaResponse),
}

#[derive(Debug)]
struct InFlight {
    nonce: String,
    /// What the client holds once it accepts this response.
    state_after: ResourceMap,
    /// What the response was computed from.
    basis: Basis,
}

/// What one computation of the set a client should hold of a type was based on.
#[derive(Clone, Debug)]
struct Basis {
    /// The snapshot's resources of the type.
    snapshot: Option<Arc<TypeSnapshot>>,
    /// The subscription ([`TypeState::scope_gen`]).
    scope: u64,
    /// The set also held resources kept for make-before-break (not in the snapshot).
    kept: bool,
}

impl Basis {
    /// Whether the snapshot's resources and the subscription are still those of this basis: the
    /// snapshot's part of the set would be computed the same now.
    fn is_current(&self, st: &TypeState, now: Option<&Arc<TypeSnapshot>>) -> bool {
        self.scope == st.scope_gen && same_content(self.snapshot.as_ref(), now)
    }
}

/// The same resources of a type (snapshots share unchanged types).
fn same_content(a: Option<&Arc<TypeSnapshot>>, b: Option<&Arc<TypeSnapshot>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

#[derive(Debug, Default)]
struct TypeState {
    /// A request for this type was seen.
    subscribed: bool,
    wildcard: bool,
    names: BTreeSet<String>,
    /// Counts changes of `wildcard` and `names`.
    scope_gen: u64,
    /// Counts the changes of `wildcard` and `names` that may take a name out of scope (a name
    /// unsubscribed, the wildcard dropped). What was found subscribed stays subscribed while this
    /// is unchanged, however many names were added.
    narrowed: u64,
    /// What the client holds if it accepted everything sent: the resources sent (their bodies are
    /// served again during make-before-break) and, for a reconnecting delta client, what it said
    /// it holds ([`Resource::known`]). A persistent map, shared with the snapshot it was computed
    /// from: keeping it and comparing it with the next set cost what changed, not the set's size.
    sent: ResourceMap,
    /// What the client acknowledged (the same kind of map).
    acked: ResourceMap,
    /// What `acked` was computed from, when it is exactly such a computation without kept
    /// resources (None when unknown).
    acked_basis: Option<Basis>,
    in_flight: Option<InFlight>,
    last_nonce: String,
    /// Answer the next time even if nothing changed (initial request, new names).
    must_respond: bool,
    /// Delta: names newly subscribed, to be told "does not exist" when absent.
    new_names: BTreeSet<String>,
    /// The last response of this type was refused.
    last_nacked: bool,
    /// What the last computation of this type's set was based on (None: never computed).
    computed: Option<Basis>,
    /// The snapshot's resources of the type when every one of their names was last found
    /// subscribed, with [`TypeState::narrowed`] then: a named subscription
    /// covering them all (Envoy asks for the endpoints of every cluster by name) is then served
    /// the snapshot's map itself, and a later snapshot needs a look at its added names only.
    covered: Option<(ResourceMap, u64)>,
}

impl TypeState {
    /// A delta stream's first request of type `t`: the subscription starts, and the client
    /// holds the resources of `initial_resource_versions` at those versions.
    fn start_delta(&mut self, t: ResourceType, req: &DeltaDiscoveryRequest) {
        if self.subscribed {
            return;
        }
        self.subscribed = true;
        self.must_respond = true;
        self.wildcard = req.resource_names_subscribe.is_empty() && t.wildcard_by_default();
        self.scope_gen += 1;
        // Sorted so that the state does not depend on HashMap order.
        let known: BTreeMap<&String, &String> = req.initial_resource_versions.iter().collect();
        for (n, v) in known {
            let r = Arc::new(Resource::known(n.as_str(), v.clone()));
            self.sent.insert(r.name.clone(), r.clone());
            self.acked.insert(r.name.clone(), r);
        }
        self.acked_basis = None;
    }

    /// A delta request's `resource_names_subscribe` (`*`: the wildcard).
    fn delta_subscribe(&mut self, names: &[String]) {
        for n in names {
            if n == "*" {
                self.wildcard = true;
                self.must_respond = true;
                self.scope_gen += 1;
            } else if self.names.insert(n.clone()) {
                self.must_respond = true;
                self.new_names.insert(n.clone());
                self.scope_gen += 1;
            }
        }
    }

    /// A delta request's `resource_names_unsubscribe` (`*`: the wildcard).
    fn delta_unsubscribe(&mut self, names: &[String]) {
        for n in names {
            if n == "*" {
                self.wildcard = false;
                self.scope_gen += 1;
                self.narrowed += 1;
            } else {
                if self.names.remove(n) {
                    self.scope_gen += 1;
                    self.narrowed += 1;
                }
                self.new_names.remove(n);
            }
        }
    }

    /// The client forgets what it no longer subscribes to.
    fn forget_out_of_scope(&mut self) {
        let gone: Vec<ResourceName> = (self.sent.keys())
            .filter(|n| !self.in_scope(n))
            .cloned()
            .collect();
        if !gone.is_empty() {
            for n in gone {
                self.sent.remove(&*n);
                self.acked.remove(&*n);
            }
            self.acked_basis = None;
        }
    }

    fn in_scope(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

/// One ADS stream.
#[derive(Debug)]
pub struct Stream {
    mode: Mode,
    node: String,
    types: BTreeMap<ResourceType, TypeState>,
    nonce_seq: u64,
    stats: Arc<Stats>,
    /// Types to look at on the next pump.
    dirty: BTreeSet<ResourceType>,
    /// The acknowledged clusters (and the endpoint subscription's [`TypeState::narrowed`]) for
    /// which [`Stream::clusters_settled`] last found every cluster's endpoints requested: while no
    /// name left the subscription, a later acknowledged set needs a look at its added clusters
    /// only (the map held shares its nodes with the acknowledged one, so the diff skips what both
    /// hold, and holding it keeps `ptr_eq` from being fooled by a reused allocation).
    endpoints_requested: Option<(ResourceMap, u64)>,
    /// Types whose set was computed, in order (tests check what a request costs).
    #[cfg(test)]
    computed_log: Vec<ResourceType>,
    /// Resources visited by walks over all resources of a type outside computing a set (same
    /// purpose).
    #[cfg(test)]
    walks: std::cell::Cell<usize>,
}

impl Stream {
    pub fn new(mode: Mode, stats: Arc<Stats>) -> Stream {
        stats.streams.inc();
        Stream {
            mode,
            node: String::new(),
            types: ResourceType::ALL
                .into_iter()
                .map(|t| (t, TypeState::default()))
                .collect(),
            nonce_seq: 0,
            stats,
            dirty: BTreeSet::new(),
            endpoints_requested: None,
            #[cfg(test)]
            computed_log: Vec::new(),
            #[cfg(test)]
            walks: std::cell::Cell::new(0),
        }
    }

    /// The resource names subscribed by name, over all types (the server bounds them:
    /// `limits::MAX_SUBSCRIBED_NAMES`).
    pub fn subscribed_names(&self) -> usize {
        self.types.values().map(|st| st.names.len()).sum()
    }

    /// The node id the client announced.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn st(&mut self, t: ResourceType) -> &mut TypeState {
        self.types.entry(t).or_default()
    }

    /// Counts a walk over `n` resources (tests check what a request costs).
    #[cfg(test)]
    fn walked(&self, n: usize) {
        self.walks.set(self.walks.get() + n);
    }

    #[cfg(not(test))]
    fn walked(&self, _n: usize) {}

    /// Handles an ACK or NACK of the in-flight response of `t`. Returns false for a stale nonce.
    fn settle(&mut self, t: ResourceType, nonce: &str, error: Option<String>) -> bool {
        let node = self.node.clone();
        let stats = self.stats.clone();
        let st = self.st(t);
        let Some(f) = st.in_flight.take_if(|f| f.nonce == nonce) else {
            return nonce == st.last_nonce;
        };
        match error {
            Some(message) => {
                stats.nacks.inc();
                st.last_nacked = true;
                tracing::warn!(
                    node = %node,
                    r#type = t.short(),
                    nonce,
                    error = %message,
                    "Envoy rejected configuration; it keeps its last accepted configuration"
                );
            }
            None => {
                st.last_nacked = false;
                st.acked_basis = (!f.basis.kept).then_some(f.basis);
                let before = std::mem::replace(&mut st.acked, f.state_after);
                if t == ResourceType::Cluster {
                    // A changed cluster is rebuilt by Envoy and warms again: give it its
                    // endpoints again. (A diff of maps that share their unchanged nodes.)
                    let changed = changed_versions(&before, &st.acked);
                    if !changed.is_empty() {
                        let eds = self.st(ResourceType::Endpoint);
                        eds.must_respond = true;
                        for n in changed {
                            eds.sent.remove(&*n);
                        }
                        self.dirty.insert(ResourceType::Endpoint);
                    }
                }
            }
        }
        true
    }

    /// After a request of type `t` (its subscription, response in flight or acknowledged state
    /// may have changed): marks the types whose answer may depend on that. Listeners and routes
    /// waiting for clusters and endpoints need no mark: they stay dirty while they wait.
    fn mark_after_request(&mut self, t: ResourceType) {
        self.dirty.insert(t);
        if t.is_routing() {
            // Kept clusters, endpoints and secrets go once listeners and routes moved
            // ([`Stream::routes_settled`]).
            self.dirty.extend([
                ResourceType::Cluster,
                ResourceType::Endpoint,
                ResourceType::Secret,
            ]);
        }
    }

    /// A state-of-the-world request.
    pub fn on_sotw_request(&mut self, req: &DiscoveryRequest, snap: &Snapshot) -> Vec<Response> {
        if self.node.is_empty()
            && let Some(n) = &req.node
        {
            self.node = n.id.clone();
        }
        let Some(t) = ResourceType::from_type_url(&req.type_url) else {
            tracing::debug!(type_url = %req.type_url, "request for a type sluice does not serve");
            return Vec::new();
        };
        if req.response_nonce.is_empty() {
            let st = self.st(t);
            st.must_respond = true;
            // A client that has seen no response of the type holds none of it (responses of
            // routes, endpoints and secrets carry only what it lacks).
            if !st.sent.is_empty() {
                st.sent = ResourceMap::new();
            }
        } else {
            let error = req.error_detail.as_ref().map(|e| e.message.clone());
            if !self.settle(t, &req.response_nonce, error) {
                tracing::debug!(r#type = t.short(), nonce = %req.response_nonce, "stale nonce ignored");
                return Vec::new();
            }
        }
        let names: BTreeSet<String> = req.resource_names.iter().cloned().collect();
        let wildcard = names.contains("*") || (names.is_empty() && t.wildcard_by_default());
        let st = self.st(t);
        st.subscribed = true;
        let names: BTreeSet<String> = names.into_iter().filter(|n| n != "*").collect();
        if names != st.names || wildcard != st.wildcard {
            st.must_respond = true;
            if (st.wildcard && !wildcard) || !names.is_superset(&st.names) {
                st.narrowed += 1;
            }
            st.names = names;
            st.wildcard = wildcard;
            st.scope_gen += 1;
        }
        self.mark_after_request(t);
        self.pump(snap)
    }

    /// An incremental (delta) request.
    pub fn on_delta_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        snap: &Snapshot,
    ) -> Vec<Response> {
        if self.node.is_empty()
            && let Some(n) = &req.node
        {
            self.node = n.id.clone();
        }
        let Some(t) = ResourceType::from_type_url(&req.type_url) else {
            tracing::debug!(type_url = %req.type_url, "request for a type sluice does not serve");
            return Vec::new();
        };
        let scope_before = self.st(t).scope_gen;
        if req.response_nonce.is_empty() {
            self.st(t).start_delta(t, req);
        } else {
            let error = req.error_detail.as_ref().map(|e| e.message.clone());
            self.settle(t, &req.response_nonce, error);
        }
        let st = self.st(t);
        st.delta_subscribe(&req.resource_names_subscribe);
        st.delta_unsubscribe(&req.resource_names_unsubscribe);
        // Everything the client holds was in scope after the previous request, so only a
        // changed subscription can leave something out.
        if st.scope_gen != scope_before {
            st.forget_out_of_scope();
        }
        self.mark_after_request(t);
        self.pump(snap)
    }

    /// The cache moved to a new snapshot. Only types whose resources changed since their set was
    /// last computed are looked at (and clusters, endpoints and secrets when listeners or routes
    /// changed, since make-before-break ties them together). An endpoint change among 10k
    /// clusters thus costs the endpoints, not a walk over every resource.
    pub fn on_snapshot(&mut self, snap: &Snapshot) -> Vec<Response> {
        for t in ResourceType::ALL {
            let seen = self.types[&t]
                .computed
                .as_ref()
                .and_then(|b| b.snapshot.as_ref());
            if !same_content(seen, snap.shared(t)) {
                self.dirty.insert(t);
            }
        }
        if self.dirty.iter().any(|t| t.is_routing()) {
            self.dirty.extend([
                ResourceType::Cluster,
                ResourceType::Endpoint,
                ResourceType::Secret,
            ]);
        }
        self.pump(snap)
    }

    /// Whether type `t` certainly has nothing to send, without computing its set: the last
    /// computed set was the snapshot's alone (nothing kept for make-before-break), the snapshot's
    /// resources of `t` and the subscription are unchanged since, and no answer is owed.
    ///
    /// After every computation the client was sent that set or already held it, so `sent` equals
    /// its versions; `sent` changes otherwise only with `must_respond` (a cluster acknowledged
    /// with changed versions, a delta client's initial versions) or with the subscription (delta
    /// unsubscribe). So the same inputs would give the same set and nothing to send.
    fn nothing_new(&self, t: ResourceType, snap: &Snapshot) -> bool {
        let st = &self.types[&t];
        !st.must_respond
            && st.new_names.is_empty()
            && st
                .computed
                .as_ref()
                .is_some_and(|b| !b.kept && b.is_current(st, snap.shared(t)))
    }

    /// What the client should hold of type `t` from the snapshot alone: the snapshot's map itself
    /// when every name in it is in scope (no copy), else the subscribed names that exist.
    fn base(&mut self, t: ResourceType, snap: &Snapshot) -> ResourceMap {
        let all = snap.of(t);
        if self.types[&t].wildcard || self.covered(t, all) {
            return all.clone();
        }
        let st = &self.types[&t];
        // One walk over both sorted sets, not a lookup per resource.
        join(st.names.iter(), all.iter())
            .filter_map(|j| match j {
                Joined::Both(n, r) => Some((ResourceName::clone(n), Arc::clone(r))),
                _ => None,
            })
            .collect()
    }

    /// Whether every name in `all` is subscribed by name. Remembered for the map while no name
    /// left the subscription ([`TypeState::narrowed`]): for a later map only the names it added
    /// need a look (shared nodes are skipped), so an endpoint change, or a new cluster whose
    /// endpoints Envoy then requests, costs what changed, not 10k lookups.
    fn covered(&mut self, t: ResourceType, all: &ResourceMap) -> bool {
        let st = self.types.get_mut(&t).expect("every type has a state");
        let covered = match &st.covered {
            Some((seen, narrowed)) if *narrowed == st.narrowed => {
                seen.ptr_eq(all)
                    || seen.diff(all).all(|d| match d {
                        DiffItem::Add(n, _) => st.names.contains(&**n),
                        _ => true,
                    })
            }
            _ => {
                #[cfg(test)]
                self.walks.set(self.walks.get() + all.len());
                let covered =
                    !join(st.names.iter(), all.iter()).any(|j| matches!(j, Joined::ResourceOnly));
                if !covered {
                    st.covered = None;
                }
                covered
            }
        };
        // A map found not covered leaves what was found before: its names are still subscribed
        // (nothing left the subscription), so the next look is again at the names added only.
        if covered {
            st.covered = Some((all.clone(), st.narrowed));
        }
        covered
    }

    /// Listeners and routes acknowledged at the snapshot's content.
    fn routes_settled(&self, snap: &Snapshot) -> bool {
        ResourceType::ALL
            .into_iter()
            .filter(|t| t.is_routing())
            .all(|t| {
                let st = &self.types[&t];
                if !st.subscribed {
                    return true;
                }
                if st.in_flight.is_some() {
                    return false;
                }
                let now = snap.shared(t);
                if st
                    .acked_basis
                    .as_ref()
                    .is_some_and(|b| b.is_current(st, now))
                {
                    // Acknowledged exactly the snapshot's set, computed from these resources.
                    return true;
                }
                self.walked(snap.of(t).len());
                snap.of(t)
                    .iter()
                    .filter(|(n, _)| st.in_scope(n))
                    .map(|(n, r)| (n, &r.version))
                    .eq(st.acked.iter().map(|(n, r)| (n, &r.version)))
            })
    }

    /// Clusters acknowledged and their endpoints requested and acknowledged.
    fn clusters_settled(&mut self) -> bool {
        let cds = &self.types[&ResourceType::Cluster];
        let eds = &self.types[&ResourceType::Endpoint];
        if cds.in_flight.is_some() || eds.in_flight.is_some() {
            return false;
        }
        if !cds.subscribed || cds.last_nacked {
            return true;
        }
        if eds.subscribed && eds.wildcard {
            return true;
        }
        // Every cluster is EDS: Envoy asks for the endpoints of each one it accepted.
        if !eds.subscribed {
            return cds.acked.is_empty();
        }
        let requested = match &self.endpoints_requested {
            Some((acked, narrowed)) if *narrowed == eds.narrowed => {
                // Every cluster of `acked` was requested, and no name has left the subscription
                // since: only the clusters added need a look (shared nodes are skipped), so a
                // Service coming or going costs its clusters, not a walk over 10k names.
                acked.ptr_eq(&cds.acked)
                    || acked.diff(&cds.acked).all(|d| match d {
                        DiffItem::Add(n, _) => eds.names.contains(&**n),
                        _ => true,
                    })
            }
            _ => {
                self.walked(cds.acked.len());
                // Both sorted: one walk, not a lookup per cluster.
                !join(eds.names.iter(), cds.acked.iter()).any(|j| matches!(j, Joined::ResourceOnly))
            }
        };
        if requested {
            self.endpoints_requested = Some((cds.acked.clone(), eds.narrowed));
        }
        requested
    }

    /// What the client should hold of type `t`, including resources kept for make-before-break
    /// unless `routes_settled`; and whether any were kept.
    fn desired(
        &mut self,
        t: ResourceType,
        snap: &Snapshot,
        routes_settled: bool,
    ) -> (ResourceMap, bool) {
        let mut want = self.base(t, snap);
        let mut kept = false;
        if !routes_settled {
            let st = &self.types[&t];
            // What was sent and is no longer wanted (the nodes both maps share are skipped).
            let gone: Vec<Arc<Resource>> = st
                .sent
                .diff(&want)
                .filter_map(|d| match d {
                    DiffItem::Remove(n, r) if st.in_scope(n) && !r.is_known_only() => {
                        Some(Arc::clone(r))
                    }
                    _ => None,
                })
                .collect();
            kept = !gone.is_empty();
            for r in gone {
                want.insert(r.name.clone(), r);
            }
        }
        (want, kept)
    }

    fn next_nonce(&mut self) -> String {
        self.nonce_seq += 1;
        self.nonce_seq.to_string()
    }

    /// Sends whatever is due among the dirty types, in warming order. A type stays dirty until it
    /// could be looked at (subscribed, nothing in flight, warming order allowing), unless it
    /// certainly has nothing new ([`Stream::nothing_new`]).
    fn pump(&mut self, snap: &Snapshot) -> Vec<Response> {
        let mut out = Vec::new();
        // Each computed at most once per pump, when first needed: clusters, endpoints and secrets
        // (which need `routes_settled`) come before listeners and routes (which need
        // `clusters_settled`), and sending any of them changes neither.
        let mut routes_settled = None;
        let mut clusters_settled = None;
        for t in ResourceType::ALL {
            if !self.dirty.contains(&t) {
                continue;
            }
            if self.nothing_new(t, snap) {
                self.dirty.remove(&t);
                continue;
            }
            let st = &self.types[&t];
            if !st.subscribed || st.in_flight.is_some() {
                continue;
            }
            if t.is_routing() && !*clusters_settled.get_or_insert_with(|| self.clusters_settled()) {
                continue;
            }
            self.dirty.remove(&t);
            let keeps_old = matches!(
                t,
                ResourceType::Cluster | ResourceType::Endpoint | ResourceType::Secret
            );
            let settled =
                !keeps_old || *routes_settled.get_or_insert_with(|| self.routes_settled(snap));
            let (desired, kept) = self.desired(t, snap, settled);
            #[cfg(test)]
            self.computed_log.push(t);
            let basis = Basis {
                snapshot: snap.shared(t).cloned(),
                scope: self.types[&t].scope_gen,
                kept,
            };
            self.st(t).computed = Some(basis.clone());
            let response = match self.mode {
                Mode::Sotw => self.sotw_response(t, desired, basis),
                Mode::Delta => self.delta_response(t, desired, basis),
            };
            if let Some(r) = response {
                self.stats.responses.inc();
                out.push(r);
            }
        }
        out
    }

    /// Records a response of type `t` sent with `nonce`, after which the client holds `desired`.
    fn sent(&mut self, t: ResourceType, nonce: String, desired: ResourceMap, basis: Basis) {
        let st = self.st(t);
        st.in_flight = Some(InFlight {
            nonce: nonce.clone(),
            state_after: desired.clone(),
            basis,
        });
        st.sent = desired;
        st.last_nonce = nonce;
        st.must_respond = false;
        st.new_names.clear();
    }

    fn sotw_response(
        &mut self,
        t: ResourceType,
        desired: ResourceMap,
        basis: Basis,
    ) -> Option<Response> {
        let st = &self.types[&t];
        let (changed, removed) = diff(&desired, &st.sent);
        if changed.is_empty() && removed.is_empty() && !st.must_respond {
            return None;
        }
        let nonce = self.next_nonce();
        let resources = if t.sotw_sends_every_resource() {
            desired.values().cloned().collect()
        } else {
            // What the client lacks or holds in another version: the 500 unchanged route
            // configurations of as many TLS hosts are not sent (and decoded by Envoy) again
            // because one host changed.
            changed
        };
        let resp = SotwResponse {
            version_info: set_version_of(&desired, &basis),
            resources,
            type_url: t.type_url(),
            nonce: nonce.clone(),
        };
        self.sent(t, nonce, desired, basis);
        Some(Response::Sotw(resp))
    }

    fn delta_response(
        &mut self,
        t: ResourceType,
        desired: ResourceMap,
        basis: Basis,
    ) -> Option<Response> {
        let st = &self.types[&t];
        let (changed, mut removed) = diff(&desired, &st.sent);
        // Newly subscribed names that do not exist: say so, so the client does not wait.
        removed.extend(
            st.new_names
                .iter()
                .filter(|n| !desired.contains_key(n.as_str()) && !st.sent.contains_key(n.as_str()))
                .cloned(),
        );
        if changed.is_empty() && removed.is_empty() && !st.must_respond {
            return None;
        }
        let nonce = self.next_nonce();
        let resp = DeltaResponse {
            system_version_info: set_version_of(&desired, &basis),
            resources: changed,
            type_url: t.type_url(),
            removed_resources: removed.into_iter().collect(),
            nonce: nonce.clone(),
        };
        self.sent(t, nonce, desired, basis);
        Some(Response::Delta(resp))
    }
}

#[path = "stream_sets.rs"]
mod sets;
use sets::{Joined, changed_versions, diff, join, set_version_of};

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
