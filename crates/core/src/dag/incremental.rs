//! Incremental `dag::build`: after a change to a few routing objects, only the part of the model
//! those objects can affect is built again, and the rest of the previous model is shared.
//!
//! Routing objects affect each other only through what they name:
//! - a host (a root's fqdn, a Route's host, an Ingress's rule, TLS and default-backend hosts):
//!   claims compete for it and routes merge into it;
//! - an IngressRoute name (its own, and every name it delegates to, in either API version):
//!   delegation, orphans, cycles and the hint about the other API group follow these.
//!
//! These [`Link`]s make a graph whose connected parts are built independently: `dag::build` of the
//! whole snapshot equals the union of `dag::build` of each part (with Services, EndpointSlices and
//! Secrets looked up in the whole snapshot). A change rebuilds the parts that hold a changed
//! object, before or after the change: the objects reachable from the changed objects' old and
//! new links. The parts' virtual hosts and statuses replace the previous ones; clusters and
//! secrets are the ones the virtual hosts use, counted by user.
//!
//! A change to a Service or a TLS Secret changes the routing objects that name it: a routing object
//! reads the Services its backends name and the Secrets its TLS settings name, in its own
//! namespace, and no other (a delegated route's backends are its vertex's, which is linked to its
//! root). They are found by a pass over the routing objects of the namespace, reading their names
//! ([`NamesOf`]): no index to keep, and a pass costs far less than building them. A change to
//! IngressClasses, or to more routing objects than [`MAX_CHANGED_FRACTION`] of them, is built in
//! full. The Gateway API objects are one routing object of the graph, built together
//! ([`gateway_part`]). EndpointSlice changes are taken into account by refreshing the endpoints of the affected
//! Services' clusters (the endpoint fast path of the pipeline leaves the model's endpoints alone;
//! [`Incremental::endpoints_changed`] records them).
//!
//! Tests compare every incremental build with a full build of the same snapshot.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use hashbrown::{HashMap, HashSet};

use super::builder::vhost_clusters;
use super::model::*;
use super::{Builder, Options};
use crate::api::{Kind, ObjKey, ObjectRef};
#[cfg(test)]
use crate::store::Prepared;
use crate::store::Snapshot;

#[path = "incremental_gateway.rs"]
mod gateway_part;
#[path = "incremental_links.rs"]
mod links;

use super::links::Link;
#[cfg(test)]
use super::links::ingress_links;
pub(super) use links::gateway_api_link_hashes;
use links::{
    Named, Names, copy_object, diff_keys, each_routing_object, object_links, objects_naming,
};

/// Above this fraction of the routing objects changed at once, a full build is cheaper.
pub const MAX_CHANGED_FRACTION: f64 = 0.25;

/// How a model was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildKind {
    Full,
    /// Built again: this many routing objects (changed, or sharing a link with a change).
    Partial {
        objects: usize,
    },
}

/// The index an incremental build needs, kept from one build to the next.
#[derive(Default)]
pub struct Incremental {
    options: Options,
    /// The links of every routing object of the snapshot last built.
    links: HashMap<ObjectRef, Vec<Link>>,
    /// The routing objects holding each link.
    holders: HashMap<Link, Vec<ObjectRef>>,
    /// How many virtual hosts use each cluster, and each secret.
    cluster_users: HashMap<ClusterName, u32>,
    secret_users: HashMap<String, u32>,
    /// How many clusters of the model verify their backends with each CA secret (a cluster's
    /// name says its validation, so a cluster keeps its CA secret as long as it lives).
    ca_users: HashMap<String, u32>,
    /// Services whose EndpointSlices changed since the model was built.
    stale_endpoints: BTreeSet<ObjKey>,
    /// Whether the index describes the last build (false until a full build).
    ready: bool,
}

impl Incremental {
    pub fn new(options: Options) -> Self {
        Incremental {
            options,
            ..Default::default()
        }
    }

