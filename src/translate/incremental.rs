//! Incremental encoding: successive routing models → xDS snapshots, translating and encoding only
//! what changed since the previous model.
//!
//! The result is always exactly `xds::Snapshot::from_resources(&translate::build(dag, options))`
//! (the tests compare both over sequences of changes). What changed is found by diffing the
//! model's persistent maps against the previous model's ([`crate::pmap::OrdMap::diff`]): a model
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

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use prost::encoding::{WireType, encode_key, encode_varint};
use prost::{Message, Name};

use super::{
    ClusterBytes, HTTP_ROUTE_CONFIG, HTTPS_LISTENER, LoadAssignmentBytes, Options, ResourceType,
    build_secret, https_route_config_name, listener, route,
};
use crate::dag::{Cluster, Dag, VirtualHost};
use crate::pmap::DiffItem;
use crate::xds::cache::{Body, Edit, Resource, ResourceName, Snapshot, TypeSnapshot};
use crate::xds::content;

/// Field number of `RouteConfiguration.virtual_hosts`.
const VIRTUAL_HOSTS_FIELD: u32 = 2;

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
    /// Where each host's `VirtualHost` is in the bytes of the snapshot's HTTP route configuration.
    http: Layout,
}

/// The layout of an encoded HTTP route configuration: its name field, then one entry per virtual
/// host (field key, length, encoded `VirtualHost`) in the order of their names, which is the
/// configuration's order: a host's own, named after the host, and the shared
/// [`route::HTTPS_REDIRECT_VHOST`]. A change of a few hosts is spliced into the previous bytes: the bytes
/// between changed hosts are copied in runs, not encoded or assembled again. The content hash
/// is made of the hashes of groups of entries ([`content`]); the layout keeps them, and a change
/// hashes again only the groups that hold changed hosts.
#[derive(Debug, Default)]
struct Layout {
    entries: Vec<Entry>,
    /// Whether each entry ends a group ([`Entry::ends_group`]): what finding the groups reads,
    /// 1 byte per entry where an entry is ~60.
    ends: Vec<bool>,
    /// The length of the bytes described (the head and every entry).
    len: usize,
    /// The hash of the last group, after the last entry that ends one (of the head and the
    /// entries after it); None when not computed yet.
    tail: Option<[u8; 32]>,
    /// Bytes of groups hashed so far (the tests count them).
    #[cfg(test)]
    hashed: usize,
    /// The hosts that are domains of the shared [`route::HTTPS_REDIRECT_VHOST`]
    /// ([`route::redirects_everything`]). Every other host of a change is looked up here, so a
    /// hash set (a sorted set's lookup compared ~10 names); sorted when the shared host is made.
    redirected: hashbrown::HashSet<String>,
}

/// Up to this many changed hosts are applied to the layout in place; more are merged into a new
/// one in a single pass.
const IN_PLACE_EDITS: usize = 16;

#[derive(Debug)]
struct Entry {
    host: Box<str>,
    /// Where the entry starts, and its length: key, length varint and body.
    start: usize,
    len: usize,
    /// The length of the body (the encoded `VirtualHost`), the last bytes of the entry.
    body: usize,
    /// Whether the entry ends a group of the content hash ([`content::ends_group`]).
    ends_group: bool,
    /// The hash of the group the entry ends, once computed.
    group: Option<Box<[u8; 32]>>,
}

