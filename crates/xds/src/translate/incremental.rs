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
use std::time::Instant;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use prost::{Message, Name};

use super::{
    ClusterBytes, HTTPS_LISTENER, LoadAssignmentBytes, Options, ResourceType, build_secret, entry,
    https_route_config_name, listener, route,
};
use crate::xds::cache::{Body, Edit, Resource, ResourceName, Snapshot, TypeSnapshot};
use crate::xds::content;
use sluice_core::dag::{Dag, VirtualHost};
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
    ///
    /// The steps: the route shards (`Encoder::plan_shards`); the clusters and load assignments,
    /// on a second thread when many changed (`ClusterJob`); the secrets; each changed host's
    /// route configurations and virtual hosts (`Step::hosts`); the HTTP route configurations
    /// spliced (`Step::splice`); the listeners and scopes (`Step::listeners`); the ports of
    /// Gateways' own addresses (`Step::entries`).
    pub fn encode(&mut self, dag: &Arc<Dag>) -> (Snapshot, Retired) {
        let plan = self.plan_shards(dag);
        let mut prev_layouts = self.take_layouts();
        let prev = self.prev.as_ref();
        let empty = Dag::default();
        let prev_dag = prev.map_or(&empty, |p| p.dag.as_ref());
        let prev_type = |t: ResourceType| prev.and_then(|p| p.snapshot.shared(t));
        let heads = HttpHeads::new(&plan.groups);
        let (http, reset) = heads.shards(prev, &mut prev_layouts);
        let cluster_job = ClusterJob::start(
            prev_dag,
            dag,
            prev_type(ResourceType::Cluster).cloned(),
            prev_type(ResourceType::Endpoint).cloned(),
        );
        let mut step = Step {
            options: &self.options,
            dag,
            prev_dag,
            first: prev.is_none(),
            secrets: Patch::new(ResourceType::Secret, prev_type(ResourceType::Secret)),
            routes: Patch::new(ResourceType::Route, prev_type(ResourceType::Route)),
            listeners: Patch::new(ResourceType::Listener, prev_type(ResourceType::Listener)),
            scopes: Patch::new(
                ResourceType::ScopedRoute,
                prev_type(ResourceType::ScopedRoute),
            ),
            tls_changed: false,
        };
        step.secrets();
        // The route configurations of a group no longer held.
        for (name, _) in &prev_layouts {
            if !heads.0.iter().any(|h| h.name == *name) {
                step.routes.remove(name);
            }
        }
        let http = step.hosts(http, &plan.groups, reset);
        let layouts = step.splice(http, &heads, reset);
        step.listeners(&plan);
        step.entries();
        let (endpoints, clusters) = cluster_job.finish();
        let snapshot = Snapshot::from_types(BTreeMap::from([
            (ResourceType::Listener, step.listeners.finish()),
            (ResourceType::ScopedRoute, step.scopes.finish()),
            (ResourceType::Route, step.routes.finish()),
            (ResourceType::Cluster, clusters),
            (ResourceType::Endpoint, endpoints),
            (ResourceType::Secret, step.secrets.finish()),
        ]));
        let retired = self.prev.replace(Prev {
            dag: dag.clone(),
            snapshot: snapshot.clone(),
            http: layouts,
            shards: plan.shards,
            draining: plan.draining,
        });
        (snapshot, Retired(retired))
    }

    /// The route shards of `dag`'s snapshot. Shards on or off (`auto`): the HTTP listener and
    /// its scopes are new, and the previous listener's route configurations are kept up to date
    /// beside the new ones for a while
    /// ([`AutoRouteShards::keep_previous_for`](super::AutoRouteShards)): connections accepted
    /// before Envoy had the new listener keep routing with them until they drain.
    fn plan_shards(&self, dag: &Dag) -> ShardPlan {
        let prev_shards = self.http_route_shards();
        let shards = (self.options.route_shards).count(dag.vhosts.len(), prev_shards);
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
        ShardPlan {
            shards,
            resharded,
            draining,
            groups: HttpGroups::new(shards, draining.map(|d| d.shards)),
            prev_groups: self.prev.as_ref().map(|p| p.groups()),
        }
    }

    /// The previous snapshot's HTTP route configurations' layouts, taken out of it, each with
    /// its configuration's name.
    fn take_layouts(&mut self) -> Vec<(String, Layout)> {
        let Some(p) = self.prev.as_mut() else {
            return Vec::new();
        };
        (p.groups().names())
            .map(|(_, name)| name)
            .zip(std::mem::take(&mut p.http))
            .collect()
    }
}

