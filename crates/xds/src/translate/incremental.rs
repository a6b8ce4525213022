//! Incremental encoding: successive routing models → xDS snapshots, translating and encoding only
//! what changed since the previous model.
//!
//! The result is always exactly `xds::Snapshot::from_resources(&translate::build_with_shards(dag,
//! options, shards))` for the route shards the encoder is at (the tests compare both over
//! sequences of changes), except for a while after `--http-route-shards auto` switched shards on
//! or off, when the previous HTTP listener's route configurations and scopes are kept up to date
//! beside them (docs/xds.md, "Route shards"). What changed is found by diffing the
//! model's persistent maps against the previous model's ([`sluice_core::pmap::OrdMap::diff`]): a model
//! built from the previous one (`dag::incremental`) shares every tree node it did not touch, and
//! the diff steps over shared nodes, so a change of one object costs work in proportion to what
//! it changed, not to the size of the model. What it saves:
//! - a cluster, load assignment, secret or TLS host's route configuration whose part of the model
//!   is unchanged is not translated, encoded or even visited: the previous snapshot's
//!   `Arc<Resource>` is kept;
//! - in the HTTP route configuration (every host) only changed hosts are translated and encoded,
//!   and spliced into the previous configuration's bytes ([`Layout`]): the unchanged hosts' bytes
//!   are copied in runs, not encoded, assembled or compared again; the shared virtual host of the
//!   hosts that redirect everything to HTTPS is encoded again when one joins or leaves it;
//! - a type none of whose resources changed keeps the previous `Arc<TypeSnapshot>`, which xDS
//!   streams recognise without looking inside.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use prost::{Message, Name};

use super::{
    ClusterBytes, HTTPS_LISTENER, LoadAssignmentBytes, Options, ResourceType, build_secret, entry,
    https_route_config_name, listener, route,
};
use crate::xds::cache::{Body, Edit, Resource, ResourceName, Snapshot, TypeSnapshot};
use crate::xds::content;
use sluice_core::dag::{Cluster, Dag, VirtualHost};
use sluice_core::pmap::DiffItem;

/// Turns successive models into xDS snapshots, reusing what the previous one encoded.
#[derive(Debug)]
pub struct Encoder {
    options: Options,
    /// The previous model and what this encoder made of it. The two always match: a snapshot
    /// changed elsewhere afterwards (the pipeline's endpoint fast path) is not what is reused.
    prev: Option<Prev>,
}

#[derive(Debug)]
struct Prev {
    dag: Arc<Dag>,
    snapshot: Snapshot,
    /// Where each host's `VirtualHost` is in the bytes of the snapshot's HTTP route
    /// configuration, one per shard.
    http: Vec<Layout>,
    /// The route shards of the snapshot ([`Options::route_shards`] for its model).
    shards: u16,
    /// The previous listener's route shards, kept up to date beside these (after them in
    /// `http`) for a while after `auto` switched.
    draining: Option<Draining>,
}

impl Prev {
    fn groups(&self) -> HttpGroups {
        HttpGroups::new(self.shards, self.draining.map(|d| d.shards))
    }
}

/// The route shards of the HTTP listener before `auto` switched, and until when their route
/// configurations are kept up to date.
#[derive(Clone, Copy, Debug)]
struct Draining {
    shards: u16,
    until: Instant,
}

impl Draining {
    fn new(shards: u16, keep: std::time::Duration) -> Self {
        Draining {
            shards,
            until: Instant::now() + keep,
        }
    }
}

/// What the HTTPS listener's filter chain of a host is made of (besides the host name, which is
/// the model's key): its TLS settings and TCP proxy, or its TLS passthrough; None for a host
/// with neither TLS nor passthrough, which has no chain. A change of a TLS host's HTTP routes
/// leaves it alone (they are in the host's own route configuration).
type TlsChain<'a> = (
    Option<&'a sluice_core::dag::VhostTls>,
    &'a Option<sluice_core::dag::model::Clusters>,
    &'a Option<sluice_core::dag::model::Clusters>,
);
fn tls_chain(v: Option<&VirtualHost>) -> Option<TlsChain<'_>> {
    let v = v?;
    (v.tls.is_some() || v.tls_passthrough.is_some()).then_some((
        v.tls.as_ref(),
        &v.tcp_proxy,
        &v.tls_passthrough,
    ))
}