    /// Records that the EndpointSlices of these Services changed after the last build, and the
    /// model's endpoints of their clusters were not updated.
    pub fn endpoints_changed<'k>(&mut self, services: impl IntoIterator<Item = &'k ObjKey>) {
        self.stale_endpoints.extend(services.into_iter().cloned());
    }

    /// This index, moved out; what is left in its place has the same options and no index (its
    /// next build is a full one).
    pub fn take(&mut self) -> Incremental {
        let empty = Incremental::new(self.options.clone());
        std::mem::replace(self, empty)
    }

    /// Builds the model of every routing object of `snapshot` and indexes it.
    pub fn build_full(&mut self, snapshot: &Snapshot) -> Dag {
        let dag = super::build(snapshot, &self.options);
        self.index(snapshot, &dag);
        dag
    }

    /// Indexes `dag`, a model of every routing object of `snapshot` ([`super::build`]), for the
    /// partial builds after it. [`Incremental::build_model`] leaves the index of a full build to
    /// its caller (through this), who can publish the model first: nothing but the next change
    /// needs the index.
    pub fn index(&mut self, snapshot: &Snapshot, dag: &Dag) {
        let objects = snapshot.routing_objects();
        self.links.clear();
        self.links.reserve(objects);
        // About two links per object (its name or hosts, and a delegation or a host).
        self.holders.clear();
        self.holders.reserve(objects * 2);
        let controller = &self.options.gateway_controller_name;
        each_routing_object(snapshot, controller, |obj, links| {
            for l in &links {
                // Most links have one holder: room for one, grown only for the others.
                (self.holders.entry(l.clone()))
                    .or_insert_with(|| Vec::with_capacity(1))
                    .push(obj.clone());
            }
            self.links.insert(obj, links);
        });
        for h in self.holders.values_mut() {
            if h.len() != h.capacity() {
                *h = super::exact_vec(std::mem::take(h));
            }
        }
        self.cluster_users.clear();
        self.cluster_users.reserve(dag.clusters.len());
        self.secret_users.clear();
        self.secret_users.reserve(dag.secrets.len());
        for v in dag.vhosts.values() {
            self.count_users(v, 1, &mut Vec::new());
        }
        for l in dag.tcp_listeners.values() {
            self.count_clusters(&l.clusters, 1, &mut Vec::new());
        }
        for e in dag.entries.values() {
            self.count_entry(e, 1, &mut Vec::new());
        }
        self.ca_users.clear();
        // Clusters are looked at only when the model verifies some backend or presents a
        // client certificate to one (few do).
        if dag
            .secrets
            .values()
            .any(|s| s.kind != SecretKind::Certificate)
        {
            for c in dag.clusters.values() {
                for id in cluster_secrets(c) {
                    count(&mut self.ca_users, &id.to_string(), 1);
                }
            }
        }
        self.stale_endpoints.clear();
        self.ready = true;
    }

    /// The model of `next`, built from `prev` (the model this index last built, from
    /// `prev_snapshot`) where that is possible, else in full.
    pub fn build(&mut self, prev: Option<(&Snapshot, &Dag)>, next: &Snapshot) -> (Dag, BuildKind) {
        let (dag, kind) = self.build_model(prev, next);
        if kind == BuildKind::Full {
            self.index(next, &dag);
        }
        (dag, kind)
    }

    /// [`Incremental::build`], except that a full build is not indexed: the caller calls
    /// [`Incremental::index`] with it, when the model is published, before the next build (until
    /// then every build is a full one).
    pub fn build_model(
        &mut self,
        prev: Option<(&Snapshot, &Dag)>,
        next: &Snapshot,
    ) -> (Dag, BuildKind) {
        if let Some((prev_snapshot, prev_dag)) = prev
            && self.ready
            && let Some(changed) = self.changed_objects(prev_snapshot, next)
        {
            self.ready = false;
            if let Some((dag, objects)) = self.build_part(prev_snapshot, prev_dag, next, changed) {
                self.ready = true;
                return (dag, BuildKind::Partial { objects });
            }
        }
        self.ready = false;
        (super::build(next, &self.options), BuildKind::Full)
    }

    /// The routing objects that changed, or None when the change needs a full build. Notes the
    /// Services whose EndpointSlices changed.
    fn changed_objects(&mut self, prev: &Snapshot, next: &Snapshot) -> Option<Vec<ObjectRef>> {
        use crate::store::same_objects;
        if !same_objects(&prev.ingress_classes, &next.ingress_classes) {
            return None;
        }
        // A Service or TLS Secret that changed rebuilds the routing objects of its namespace that
        // name it, and through their links what they share hosts and delegations with.
        let mut named: BTreeMap<Arc<str>, Names> = BTreeMap::new();
        diff_keys(prev.services(), next.services(), |k| {
            let names = named.entry(k.namespace.clone()).or_default();
            names.services.insert(k.name.clone());
        });
        diff_keys(&prev.secrets, &next.secrets, |k| {
            let names = named.entry(k.namespace.clone()).or_default();
            names.secrets.insert(k.name.clone());
        });
        let mut services = BTreeSet::new();
        crate::store::each_change(
            prev.endpoint_slices(),
            next.endpoint_slices(),
            |key, a, b| {
                for slice in [a, b].into_iter().flatten() {
                    if let Some(svc) = &slice.service {
                        services.insert(ObjKey::new(key.namespace.clone(), &**svc));
                    }
                }
            },
        );
        let mut changed = Vec::new();
        fn note(changed: &mut Vec<ObjectRef>, kind: Kind) -> impl FnMut(&ObjKey) + '_ {
            move |key: &ObjKey| {
                changed.push(ObjectRef {
                    kind,
                    key: key.clone(),
                })
            }
        }
        let c = &mut changed;
        diff_keys(&prev.ingresses, &next.ingresses, note(c, Kind::Ingress));
        diff_keys(
            &prev.ingressroutes_v1beta1,
            &next.ingressroutes_v1beta1,
            note(c, Kind::IngressRouteV1beta1),
        );
        diff_keys(
            &prev.ingressroutes_v1,
            &next.ingressroutes_v1,
            note(c, Kind::IngressRouteV1),
        );
        diff_keys(
            &prev.routes_v1alpha1,
            &next.routes_v1alpha1,
            note(c, Kind::RouteV1alpha1),
        );
        // The Gateway API objects, built together: when one of them changed, or names a Service
        // or TLS Secret that did.
        let gateway_objects = gateway_part::objects(prev).max(gateway_part::objects(next));
        if gateway_objects > 0
            && (gateway_part::changed(prev, next)
                || (!named.is_empty() && gateway_part::names_any(next, &named)))
        {
            changed.push(gateway_part::gateway_api());
        }
        let routing_changes = changed.len();
        for (ns, names) in &named {
            objects_naming(next, ns, names, &mut changed);
        }
        if changed.len() > routing_changes {
            // Readers of what changed, which may have changed themselves.
            changed.sort_unstable();
            changed.dedup();
        }
        let total = next.routing_objects().max(prev.routing_objects()) + gateway_objects;
        if changed.len() as f64 > total as f64 * MAX_CHANGED_FRACTION {
            return None;
        }
        self.stale_endpoints.extend(services);
        Some(changed)
    }

    /// Rebuilds the part of the model `changed` can affect. None when it cannot tell (the caller
    /// builds in full).
    fn build_part(
        &mut self,
        prev_snapshot: &Snapshot,
        prev: &Dag,
        next: &Snapshot,
        changed: Vec<ObjectRef>,
    ) -> Option<(Dag, usize)> {
        let queue = self.relink(next, &changed);
        let (objects, seen) = self.connected(changed, queue);
        let hosts: HashSet<&str> = seen
            .iter()
            .filter_map(|l| match l {
                Link::Host(h) => Some(&**h),
                Link::IngressRoute(_) => None,
            })
            .collect();
        let part = self.build_of(next, &objects);
        if part.vhosts.keys().any(|h| !hosts.contains(h.as_str())) {
            tracing::warn!(
                "an incremental build produced a host outside its part; building in full"
            );
            return None;
        }
        // The previous model with that part replaced.
        let mut dag = prev.clone();
        let mut unused = Vec::new();
        self.splice_vhosts(&mut dag, &part, &hosts, &mut unused);
        for obj in &objects {
            if !part.statuses.contains_key(obj) {
                dag.statuses.remove(obj);
            }
        }
        let gateway_api = objects.contains(&gateway_part::gateway_api());
        if gateway_api {
            self.splice_gateway_api(&mut dag, &part, prev_snapshot, &mut unused);
        }
        self.splice_rest(&mut dag, part, unused);
        if !self.refresh_endpoints(&mut dag, next) {
            return None;
        }
        // The Gateway API objects rebuilt, counted one by one.
        let rebuilt = match gateway_api {
            true => objects.len() - 1 + gateway_part::objects(next),
            false => objects.len(),
        };
        Some((dag, rebuilt))
    }

    /// Re-links the changed objects: drops their old links from the index and records their new
    /// ones. Returns both, the starting points of the walk to everything connected to them.
    fn relink(&mut self, next: &Snapshot, changed: &[ObjectRef]) -> VecDeque<Link> {
        let mut queue: VecDeque<Link> = VecDeque::new();
        for obj in changed {
            if let Some(old) = self.links.remove(obj) {
                for l in &old {
                    if let Some(h) = self.holders.get_mut(l) {
                        h.retain(|o| o != obj);
                        if h.is_empty() {
                            self.holders.remove(l);
                        } else {
                            *h = super::exact_vec(std::mem::take(h));
                        }
                    }
                }
                queue.extend(old);
            }
            if let Some(new) = object_links(next, obj, &self.options.gateway_controller_name) {
                for l in &new {
                    let holders = self.holders.entry(l.clone()).or_default();
                    // Kept at exact size, as `build_full` leaves them: these live as long as the
                    // object does, and most links have one or two holders.
                    holders.reserve_exact(1);
                    holders.push(obj.clone());
                }
                queue.extend(new.iter().cloned());
                self.links.insert(obj.clone(), super::exact_vec(new));
            }
        }
        queue
    }

    /// The objects connected to the changed ones through `queue`'s links, the changed ones
    /// included, and every link the walk crossed.
    fn connected(
        &self,
        changed: Vec<ObjectRef>,
        mut queue: VecDeque<Link>,
    ) -> (HashSet<ObjectRef>, HashSet<Link>) {
        let mut objects: HashSet<ObjectRef> = changed.into_iter().collect();
        let mut seen: HashSet<Link> = HashSet::new();
        while let Some(link) = queue.pop_front() {
            if seen.contains(&link) {
                continue;
            }
            for o in self.holders.get(&link).into_iter().flatten() {
                if !objects.contains(o) {
                    objects.insert(o.clone());
                    queue.extend(self.links.get(o).into_iter().flatten().cloned());
                }
            }
            seen.insert(link);
        }
        (objects, seen)
    }

    /// The model of `objects` alone, with Services, EndpointSlices and Secrets from the whole
    /// snapshot.
    fn build_of(&self, next: &Snapshot, objects: &HashSet<ObjectRef>) -> Dag {
        let mut part_snapshot = Snapshot::default();
        for obj in objects {
            copy_object(next, &mut part_snapshot, obj);
        }
        let mut b = Builder::partial(&part_snapshot, next, &self.options);
        super::run(&mut b);
        b.finish()
    }

    /// Replaces the part's hosts in `dag`. An entry the part rebuilt equal to the one held is
    /// left alone: an edit of a persistent map copies the path to the entry (cloning the keys of
    /// its nodes), and an untouched entry keeps the tree nodes shared with the previous model,
    /// which the encoder's diff then steps over.
    fn splice_vhosts(
        &mut self,
        dag: &mut Dag,
        part: &Dag,
        hosts: &HashSet<&str>,
        unused: &mut Vec<(String, bool)>,
    ) {
        for h in hosts {
            let rebuilt = part.vhosts.get(*h);
            if rebuilt.is_some() && dag.vhosts.get(*h) == rebuilt {
                continue;
            }
            if let Some(old) = dag.vhosts.remove(*h) {
                self.count_users(&old, -1, unused);
            }
            if let Some(v) = rebuilt {
                self.count_users(v, 1, unused);
                dag.vhosts.insert((*h).to_string(), v.clone());
            }
        }
    }

    /// Replaces what only the Gateway API objects make: the TCP listeners, the ports of
    /// Gateways' own addresses, and the statuses of Gateway API objects gone since `prev`.
    fn splice_gateway_api(
        &mut self,
        dag: &mut Dag,
        part: &Dag,
        prev: &Snapshot,
        unused: &mut Vec<(String, bool)>,
    ) {
        if dag.tcp_listeners != part.tcp_listeners {
            for l in dag.tcp_listeners.values() {
                self.count_clusters(&l.clusters, -1, unused);
            }
            for l in part.tcp_listeners.values() {
                self.count_clusters(&l.clusters, 1, unused);
            }
            dag.tcp_listeners = part.tcp_listeners.clone();
        }
        if dag.entries != part.entries {
            for e in dag.entries.values() {
                self.count_entry(e, -1, unused);
            }
            for e in part.entries.values() {
                self.count_entry(e, 1, unused);
            }
            dag.entries = part.entries.clone();
        }
        gateway_part::each_object(prev, |obj| {
            if !part.statuses.contains_key(&obj) {
                dag.statuses.remove(&obj);
            }
        });
    }

    /// Takes the part's statuses, clusters and secrets into `dag`, and removes the clusters and
    /// secrets left without a user (`unused`; with a cluster, the CA secrets only it used).
    fn splice_rest(&mut self, dag: &mut Dag, part: Dag, unused: Vec<(String, bool)>) {
        for (obj, s) in part.statuses {
            if dag.statuses.get(&obj) != Some(&s) {
                dag.statuses.insert(obj, s);
            }
        }
        for (name, secret) in unused {
            if secret {
                if !self.secret_users.contains_key(&name) {
                    dag.secrets.remove(&name);
                }
            } else if !self.cluster_users.contains_key(name.as_str())
                && let Some(gone) = dag.clusters.remove(name.as_str())
            {
                for id in cluster_secrets(&gone) {
                    if count(&mut self.ca_users, &id.to_string(), -1) {
                        // The last cluster using it: the part's secrets bring it back when a
                        // cluster of the part still does.
                        dag.secrets.remove(id);
                    }
                }
            }
        }
        for (name, c) in part.clusters {
            if dag.clusters.get(&name) != Some(&c) && dag.clusters.insert(name, c.clone()).is_none()
            {
                for id in cluster_secrets(&c) {
                    count(&mut self.ca_users, &id.to_string(), 1);
                }
            }
        }
        for (name, s) in part.secrets {
            if dag.secrets.get(&name) != Some(&s) {
                dag.secrets.insert(name, s);
            }
        }
    }

    /// Recomputes the endpoints of the clusters of Services whose EndpointSlices changed since
    /// the model was built. False when a cluster's Service or port is gone.
    fn refresh_endpoints(&mut self, dag: &mut Dag, next: &Snapshot) -> bool {
        if self.stale_endpoints.is_empty() {
            return true;
        }
        let stale: Vec<(ClusterName, Arc<Cluster>)> = self
            .stale_endpoints
            .iter()
            .flat_map(|s| super::clusters_of_service(&dag.clusters, s))
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        for (name, c) in stale {
            let Some(endpoints) = super::cluster_endpoints(next, &c) else {
                return false;
            };
            if endpoints != c.endpoints {
                let fresh = Cluster {
                    endpoints,
                    ..(*c).clone()
                };
                dag.clusters.insert(name, Arc::new(fresh));
            }
        }
        self.stale_endpoints.clear();
        true
    }

    /// [`Incremental::count_users`] of a TCP listener's clusters.
    fn count_clusters(&mut self, clusters: &Clusters, by: i32, unused: &mut Vec<(String, bool)>) {
        for c in clusters {
            if count(&mut self.cluster_users, &c.cluster, by) {
                unused.push((c.cluster.to_string(), false));
            }
        }
    }

    /// [`Incremental::count_users`] of a port of a Gateway's address: its hosts, its TCP
    /// backends and its default certificate.
    fn count_entry(&mut self, e: &Entry, by: i32, unused: &mut Vec<(String, bool)>) {
        for v in e.vhosts.values() {
            self.count_users(v, by, unused);
        }
        if let Some((clusters, _)) = &e.tcp {
            self.count_clusters(clusters, by, unused);
        }
        let secrets =
            (e.default_secret.iter()).chain(e.client_validation.iter().map(|v| &v.ca_secret));
        for secret in secrets {
            if count(&mut self.secret_users, secret, by) {
                unused.push((secret.clone(), true));
            }
        }
    }

    /// Adds (`by` = 1) or removes (-1) a virtual host's uses of its clusters and secret; pushes
    /// the names left without a user to `unused` (true for a secret). A cluster is counted once
    /// per use (a host's routes can share it): a host is removed as it was added, so a name has
    /// no user left exactly when no host uses it.
    fn count_users(&mut self, v: &VirtualHost, by: i32, unused: &mut Vec<(String, bool)>) {
        for c in vhost_clusters(v) {
            if count(&mut self.cluster_users, c, by) {
                unused.push((c.to_string(), false));
            }
        }
        if let Some(tls) = &v.tls
            && count(&mut self.secret_users, &tls.secret, by)
        {
            unused.push((tls.secret.clone(), true));
        }
    }
}

/// Counts one more or one less user of a name; true when it has none left. A name is copied
/// only when its first user comes (a cluster's name is shared, not copied).
fn count<K: Clone + Eq + std::hash::Hash>(users: &mut HashMap<K, u32>, name: &K, by: i32) -> bool {
    if by > 0 {
        match users.get_mut(name) {
            Some(n) => *n += 1,
            None => _ = users.insert(name.clone(), 1),
        }
        return false;
    }
    let Some(n) = users.get_mut(name) else {
        return false;
    };
    *n -= 1;
    if *n == 0 {
        users.remove(name);
        return true;
    }
    false
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
pub(crate) mod tests;