impl Entry {
    fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Appends one entry (field 2 of `RouteConfiguration`) holding `body`; returns its entry.
fn write_entry(out: &mut Vec<u8>, host: String, body: &[u8]) -> Entry {
    let start = out.len();
    encode_key(VIRTUAL_HOSTS_FIELD, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
    let len = out.len() - start;
    Entry {
        host: host.into_boxed_str(),
        start,
        len,
        body: body.len(),
        ends_group: content::ends_group(body, len),
        group: None,
    }
}

/// Changed hosts of the HTTP route configuration: bytes to put, or None to remove. They are
/// collected in a vector, mostly in host order already (from the diff of the models' hosts), and
/// sorted once before the splice: cheaper than keeping a sorted map of thousands of hosts for a
/// build from nothing.
#[derive(Debug, Default)]
struct HostEdits(Vec<(String, Option<Vec<u8>>)>);

impl HostEdits {
    fn put(&mut self, host: String, bytes: Option<Vec<u8>>) {
        self.0.push((host, bytes));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The edits in host order, each host once with its last edit, as a map's inserts would
    /// leave them.
    fn sorted(self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut edits = self.0;
        // Stable: the edits of one host stay in the order they were made.
        edits.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Option<Vec<u8>>)> = Vec::with_capacity(edits.len());
        for edit in edits {
            match out.last_mut() {
                Some(last) if last.0 == edit.0 => *last = edit,
                _ => out.push(edit),
            }
        }
        out
    }
}

#[cfg(test)]
impl From<BTreeMap<String, Option<Vec<u8>>>> for HostEdits {
    fn from(edits: BTreeMap<String, Option<Vec<u8>>>) -> HostEdits {
        HostEdits(edits.into_iter().collect())
    }
}

impl Layout {
    /// The encoded `VirtualHost` of `host` in `bytes` (the configuration this layout describes).
    fn body<'b>(&self, bytes: &'b [u8], host: &str) -> Option<&'b [u8]> {
        let i = self
            .entries
            .binary_search_by(|e| (*e.host).cmp(host))
            .ok()?;
        let e = &self.entries[i];
        bytes.get(e.end() - e.body..e.end())
    }

    /// Where `host`'s entry is among the entries, and whether it is there.
    fn place(&self, host: &str) -> (usize, bool) {
        match self.entries.binary_search_by(|e| (*e.host).cmp(host)) {
            Ok(i) => (i, true),
            Err(i) => (i, false),
        }
    }

    /// Where entry `i` starts (or would start): the end of the bytes past the last entry.
    fn start_of(&self, i: usize, head: usize) -> usize {
        match self.entries.get(i) {
            Some(e) => e.start,
            None => self.entries.last().map_or(head, Entry::end),
        }
    }

    /// `old` (the configuration this layout describes, named `name`) with `edits` applied: a host
    /// with bytes is put (added or replaced), a host with None removed. The layout then describes
    /// the result; also returned is its content digest ([`Resource::with_large_digest`]).
    fn splice(&mut self, name: &str, old: &[u8], edits: HostEdits) -> (Vec<u8>, [u8; 32]) {
        let edits = edits.sorted();
        let head = self.entries.first().map_or(old.len(), |e| e.start);
        let added: usize = edits.iter().flat_map(|(_, b)| b).map(|b| b.len() + 8).sum();
        let mut out = Vec::with_capacity(old.len() + added);
        // Where each edit falls among the old entries (edits are in host order, as entries are).
        let places: Vec<(usize, bool)> = edits.iter().map(|(h, _)| self.place(h)).collect();
        let touched = if edits.len() <= IN_PLACE_EDITS {
            self.splice_in_place(old, head, &mut out, edits, &places)
        } else {
            self.merge(old, head, &mut out, edits, places)
        };
        // The group the previous edit's entry was found in, from where that search started to
        // the entry that ends the group (None: the last group): a later edit in that span is
        // in the same group, already forgotten. A group holds ~16 KiB of entries (~160 hosts);
        // searching from each edited entry of a rebuild went over its group again each time.
        let mut last: Option<(usize, Option<usize>)> = None;
        for at in touched {
            let end = self.forget_group_once(at, &mut last);
            if end == Some(at) {
                self.forget_group_once(at + 1, &mut last);
            }
        }
        self.len = out.len();
        let digest = self.digest(name, &out);
        (out, digest)
    }

    /// [`Layout::forget_group_of`], unless `last` (the span searched by the previous call, to the
    /// entry it found) holds `at`: that group was forgotten already. An entry was put at `at`,
    /// or removed from before it: the group that holds the entry now at `at` is hashed again,
    /// and so is the next one when that entry ends its group (an entry that ends a group moves
    /// where the next group starts).
    fn forget_group_once(
        &mut self,
        at: usize,
        last: &mut Option<(usize, Option<usize>)>,
    ) -> Option<usize> {
        if let Some((from, end)) = *last
            && from <= at
            && end.is_none_or(|end| at <= end)
        {
            return end;
        }
        let end = self.forget_group_of(at);
        *last = Some((at, end));
        end
    }