/// Whether a host has its own HTTPS route configuration (TLS hosts that route HTTP).
fn has_https_routes(v: &VirtualHost) -> bool {
    v.tls.is_some() && v.tcp_proxy.is_none()
}

impl Encoder {
    pub fn new(options: Options) -> Encoder {
        Encoder {
            options,
            prev: None,
        }
    }

    /// The route shards of the last snapshot encoded (None before the first): with
    /// [`RouteShards::Auto`](super::RouteShards), what the models so far decided.
    pub fn http_route_shards(&self) -> Option<u16> {
        self.prev.as_ref().map(|p| p.shards)
    }

    /// The xDS snapshot of `dag`, and what the encoder kept of the previous model (the caller
    /// decides where to free it: it can be large).
    pub fn encode(&mut self, dag: &Arc<Dag>) -> (Snapshot, Retired) {
        let empty = Dag::default();
        let prev_shards = self.http_route_shards();
        let shards = (self.options.route_shards).count(dag.vhosts.len(), prev_shards);
        // Shards on or off (`auto`): the HTTP listener and its scopes are new, and the previous
        // listener's route configurations are kept up to date beside the new ones for a while
        // ([`AutoRouteShards::keep_previous_for`](super::AutoRouteShards)): connections
        // accepted before Envoy had the new listener keep routing with them until they drain.
        let resharded = prev_shards.filter(|&before| before != shards);
        let draining = match (resharded, self.prev.as_ref().and_then(|p| p.draining)) {
            (Some(before), _) => {
                tracing::info!(
                    hosts = dag.vhosts.len(),
                    before,
                    shards,
                    "route shards of the HTTP listener changed"
                );
                (self.options.route_shards.keep_previous_for())
                    .map(|keep| Draining::new(before, keep))
            }
            (None, Some(d)) if d.until > Instant::now() => Some(d),
            _ => None,
        };
        let groups = HttpGroups::new(shards, draining.map(|d| d.shards));
        let prev_groups = self.prev.as_ref().map(|p| p.groups());
        let mut prev_layouts: Vec<(String, Layout)> = match self.prev.as_mut() {
            Some(p) => (prev_groups.iter().flat_map(HttpGroups::names))
                .map(|(_, name)| name)
                .zip(std::mem::take(&mut p.http))
                .collect(),
            None => Vec::new(),
        };
        let prev = self.prev.as_ref();
        let prev_dag = prev.map_or(&empty, |p| p.dag.as_ref());
        let prev_type = |t: ResourceType| prev.and_then(|p| p.snapshot.shared(t));
        // The previous HTTP route configurations' bytes (less the suffix they share), which
        // `layouts` describe: every shard of every group, in order. A shard new to the snapshot
        // is filled with every host; should one not match its layout (an earlier encode
        // stopped half-way), every host is encoded again into every shard.
        let suffixes: Vec<Vec<u8>> = groups.counts().map(http_route_config_suffix).collect();
        let heads: Vec<(String, Vec<u8>, usize)> = (groups.names())
            .map(|(g, name)| {
                let head = http_route_config_head(&name);
                (name, head, g)
            })
            .collect();
        let mut fresh = false;
        let mut layouts: Vec<Layout> = (heads.iter())
            .map(
                |(name, _, _)| match prev_layouts.iter_mut().find(|(n, _)| n == name) {
                    Some((_, layout)) => std::mem::take(layout),
                    None => {
                        fresh = true;
                        Layout::default()
                    }
                },
            )
            .collect();
        let mut old_http: Vec<&[u8]> = heads
            .iter()
            .map(|(name, head, g)| {
                prev.and_then(|p| p.snapshot.of(ResourceType::Route).get(name.as_str()))
                    .and_then(|r| r.body.value.strip_suffix(&suffixes[*g][..]))
                    .unwrap_or(head)
            })
            .collect();
        let stale = (layouts.iter().zip(&old_http).zip(&heads))
            .any(|((layout, old), (_, head, _))| old.len() != layout.len.max(head.len()));
        if stale {
            layouts = heads.iter().map(|_| Layout::default()).collect();
            old_http = heads.iter().map(|(_, head, _)| &head[..]).collect();
        }
        let reset = fresh || stale;

        // Clusters and their load assignments depend on nothing else encoded here. When many
        // changed (a build from nothing, a full rebuild that changed most of them), a second
        // thread encodes the clusters while this one does the rest; then both encode the load
        // assignments, a chunk at a time, until none is left; then the second thread puts the
        // clusters in their map while this one puts the load assignments in theirs. At 10k
        // objects: ~7 ms of clusters there against ~11 ms of routes, listeners and secrets here,
        // then ~10 ms of load assignments between them, then ~1 ms of map inserts each.
        let cluster_changes: Vec<ClusterChange> = prev_dag
            .clusters
            .diff(&dag.clusters)
            .map(|item| match item {
                DiffItem::Remove(_, c) => ClusterChange::Removed(c.clone()),
                DiffItem::Add(_, c) | DiffItem::Update { new: (_, c), .. } => {
                    ClusterChange::Put(c.clone())
                }
            })
            .collect();
        let parallel = cluster_changes.len() >= PARALLEL_CLUSTERS;
        let load_assignments = Arc::new(LoadAssignments {
            changes: cluster_changes,
            prev: prev_type(ResourceType::Endpoint).cloned(),
            next: AtomicUsize::new(0),
        });
        // The load assignments the clusters' thread encoded, handed over before it puts the
        // clusters in their map.
        let (their_chunks, load_assignments_theirs) = std::sync::mpsc::channel();
        let clusters_job = {
            let prev_clusters = prev_type(ResourceType::Cluster).cloned();
            let load_assignments = load_assignments.clone();
            move || {
                let changes = &load_assignments.changes;
                let held = |name: &str| prev_clusters.as_ref()?.resources.get(name);
                let mut bytes = ClusterBytes::default();
                let edits = edits_of(ResourceType::Cluster, changes, held, |c| bytes.encode(c));
                // Sent before the map inserts below: the receiver is alive until it has it.
                let _ = their_chunks.send(load_assignments.encode_chunks());
                apply_edits(
                    ResourceType::Cluster,
                    prev_clusters.as_ref(),
                    changes,
                    edits,
                )
            }
        };
        let clusters_job = if parallel {
            Ok(std::thread::spawn(clusters_job))
        } else {
            Err(clusters_job)
        };

        let mut secrets = Patch::new(ResourceType::Secret, prev_type(ResourceType::Secret));
        for item in prev_dag.secrets.diff(&dag.secrets) {
            match item {
                DiffItem::Remove(_, s) => secrets.remove(&s.name),
                DiffItem::Add(_, s) | DiffItem::Update { new: (_, s), .. } => {
                    let pb = build_secret(s);
                    secrets.add(&pb.name, &pb);
                }
            }
        }
        // The TLS listener has one filter chain per TLS host, naming its secret: it changes only
        // with what a host's chain is made of ([`tls_chain`]) or a secret.
        let mut tls_changed = prev.is_none() || secrets.changed();

        let mut routes = Patch::new(ResourceType::Route, prev_type(ResourceType::Route));
        // The route configurations of a group no longer held.
        for (name, _) in &prev_layouts {
            if !heads.iter().any(|(n, _, _)| n == name) {
                routes.remove(name);
            }
        }
        let fallback = dag.vhosts.get("*").map(|v| &**v);
        // Changed hosts of each shard of the HTTP route configuration: bytes to put, or None to
        // remove; whether the shard's shared redirect host changed, and how many hosts it had.
        let mut http: Vec<HttpShard> = (layouts.into_iter().zip(old_http))
            .map(|(layout, old)| HttpShard {
                redirected_before: layout.redirected.len(),
                layout,
                old,
                edits: HostEdits::default(),
                redirected_changed: false,
            })
            .collect();
        let set_http = |http: &mut [HttpShard], v: &VirtualHost| {
            let redirect = route::redirects_everything(v);
            // Encoded once for every shard that holds the host (a wildcard host's, every shard).
            let mut bytes = (!redirect).then(|| route::encode_http_vhost(v, fallback));
            let ranges = groups.shards_of(&v.host);
            let mut left: usize = ranges.iter().map(ExactSizeIterator::len).sum();
            for k in ranges.into_iter().flatten() {
                left -= 1;
                let bytes = if left == 0 {
                    bytes.take()
                } else {
                    bytes.clone()
                };
                http[k].set(v, redirect, bytes);
            }
        };
        let mut removed_http = Vec::new();
        for item in prev_dag.vhosts.diff(&dag.vhosts) {
            let (host, old, new) = match item {
                DiffItem::Remove(h, v) => (h, Some(&**v), None),
                DiffItem::Add(h, v) => (h, None, Some(&**v)),
                DiffItem::Update {
                    old: (h, o),
                    new: (_, n),
                } => (h, Some(&**o), Some(&**n)),
            };
            tls_changed |= tls_chain(old) != tls_chain(new);
            match new.filter(|v| has_https_routes(v)) {
                Some(v) => {
                    let (name, bytes) = route::encode_https_route_config(v);
                    routes.add_encoded(&name, bytes);
                }
                None if old.is_some_and(has_https_routes) => {
                    routes.remove(&https_route_config_name(host));
                }
                None => {}
            }
            match new.filter(|v| v.serves_http()) {
                // After a reset the loop below puts every host, once.
                Some(_) if reset => {}
                Some(v) => set_http(&mut http, v),
                None => removed_http.push(host),
            }
        }
        // A wildcard host's HTTP routes end with those of the catch-all host `*`; after a reset
        // every host is encoded.
        let catch_all_changed = prev_dag.vhosts.get("*") != dag.vhosts.get("*");
        if reset || catch_all_changed {
            for v in dag.vhosts.values() {
                if (reset || v.host.starts_with("*.")) && v.serves_http() {
                    set_http(&mut http, v);
                }
            }
        }
        for host in removed_http {
            for k in groups.shards_of(host).into_iter().flatten() {
                http[k].remove(host);
            }
        }
        let mut layouts = Vec::with_capacity(http.len());
        for (shard, (name, _, g)) in http.into_iter().zip(&heads) {
            let HttpShard {
                mut layout,
                old,
                mut edits,
                redirected_before,
                redirected_changed,
            } = shard;
            if redirected_changed {
                let shared = route::HTTPS_REDIRECT_VHOST.to_string();
                let bytes = (!layout.redirected.is_empty()).then(|| {
                    // In the model's order: its hosts are sorted by name.
                    let mut hosts: Vec<&str> =
                        layout.redirected.iter().map(String::as_str).collect();
                    hosts.sort_unstable();
                    route::build_https_redirect_vhost(hosts).encode_to_vec()
                });
                if bytes.is_some() || redirected_before > 0 {
                    edits.put(shared, bytes);
                }
            }
            if !edits.is_empty() || !routes.has(name) {
                let (bytes, digest) = layout.splice(name, old, edits, &suffixes[*g]);
                if reset && routes.get(name).is_some_and(|r| r.body.value == bytes) {
                    // Rebuilt from nothing, and the same as before.
                } else {
                    // Different entries make different bytes: no need to compare them.
                    match digest {
                        Some(digest) => routes.put_hashed(name, bytes, &digest),
                        None => routes.put_changed(name, bytes),
                    }
                }
            }
            layouts.push(layout);
        }

        let mut listeners = Patch::new(ResourceType::Listener, prev_type(ResourceType::Listener));
        let mut scopes = Patch::new(
            ResourceType::ScopedRoute,
            prev_type(ResourceType::ScopedRoute),
        );
        // The HTTP listener depends on the options, which are this encoder's for its life, and
        // the route shards; the scopes on the groups held: unless those changed, the previous
        // snapshot holds them.
        if prev.is_none() || resharded.is_some() {
            let http = listener::build_http_listener(&self.options, shards);
            listeners.add(&http.name, &http);
        }
        if prev_groups.as_ref() != Some(&groups) {
            let new_scopes: Vec<_> = groups
                .counts()
                .flat_map(listener::build_scoped_routes)
                .collect();
            for old in prev_groups.iter().flat_map(|g| g.counts()) {
                for scope in listener::build_scoped_routes(old) {
                    if !new_scopes.iter().any(|s| s.name == scope.name) {
                        scopes.remove(&scope.name);
                    }
                }
            }
            for scope in new_scopes {
                scopes.add(&scope.name, &scope);
            }
        }
        if tls_changed {
            match listener::build_https_listener(dag, &self.options) {
                Some(https) => listeners.add(&https.name, &https),
                None => listeners.remove(HTTPS_LISTENER),
            }
        }
        // Gateway TCP listeners, a listener per port.
        for item in prev_dag.tcp_listeners.diff(&dag.tcp_listeners) {
            match item {
                DiffItem::Remove(port, _) => listeners.remove(&listener::tcp_listener_name(*port)),
                DiffItem::Add(port, l) | DiffItem::Update { new: (port, l), .. } => {
                    match listener::build_tcp_listener(l, &self.options) {
                        Some(tcp) => listeners.add(&tcp.name, &tcp),
                        None => listeners.remove(&listener::tcp_listener_name(*port)),
                    }
                }
            }
        }

        // The ports of Gateways' own addresses: a listener each, and its route configurations.
        let mut entry_listeners = BTreeMap::new();
        for item in prev_dag.entries.diff(&dag.entries) {
            let (key, old, new) = match item {
                DiffItem::Remove(k, e) => (k, Some(&**e), None),
                DiffItem::Add(k, e) => (k, None, Some(&**e)),
                DiffItem::Update {
                    old: (k, o),
                    new: (_, n),
                } => (k, Some(&**o), Some(&**n)),
            };
            let configs = new.map_or_else(Vec::new, |e| entry::build_entry_route_configs(key, e));
            for name in old.map_or_else(Vec::new, |e| entry::entry_route_config_names(key, e)) {
                if !configs.iter().any(|c| c.name == name) {
                    routes.remove(&name);
                }
            }
            for config in &configs {
                routes.add(&config.name, config);
            }
            let built = new.and_then(|e| entry::build_entry_listener(key, e, dag, &self.options));
            entry_listeners.insert(key.name(), built);
        }
        // A port's TLS chains name their secrets: a secret's bytes changed, they stay as they
        // are (Envoy takes the secret by SDS); one gone or come changes which chains there are.
        if secrets.changed() {
            for (key, e) in dag.entries.iter() {
                if e.protocol == sluice_core::dag::EntryProtocol::Tls {
                    let built = entry::build_entry_listener(key, e, dag, &self.options);
                    entry_listeners.entry(key.name()).or_insert(built);
                }
            }
        }
        for (name, l) in entry_listeners {
            match l {
                Some(l) => listeners.add(&name, &l),
                None => listeners.remove(&name),
            }
        }

        let mut endpoint_chunks = load_assignments.encode_chunks();
        let (endpoints, clusters) = match clusters_job {
            Ok(thread) => {
                // Nothing to receive means the thread failed: its join says how.
                if let Ok(theirs) = load_assignments_theirs.recv() {
                    endpoint_chunks.extend(theirs);
                }
                let endpoints = load_assignments.finish(endpoint_chunks);
                let clusters = thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (endpoints, clusters)
            }
            Err(job) => {
                let clusters = job();
                endpoint_chunks.extend(load_assignments_theirs.try_iter().flatten());
                (load_assignments.finish(endpoint_chunks), clusters)
            }
        };
        let snapshot = Snapshot::from_types(BTreeMap::from([
            (ResourceType::Listener, listeners.finish()),
            (ResourceType::ScopedRoute, scopes.finish()),
            (ResourceType::Route, routes.finish()),
            (ResourceType::Cluster, clusters),
            (ResourceType::Endpoint, endpoints),
            (ResourceType::Secret, secrets.finish()),
        ]));
        let retired = self.prev.replace(Prev {
            dag: dag.clone(),
            snapshot: snapshot.clone(),
            http: layouts,
            shards,
            draining,
        });
        (snapshot, Retired(retired))
    }
}