/// The route shards of one encode ([`Encoder::plan_shards`]).
struct ShardPlan {
    /// The HTTP listener's.
    shards: u16,
    /// The previous listener's shards, when they differ from these.
    resharded: Option<u16>,
    /// The previous listener's shards, while their route configurations are kept up to date.
    draining: Option<Draining>,
    groups: HttpGroups,
    /// The previous snapshot's groups (None before the first).
    prev_groups: Option<HttpGroups>,
}

/// One HTTP route configuration of the snapshot being encoded: its name, its encoding with
/// nothing but the name (the bytes of a shard new to the snapshot), and its group.
struct HttpHead {
    name: String,
    head: Vec<u8>,
    group: usize,
}

/// Every HTTP route configuration of the snapshot being encoded ([`HttpGroups::names`]), and
/// each group's suffix: the bytes after the virtual hosts, shared by the group's shards.
struct HttpHeads(Vec<HttpHead>, Vec<Vec<u8>>);

impl HttpHeads {
    fn new(groups: &HttpGroups) -> HttpHeads {
        let heads = (groups.names())
            .map(|(group, name)| HttpHead {
                head: http_route_config_head(&name),
                name,
                group,
            })
            .collect();
        HttpHeads(
            heads,
            groups.counts().map(http_route_config_suffix).collect(),
        )
    }

    fn suffix(&self, head: &HttpHead) -> &[u8] {
        &self.1[head.group]
    }

    /// The shards of the HTTP route configurations as the change starts, each with its layout
    /// (taken from `prev_layouts`) and its previous bytes less the suffix; and whether every
    /// host is to be encoded again (a reset): a shard new to the snapshot is filled with every
    /// host, and should one not match its layout (an earlier encode stopped half-way), every
    /// host is encoded again into every shard.
    fn shards<'a>(
        &'a self,
        prev: Option<&'a Prev>,
        prev_layouts: &mut [(String, Layout)],
    ) -> (Vec<HttpShard<'a>>, bool) {
        let mut fresh = false;
        let mut layouts: Vec<Layout> = (self.0.iter())
            .map(
                |h| match prev_layouts.iter_mut().find(|(n, _)| *n == h.name) {
                    Some((_, layout)) => std::mem::take(layout),
                    None => {
                        fresh = true;
                        Layout::default()
                    }
                },
            )
            .collect();
        let mut old_http: Vec<&[u8]> = (self.0.iter())
            .map(|h| {
                prev.and_then(|p| p.snapshot.of(ResourceType::Route).get(h.name.as_str()))
                    .and_then(|r| r.body.value.strip_suffix(self.suffix(h)))
                    .unwrap_or(&h.head)
            })
            .collect();
        let stale = (layouts.iter().zip(&old_http).zip(&self.0))
            .any(|((layout, old), h)| old.len() != layout.len.max(h.head.len()));
        if stale {
            layouts = self.0.iter().map(|_| Layout::default()).collect();
            old_http = self.0.iter().map(|h| &h.head[..]).collect();
        }
        let shards = (layouts.into_iter().zip(old_http))
            .map(|(layout, old)| HttpShard {
                redirected_before: layout.redirected.len(),
                layout,
                old,
                edits: HostEdits::default(),
                redirected_changed: false,
            })
            .collect();
        (shards, fresh || stale)
    }
}

/// The resources of one encode other than clusters and load assignments, as its steps make
/// them from the previous model (`prev_dag`) and the new one (`dag`).
struct Step<'a> {
    options: &'a Options,
    dag: &'a Dag,
    prev_dag: &'a Dag,
    /// Whether there is no previous snapshot.
    first: bool,
    secrets: Patch<'a>,
    routes: Patch<'a>,
    listeners: Patch<'a>,
    scopes: Patch<'a>,
    /// Whether the TLS listener changes: it has one filter chain per TLS host, naming its
    /// secret, so it changes only with what a host's chain is made of ([`tls_chain`]) or a
    /// secret.
    tls_changed: bool,
}