    /// Forgets the hash of the group that holds entry `at` (or would, past the last entry): the
    /// group of the first entry from `at` on that ends one, or the last group. Returns the index
    /// of that entry.
    fn forget_group_of(&mut self, at: usize) -> Option<usize> {
        let rest = self.ends.get(at..).unwrap_or_default();
        match rest.iter().position(|&ends| ends) {
            Some(i) => {
                self.entries[at + i].group = None;
                Some(at + i)
            }
            None => {
                self.tail = None;
                None
            }
        }
    }

    /// The content digest of `bytes` (the configuration this layout describes, named `name`),
    /// hashing the groups whose hashes are not known.
    fn digest(&mut self, name: &str, bytes: &[u8]) -> [u8; 32] {
        debug_assert_eq!(self.ends.len(), self.entries.len());
        let mut digest = content::Digest::new(name);
        let mut start = 0;
        let ends = self.ends.iter().enumerate().filter(|(_, ends)| **ends);
        for (i, _) in ends {
            let e = &mut self.entries[i];
            let end = e.end();
            let group = e.group.get_or_insert_with(|| {
                #[cfg(test)]
                {
                    self.hashed += end - start;
                }
                Box::new(content::group_digest(&bytes[start..end]))
            });
            digest.group(group);
            start = end;
        }
        if start < bytes.len() {
            let tail = self.tail.get_or_insert_with(|| {
                #[cfg(test)]
                {
                    self.hashed += bytes.len() - start;
                }
                content::group_digest(&bytes[start..])
            });
            digest.group(tail);
        } else {
            self.tail = None;
        }
        digest.finish()
    }

    /// Copies the bytes between edits in one run each, then updates the entries where they are.
    /// Returns where the edits are among the new entries ([`Layout::forget_group_once`]).
    fn splice_in_place(
        &mut self,
        old: &[u8],
        head: usize,
        out: &mut Vec<u8>,
        edits: Vec<(String, Option<Vec<u8>>)>,
        places: &[(usize, bool)],
    ) -> Vec<usize> {
        let mut cursor = 0;
        let mut written = Vec::with_capacity(edits.len());
        let puts: Vec<bool> = edits.iter().map(|(_, b)| b.is_some()).collect();
        for ((host, edit), &(i, found)) in edits.into_iter().zip(places) {
            let at = self.start_of(i, head);
            out.extend_from_slice(&old[cursor..at]);
            cursor = if found { self.entries[i].end() } else { at };
            written.push(edit.map(|body| write_entry(out, host, &body)));
        }
        out.extend_from_slice(&old[cursor..]);
        // Entries last to first, so that each index still points where it did.
        for (entry, &(i, found)) in written.into_iter().zip(places).rev() {
            match (entry, found) {
                (Some(e), true) => {
                    self.ends[i] = e.ends_group;
                    self.entries[i] = e;
                }
                (Some(e), false) => {
                    self.ends.insert(i, e.ends_group);
                    self.entries.insert(i, e);
                }
                (None, true) => {
                    self.ends.remove(i);
                    self.entries.remove(i);
                }
                (None, false) => {}
            }
        }
        // Offsets from the first edit on, in order.
        if let Some(&(first, _)) = places.first() {
            let mut at = match first.checked_sub(1) {
                Some(prev) => self.entries[prev].end(),
                None => head,
            };
            for e in &mut self.entries[first..] {
                e.start = at;
                at += e.len;
            }
        }
        // Each edit's old index, moved by the entries added and removed before it.
        let mut shift = 0isize;
        let mut touched = Vec::with_capacity(places.len());
        for (put, &(i, found)) in puts.into_iter().zip(places) {
            touched.push(i.saturating_add_signed(shift));
            match (put, found) {
                (true, false) => shift += 1,
                (false, true) => shift -= 1,
                _ => {}
            }
        }
        touched
    }