/// When at least this many clusters changed, they and their load assignments are encoded on a
/// second thread (a thread costs tens of microseconds; encoding 1,000 clusters and their load
/// assignments, about 1.5 ms).
const PARALLEL_CLUSTERS: usize = 1_000;

/// A cluster of the model that changed.
enum ClusterChange {
    Removed(Arc<Cluster>),
    /// Added or changed.
    Put(Arc<Cluster>),
}

/// Load assignments in chunks of this many changed clusters are taken by whichever thread is free.
const LOAD_ASSIGNMENT_CHUNK: usize = 128;

/// The load assignments of the changed clusters, encoded by whichever threads call
/// [`LoadAssignments::encode_chunks`], a chunk of changes at a time.
struct LoadAssignments {
    changes: Vec<ClusterChange>,
    /// The previous load assignments.
    prev: Option<Arc<TypeSnapshot>>,
    /// The first change no thread has taken yet.
    next: AtomicUsize,
}

/// The chunks of changes one thread encoded: each chunk's first position and edits.
type Chunks = Vec<(usize, Vec<ResourceEdit>)>;

impl LoadAssignments {
    /// Encodes chunks of changes until none is left.
    fn encode_chunks(&self) -> Chunks {
        let held = |name: &str| self.prev.as_ref()?.resources.get(name);
        let mut bytes = LoadAssignmentBytes::default();
        let mut out = Vec::new();
        loop {
            let start = self
                .next
                .fetch_add(LOAD_ASSIGNMENT_CHUNK, Ordering::Relaxed);
            let end = self.changes.len().min(start + LOAD_ASSIGNMENT_CHUNK);
            let Some(chunk) = self.changes.get(start..end).filter(|c| !c.is_empty()) else {
                return out;
            };
            let edits = edits_of(ResourceType::Endpoint, chunk, held, |c| bytes.encode(c));
            out.push((start, edits));
        }
    }