impl Step<'_> {
    /// The secrets that changed.
    fn secrets(&mut self) {
        for item in self.prev_dag.secrets.diff(&self.dag.secrets) {
            match item {
                DiffItem::Remove(_, s) => self.secrets.remove(&s.name),
                DiffItem::Add(_, s) | DiffItem::Update { new: (_, s), .. } => {
                    let pb = build_secret(s);
                    self.secrets.add(&pb.name, &pb);
                }
            }
        }
        self.tls_changed = self.first || self.secrets.changed();
    }

    /// Each changed host: its own HTTPS route configuration, its chain of the TLS listener, and
    /// its virtual host in the HTTP route configurations' shards (`http`). A wildcard host's
    /// HTTP routes end with those of the catch-all host `*`; after a reset every host is
    /// encoded, once.
    fn hosts<'h>(
        &mut self,
        mut http: Vec<HttpShard<'h>>,
        groups: &HttpGroups,
        reset: bool,
    ) -> Vec<HttpShard<'h>> {
        let fallback = self.dag.vhosts.get("*").map(|v| &**v);
        let mut removed_http = Vec::new();
        for item in self.prev_dag.vhosts.diff(&self.dag.vhosts) {
            let (host, old, new) = match item {
                DiffItem::Remove(h, v) => (h, Some(&**v), None),
                DiffItem::Add(h, v) => (h, None, Some(&**v)),
                DiffItem::Update {
                    old: (h, o),
                    new: (_, n),
                } => (h, Some(&**o), Some(&**n)),
            };
            self.tls_changed |= tls_chain(old) != tls_chain(new);
            self.https_routes(host, old, new);
            match new.filter(|v| v.serves_http()) {
                // After a reset the loop below puts every host, once.
                Some(_) if reset => {}
                Some(v) => put_http_host(&mut http, groups, v, fallback),
                None => removed_http.push(host),
            }
        }
        let catch_all_changed = self.prev_dag.vhosts.get("*") != self.dag.vhosts.get("*");
        if reset || catch_all_changed {
            for v in self.dag.vhosts.values() {
                if (reset || v.host.starts_with("*.")) && v.serves_http() {
                    put_http_host(&mut http, groups, v, fallback);
                }
            }
        }
        for host in removed_http {
            for k in groups.shards_of(host).into_iter().flatten() {
                http[k].remove(host);
            }
        }
        http
    }

    /// The HTTPS route configuration of a host that changed from `old` to `new`.
    fn https_routes(&mut self, host: &str, old: Option<&VirtualHost>, new: Option<&VirtualHost>) {
        match new.filter(|v| has_https_routes(v)) {
            Some(v) => {
                let (name, bytes) = route::encode_https_route_config(v);
                self.routes.add_encoded(&name, bytes);
            }
            None if old.is_some_and(has_https_routes) => {
                self.routes.remove(&https_route_config_name(host));
            }
            None => {}
        }
    }

    /// Each shard of the HTTP route configurations with its edits spliced into its previous
    /// bytes: put in the routes unless the same as before; the shards' new layouts, in order.
    fn splice(&mut self, http: Vec<HttpShard<'_>>, heads: &HttpHeads, reset: bool) -> Vec<Layout> {
        let mut layouts = Vec::with_capacity(http.len());
        for (shard, h) in http.into_iter().zip(&heads.0) {
            let (mut layout, old, edits) = shard.with_redirect_edit();
            let name = &h.name;
            if !edits.is_empty() || !self.routes.has(name) {
                let (bytes, digest) = layout.splice(name, old, edits, heads.suffix(h));
                if reset && self.routes.get(name).is_some_and(|r| r.body.value == bytes) {
                    // Rebuilt from nothing, and the same as before.
                } else {
                    // Different entries make different bytes: no need to compare them.
                    match digest {
                        Some(digest) => self.routes.put_hashed(name, bytes, &digest),
                        None => self.routes.put_changed(name, bytes),
                    }
                }
            }
            layouts.push(layout);
        }
        layouts
    }

    /// The listeners and scopes. The HTTP listener depends on the options, which are this
    /// encoder's for its life, and the route shards; the scopes on the groups held: unless
    /// those changed, the previous snapshot holds them.
    fn listeners(&mut self, plan: &ShardPlan) {
        if self.first || plan.resharded.is_some() {
            let http = listener::build_http_listener(self.options, plan.shards);
            self.listeners.add(&http.name, &http);
        }
        if plan.prev_groups.as_ref() != Some(&plan.groups) {
            self.scopes(plan);
        }
        if self.tls_changed {
            match listener::build_https_listener(self.dag, self.options) {
                Some(https) => self.listeners.add(&https.name, &https),
                None => self.listeners.remove(HTTPS_LISTENER),
            }
        }
        // Gateway TCP listeners, a listener per port.
        for item in self.prev_dag.tcp_listeners.diff(&self.dag.tcp_listeners) {
            match item {
                DiffItem::Remove(port, _) => {
                    self.listeners.remove(&listener::tcp_listener_name(*port))
                }
                DiffItem::Add(port, l) | DiffItem::Update { new: (port, l), .. } => {
                    match listener::build_tcp_listener(l, self.options) {
                        Some(tcp) => self.listeners.add(&tcp.name, &tcp),
                        None => self.listeners.remove(&listener::tcp_listener_name(*port)),
                    }
                }
            }
        }
    }

    /// The scopes of the groups held, those of groups no longer held removed.
    fn scopes(&mut self, plan: &ShardPlan) {
        let new_scopes: Vec<_> = (plan.groups.counts())
            .flat_map(listener::build_scoped_routes)
            .collect();
        for old in plan.prev_groups.iter().flat_map(|g| g.counts()) {
            for scope in listener::build_scoped_routes(old) {
                if !new_scopes.iter().any(|s| s.name == scope.name) {
                    self.scopes.remove(&scope.name);
                }
            }
        }
        for scope in new_scopes {
            self.scopes.add(&scope.name, &scope);
        }
    }

    /// The ports of Gateways' own addresses: a listener each, and its route configurations.
    fn entries(&mut self) {
        let (dag, options) = (self.dag, self.options);
        let mut entry_listeners = BTreeMap::new();
        for item in self.prev_dag.entries.diff(&dag.entries) {
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
                    self.routes.remove(&name);
                }
            }
            for config in &configs {
                self.routes.add(&config.name, config);
            }
            let built = new.and_then(|e| entry::build_entry_listener(key, e, dag, options));
            entry_listeners.insert(key.name(), built);
        }
        // A port's TLS chains name their secrets: a secret's bytes changed, they stay as they
        // are (Envoy takes the secret by SDS); one gone or come changes which chains there are.
        if self.secrets.changed() {
            for (key, e) in dag.entries.iter() {
                if e.protocol == sluice_core::dag::EntryProtocol::Tls {
                    let built = entry::build_entry_listener(key, e, dag, options);
                    entry_listeners.entry(key.name()).or_insert(built);
                }
            }
        }
        for (name, l) in entry_listeners {
            match l {
                Some(l) => self.listeners.add(&name, &l),
                None => self.listeners.remove(&name),
            }
        }
    }
}

/// Puts host `v` in every shard of the HTTP route configurations that holds it (a wildcard
/// host's, every shard), encoded once; `fallback` is the catch-all host.
fn put_http_host(
    http: &mut [HttpShard<'_>],
    groups: &HttpGroups,
    v: &VirtualHost,
    fallback: Option<&VirtualHost>,
) {
    let redirect = route::redirects_everything(v);
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

#[path = "incremental_clusters.rs"]
mod clusters;
#[cfg(test)]
use clusters::PARALLEL_CLUSTERS;
use clusters::{ClusterJob, EDIT_BATCH};

#[path = "incremental_layout.rs"]
mod layout;
use layout::{
    HostEdits, HttpGroups, HttpShard, Layout, http_route_config_head, http_route_config_suffix,
};

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