    /// Builds the entries again in one pass: the old ones moved over, the edits merged in.
    /// Returns where the edits are among the new entries ([`Layout::forget_group_once`]).
    fn merge(
        &mut self,
        old: &[u8],
        head: usize,
        out: &mut Vec<u8>,
        edits: Vec<(String, Option<Vec<u8>>)>,
        places: Vec<(usize, bool)>,
    ) -> Vec<usize> {
        out.extend_from_slice(&old[..head]);
        let mut kept = std::mem::take(&mut self.entries)
            .into_iter()
            .enumerate()
            .peekable();
        let mut entries = Vec::with_capacity(kept.len() + edits.len());
        let mut touched = Vec::with_capacity(edits.len());
        for ((host, edit), (at, found)) in edits.into_iter().zip(places) {
            carry(old, out, &mut kept, &mut entries, at);
            if found {
                kept.next();
            }
            touched.push(entries.len());
            if let Some(body) = edit {
                entries.push(write_entry(out, host, &body));
            }
        }
        carry(old, out, &mut kept, &mut entries, usize::MAX);
        self.ends = entries.iter().map(|e| e.ends_group).collect();
        self.entries = entries;
        touched
    }
}

/// Moves the old entries before index `to` from `kept` to `entries`, and their bytes from `old`
/// to `out` in one copy.
fn carry(
    old: &[u8],
    out: &mut Vec<u8>,
    kept: &mut std::iter::Peekable<std::iter::Enumerate<std::vec::IntoIter<Entry>>>,
    entries: &mut Vec<Entry>,
    to: usize,
) {
    let mut run: Option<(usize, usize)> = None;
    while let Some((_, mut e)) = kept.next_if(|(i, _)| *i < to) {
        let from = run.map_or(e.start, |(from, _)| from);
        run = Some((from, e.end()));
        // The run is copied to the end of `out` below.
        e.start = out.len() + (e.start - from);
        entries.push(e);
    }
    if let Some((from, to)) = run {
        out.extend_from_slice(&old[from..to]);
    }
}