    /// The previous load assignments with every chunk's edits applied, in the order of the
    /// changes (whichever thread encoded them).
    fn finish(&self, mut chunks: Chunks) -> Arc<TypeSnapshot> {
        chunks.sort_unstable_by_key(|(start, _)| *start);
        debug_assert!(
            chunks
                .iter()
                .map(|(start, _)| *start)
                .eq((0..chunks.len()).map(|i| i * LOAD_ASSIGNMENT_CHUNK)),
            "every chunk once"
        );
        let edits = chunks.into_iter().flat_map(|(_, edits)| edits);
        apply_edits(
            ResourceType::Endpoint,
            self.prev.as_ref(),
            &self.changes,
            edits,
        )
    }
}

/// What one changed cluster does to one per-cluster type (clusters, or load assignments).
enum ResourceEdit {
    /// Nothing: the resource's bytes are those held.
    Same,
    Put(Arc<Resource>),
    Removed,
}

impl ClusterChange {
    fn cluster(&self) -> &Cluster {
        match self {
            ClusterChange::Removed(c) | ClusterChange::Put(c) => c,
        }
    }
}

/// How many changed clusters [`edits_of`] encodes before it hashes their resources together.
const EDIT_BATCH: usize = 64;

/// The edits of `changes` (one each, in order) to a per-cluster type whose resources held so far
/// `held` finds: `encode` makes a changed cluster's resource; those whose bytes differ from the
/// held ones are hashed side by side, a batch at a time ([`Resource::new_many`]).
fn edits_of<'h>(
    t: ResourceType,
    changes: &[ClusterChange],
    held: impl Fn(&str) -> Option<&'h Arc<Resource>>,
    mut encode: impl FnMut(&Cluster) -> Vec<u8>,
) -> Vec<ResourceEdit> {
    let mut edits = Vec::with_capacity(changes.len());
    let mut changed = Vec::with_capacity(EDIT_BATCH.min(changes.len()));
    let mut at = Vec::with_capacity(EDIT_BATCH.min(changes.len()));
    for batch in changes.chunks(EDIT_BATCH) {
        for change in batch {
            let c = match change {
                ClusterChange::Removed(_) => {
                    edits.push(ResourceEdit::Removed);
                    continue;
                }
                ClusterChange::Put(c) => c,
            };
            let value = encode(c);
            if held(&c.name).is_some_and(|r| r.body.value == value) {
                edits.push(ResourceEdit::Same);
                continue;
            }
            // The resource shares its name with the model's cluster; its edit is put in place
            // once the batch is hashed.
            at.push(edits.len());
            edits.push(ResourceEdit::Same);
            changed.push((c.name.clone(), Body::new(t, value)));
        }
        let resources = Resource::new_many(std::mem::take(&mut changed));
        for (i, r) in at.drain(..).zip(resources) {
            edits[i] = ResourceEdit::Put(Arc::new(r));
        }
    }
    edits
}