/// What the HTTPS listener's filter chain of a host is made of (besides the host name, which is
/// the model's key): its TLS settings and TCP proxy; None for a host without TLS, which has no
/// chain. A change of a TLS host's HTTP routes leaves it alone (they are in the host's own route
/// configuration).
fn tls_chain(
    v: Option<&VirtualHost>,
) -> Option<(&crate::dag::VhostTls, &Option<crate::dag::model::Clusters>)> {
    v.and_then(|v| Some((v.tls.as_ref()?, &v.tcp_proxy)))
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

    /// The xDS snapshot of `dag`, and what the encoder kept of the previous model (the caller
    /// decides where to free it: it can be large).
    pub fn encode(&mut self, dag: &Arc<Dag>) -> (Snapshot, Retired) {
        let empty = Dag::default();
        let mut layout = self
            .prev
            .as_mut()
            .map(|p| std::mem::take(&mut p.http))
            .unwrap_or_default();
        let prev = self.prev.as_ref();
        let prev_dag = prev.map_or(&empty, |p| p.dag.as_ref());
        let prev_type = |t: ResourceType| prev.and_then(|p| p.snapshot.shared(t));
        // The previous HTTP route configuration's bytes, which `layout` describes. Should they not
        // match (an earlier encode stopped half-way), every host is encoded again.
        let head = http_route_config_head();
        let mut old_http = prev
            .and_then(|p| p.snapshot.of(ResourceType::Route).get(HTTP_ROUTE_CONFIG))
            .map_or(&head[..], |r| &r.body.value[..]);
        let reset = old_http.len() != layout.len.max(head.len());
        if reset {
            layout = Layout::default();
            old_http = &head;
        }

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
        let fallback = dag.vhosts.get("*").map(|v| &**v);
        // Changed hosts of the HTTP route configuration: bytes to put, or None to remove.
        let mut http_edits = HostEdits::default();
        let redirected_before = layout.redirected.len();
        let mut redirected_changed = false;
        let mut set_http = |layout: &mut Layout, v: &VirtualHost| {
            if route::redirects_everything(v) {
                // A domain of the shared virtual host; its own goes, if it had one.
                redirected_changed |= layout.redirected.insert(v.host.clone());
                if layout.body(old_http, &v.host).is_some() {
                    http_edits.put(v.host.clone(), None);
                }
                return;
            }
            redirected_changed |= layout.redirected.remove(&v.host);
            let bytes = route::encode_http_vhost(v, fallback);
            if layout.body(old_http, &v.host) != Some(&bytes[..]) {
                http_edits.put(v.host.clone(), Some(bytes));
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
            match new.filter(|v| v.tcp_proxy.is_none()) {
                Some(v) => set_http(&mut layout, v),
                None => removed_http.push(host),
            }
        }
        // A wildcard host's HTTP routes end with those of the catch-all host `*`; after a reset
        // every host is encoded.
        let catch_all_changed = prev_dag.vhosts.get("*") != dag.vhosts.get("*");
        if reset || catch_all_changed {
            for v in dag.vhosts.values() {
                if (reset || v.host.starts_with("*.")) && v.tcp_proxy.is_none() {
                    set_http(&mut layout, v);
                }
            }
        }
        for host in removed_http {
            redirected_changed |= layout.redirected.remove(host);
            if layout.body(old_http, host).is_some() {
                http_edits.put(host.clone(), None);
            }
        }
        if redirected_changed {
            let shared = route::HTTPS_REDIRECT_VHOST.to_string();
            let bytes = (!layout.redirected.is_empty()).then(|| {
                // In the model's order: its hosts are sorted by name.
                let mut hosts: Vec<&str> = layout.redirected.iter().map(String::as_str).collect();
                hosts.sort_unstable();
                route::build_https_redirect_vhost(hosts).encode_to_vec()
            });
            if bytes.is_some() || redirected_before > 0 {
                http_edits.put(shared, bytes);
            }
        }
        if !http_edits.is_empty() || !routes.has(HTTP_ROUTE_CONFIG) {
            let (bytes, digest) = layout.splice(HTTP_ROUTE_CONFIG, old_http, http_edits);
            if reset
                && routes
                    .get(HTTP_ROUTE_CONFIG)
                    .is_some_and(|r| r.body.value == bytes)
            {
                // Rebuilt from nothing, and the same as before.
            } else {
                // Different entries make different bytes: no need to compare them.
                routes.put_hashed(HTTP_ROUTE_CONFIG, bytes, &digest);
            }
        }

        let mut listeners = Patch::new(ResourceType::Listener, prev_type(ResourceType::Listener));
        // The HTTP listener depends on the options alone, which are this encoder's for its life:
        // the previous snapshot holds it.
        if prev.is_none() {
            let http = listener::build_http_listener(&self.options);
            listeners.add(&http.name, &http);
        }
        if tls_changed {
            match listener::build_https_listener(dag, &self.options) {
                Some(https) => listeners.add(&https.name, &https),
                None => listeners.remove(HTTPS_LISTENER),
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
            (ResourceType::Route, routes.finish()),
            (ResourceType::Cluster, clusters),
            (ResourceType::Endpoint, endpoints),
            (ResourceType::Secret, secrets.finish()),
        ]));
        let retired = self.prev.replace(Prev {
            dag: dag.clone(),
            snapshot: snapshot.clone(),
            http: layout,
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

/// The start of the HTTP route configuration's bytes, before its virtual hosts (field 2): what
/// prost writes for its name (field 1); no other field is set.
fn http_route_config_head() -> Vec<u8> {
    RouteConfiguration {
        name: HTTP_ROUTE_CONFIG.to_string(),
        ..Default::default()
    }
    .encode_to_vec()
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
        debug_assert!(
            !self.pending.iter().any(|(n, _)| **n == *name),
            "{name} added twice before a flush"
        );
        if self.get(name).is_some_and(|r| r.body.value == value) {
            return;
        }
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

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