/// The resources of one per-cluster type: the previous ones (`prev`) with the edits of
/// `changes` (one each, in the same order) applied.
fn apply_edits(
    t: ResourceType,
    prev: Option<&Arc<TypeSnapshot>>,
    changes: &[ClusterChange],
    edits: impl IntoIterator<Item = ResourceEdit>,
) -> Arc<TypeSnapshot> {
    let mut patch = Patch::new(t, prev);
    let mut applied = 0;
    for (change, edit) in changes.iter().zip(edits) {
        applied += 1;
        match edit {
            ResourceEdit::Same => {}
            ResourceEdit::Put(r) => patch.edit().insert(r),
            ResourceEdit::Removed => patch.remove(&change.cluster().name),
        }
    }
    debug_assert_eq!(applied, changes.len(), "an edit for every change");
    patch.finish()
}

/// What the encoder held of a previous model, handed back by [`Encoder::encode`].
#[derive(Debug)]
pub struct Retired(
    #[expect(dead_code, reason = "held only to be freed where the caller chooses")] Option<Prev>,
);

/// The resources of one type: the previous snapshot's, with changes applied. Until the first
/// change nothing is copied, and a type without changes is the previous `Arc<TypeSnapshot>`; a
/// changed type shares every unchanged resource's node with the previous one ([`Edit`]).
struct Patch<'p> {
    t: ResourceType,
    prev: Option<&'p Arc<TypeSnapshot>>,
    /// The previous resources with the changes so far; None until something changed.
    changed: Option<Edit>,
    /// Resources added and not yet in `changed`: their content hashes are computed side by side,
    /// a batch at a time ([`Resource::new_many`]), before anything else changes the type.
    pending: Vec<(ResourceName, Body)>,
}

impl<'p> Patch<'p> {
    fn new(t: ResourceType, prev: Option<&'p Arc<TypeSnapshot>>) -> Self {
        Patch {
            t,
            prev,
            changed: None,
            pending: Vec::new(),
        }
    }

    fn get(&self, name: &str) -> Option<&Arc<Resource>> {
        match &self.changed {
            Some(edit) => edit.get(name),
            None => self.prev?.resources.get(name),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn changed(&self) -> bool {
        self.changed.is_some() || !self.pending.is_empty()
    }

    fn edit(&mut self) -> &mut Edit {
        let prev = self.prev;
        self.changed
            .get_or_insert_with(|| prev.map(|p| p.edit()).unwrap_or_default())
    }

    fn add<T: Message + Name>(&mut self, name: &str, message: &T) {
        self.add_encoded(name, message.encode_to_vec());
    }

    /// Adds or replaces a resource; a resource with the same bytes as the one held stays as it is.
    /// The encoder adds a name at most once between flushes (once per encode), so the resource
    /// held is the one to compare with; a name pending twice would take the later bytes only if
    /// they differ from those held before both.
    fn add_encoded(&mut self, name: &str, value: Vec<u8>) {
        if self.get(name).is_some_and(|r| r.body.value == value) {
            return;
        }
        self.put_changed(name, value);
    }

    /// Adds or replaces a resource the caller knows to differ from the one held: hashed at the
    /// next flush, side by side with the others pending.
    fn put_changed(&mut self, name: &str, value: Vec<u8>) {
        debug_assert!(
            !self.pending.iter().any(|(n, _)| **n == *name),
            "{name} added twice before a flush"
        );
        self.pending.push((name.into(), Body::new(self.t, value)));
        if self.pending.len() >= EDIT_BATCH {
            self.flush();
        }
    }

    /// Puts the pending resources in, hashed side by side.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let resources = Resource::new_many(std::mem::take(&mut self.pending));
        let edit = self.edit();
        for r in resources {
            edit.insert(Arc::new(r));
        }
    }

    /// Adds or replaces a resource the caller knows to differ from the one held, with the
    /// content digest it computed of `value` ([`Resource::with_large_digest`]).
    fn put_hashed(&mut self, name: &str, value: Vec<u8>, digest: &[u8; 32]) {
        self.flush();
        let body = Body::new(self.t, value);
        let resource = Resource::with_large_digest(name, body, digest);
        self.edit().insert(Arc::new(resource));
    }

    fn remove(&mut self, name: &str) {
        self.flush();
        if self.has(name) {
            self.edit().remove(name);
        }
    }

    fn finish(mut self) -> Arc<TypeSnapshot> {
        self.flush();
        match (self.changed, self.prev) {
            (Some(edit), _) => Arc::new(edit.finish()),
            (None, Some(prev)) => prev.clone(),
            (None, None) => Arc::new(TypeSnapshot::default()),
        }
    }
}

#[path = "incremental_layout.rs"]
mod layout;
use layout::{
    HostEdits, HttpGroups, HttpShard, Layout, http_route_config_head, http_route_config_suffix,
};

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
