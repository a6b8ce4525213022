//! The webhook's read-only view of the cluster: just enough to answer the cross-object questions
//! whose answer does not depend on apply order, in O(1) per request.
//!
//! Whoever owns the snapshot (the kube watches in cluster mode, the manifest directory in standalone
//! mode) calls [`IndexHandle::replace`] after every change; requests read the current [`Index`]
//! through an `Arc` and never wait for a rebuild, never call the API server, never read a file.
//! A replacement follows the roots that changed since the previous snapshot (the snapshots'
//! persistent maps are compared where they differ), so a change costs what it touches.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use sluice_core::pmap::OrdMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use sluice_core::api::{Kind, ObjKey, ObjectRef};
use sluice_core::dag::Options;
use sluice_core::store::Snapshot;
use sluice_core::validate::ingress::is_default_class;
use sluice_core::validate::{ingressroute, route};

/// The root that owns a virtual host, and when it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostOwner {
    pub owner: ObjectRef,
    pub created: Option<Time>,
}

/// What the webhook knows about the cluster, as of one snapshot. The maps are persistent
/// ([`OrdMap`]): the index of the next snapshot is derived from this one by the roots that changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Index {
    /// Lowercased fqdn → every root claiming it, oldest first (by creationTimestamp, then
    /// namespace, name, kind), among the roots that live in a root namespace and pass their
    /// single-object rules — the claimants `dag::build` considers, so the webhook names the owner
    /// the status names. The first claimant owns the host. Nearly every host has one claimant, so
    /// the claimants are a sorted `Vec` of exact capacity (a `BTreeSet` allocates a node of eleven
    /// slots for one: ~0.9 KB per host, 9 MB at 10k hosts).
    claims: OrdMap<String, Vec<Claim>>,
    /// Names of the IngressClasses marked default, sorted.
    default_classes: Vec<String>,
    /// Names of every IngressClass, sorted.
    ingress_classes: Vec<String>,
    /// GatewayClass name → controllerName.
    gateway_class_controllers: OrdMap<String, String>,
    /// Gateway namespace/name → gatewayClassName.
    gateway_classes: OrdMap<ObjKey, String>,
    /// Number of objects in the snapshot the index was built from.
    objects: usize,
}

type Claim = (bool, Option<Time>, ObjKey, Kind);

fn claim_order(meta: &ObjectMeta, key: &ObjKey, kind: Kind) -> Claim {
    // Objects without a creationTimestamp (files given to the CLI) count as newest, as in dag::build.
    let created = meta.creation_timestamp.clone();
    (created.is_none(), created, key.clone(), kind)
}

impl Index {
    /// Builds the index from one snapshot; linear in the number of objects.
    pub fn build(snapshot: &Snapshot, options: &Options) -> Index {
        let mut index = Index::default();
        for (key, ir) in &snapshot.ingressroutes_v1beta1 {
            index.claim(claim_v1beta1(key, ir, options));
        }
        for (key, ir) in &snapshot.ingressroutes_v1 {
            index.claim(claim_v1(key, ir, options));
        }
        for (key, r) in &snapshot.routes_v1alpha1 {
            index.claim(claim_route(key, r, options));
        }
        index.set_small_parts(snapshot);
        index
    }

    /// The index of `next`, from this index of `prev`: the roots that changed between the two
    /// give up their old claims and make their new ones.
    pub fn update(&self, prev: &Snapshot, next: &Snapshot, options: &Options) -> Index {
        let mut index = self.clone();
        sluice_core::store::each_change(
            &prev.ingressroutes_v1beta1,
            &next.ingressroutes_v1beta1,
            |key, old, new| {
                index.unclaim(old.and_then(|o| claim_v1beta1(key, o, options)));
                index.claim(new.and_then(|o| claim_v1beta1(key, o, options)));
            },
        );
        sluice_core::store::each_change(
            &prev.ingressroutes_v1,
            &next.ingressroutes_v1,
            |key, old, new| {
                index.unclaim(old.and_then(|o| claim_v1(key, o, options)));
                index.claim(new.and_then(|o| claim_v1(key, o, options)));
            },
        );
        sluice_core::store::each_change(
            &prev.routes_v1alpha1,
            &next.routes_v1alpha1,
            |key, old, new| {
                index.unclaim(old.and_then(|o| claim_route(key, o, options)));
                index.claim(new.and_then(|o| claim_route(key, o, options)));
            },
        );
        index.set_small_parts(next);
        index
    }

    fn claim(&mut self, claim: Option<(String, Claim)>) {
        let Some((host, claim)) = claim else {
            return;
        };
        let mut claims = self.claims.get(&host).cloned().unwrap_or_default();
        if let Err(at) = claims.binary_search(&claim) {
            claims.insert(at, claim);
        }
        self.settle(host, claims);
    }

    fn unclaim(&mut self, claim: Option<(String, Claim)>) {
        let Some((host, claim)) = claim else {
            return;
        };
        let Some(mut claims) = self.claims.get(&host).cloned() else {
            return;
        };
        if let Ok(at) = claims.binary_search(&claim) {
            claims.remove(at);
        }
        self.settle(host, claims);
    }

    /// Records a host's claimants, sorted; the first owns the host.
    fn settle(&mut self, host: String, mut claims: Vec<Claim>) {
        if claims.is_empty() {
            self.claims.remove(&host);
        } else {
            claims.shrink_to_fit();
            self.claims.insert(host, claims);
        }
    }

    /// Everything but the hosts: IngressClasses, GatewayClasses and Gateways (few objects).
    fn set_small_parts(&mut self, snapshot: &Snapshot) {
        let mut default_classes: Vec<String> = snapshot
            .ingress_classes
            .iter()
            .filter(|(_, c)| is_default_class(c))
            .map(|(k, _)| k.name.to_string())
            .collect();
        default_classes.sort();
        let mut ingress_classes: Vec<String> = (snapshot.ingress_classes.keys())
            .map(|k| k.name.to_string())
            .collect();
        ingress_classes.sort();

        let gateway_class_controllers = snapshot
            .gateway_classes
            .iter()
            .map(|(k, c)| (k.name.to_string(), c.spec.controller_name.clone()))
            .collect();
        let gateway_classes = snapshot
            .gateways
            .iter()
            .map(|(k, g)| (k.clone(), g.spec.gateway_class_name.clone()))
            .collect();

        self.default_classes = default_classes;
        self.ingress_classes = ingress_classes;
        self.gateway_class_controllers = gateway_class_controllers;
        self.gateway_classes = gateway_classes;
        self.objects = snapshot.len();
    }

    /// The root owning a host (case-insensitive), if any.
    pub fn host_owner(&self, host: &str) -> Option<HostOwner> {
        let claims = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            self.claims.get(&host.to_ascii_lowercase())
        } else {
            self.claims.get(host)
        };
        claims.and_then(|c| c.first()).map(owner_of)
    }

    /// Names of the IngressClasses marked default, sorted.
    pub fn default_ingress_classes(&self) -> &[String] {
        &self.default_classes
    }

    /// Whether an IngressClass of this name exists.
    pub fn has_ingress_class(&self, name: &str) -> bool {
        (self.ingress_classes)
            .binary_search_by(|c| c.as_str().cmp(name))
            .is_ok()
    }

    /// The controllerName of a GatewayClass, when the class is known.
    pub fn gateway_class_controller(&self, class: &str) -> Option<&str> {
        self.gateway_class_controllers
            .get(class)
            .map(String::as_str)
    }

    /// The gatewayClassName of a Gateway, when the Gateway is known.
    pub fn gateway_class_of(&self, gateway: &ObjKey) -> Option<&str> {
        self.gateway_classes.get(gateway).map(String::as_str)
    }

    /// Number of objects in the snapshot this index was built from.
    pub fn len(&self) -> usize {
        self.objects
    }

    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// Hosts owned by some root, sorted (for tests and debugging).
    pub fn owned_hosts(&self) -> BTreeMap<&str, ObjectRef> {
        self.claims
            .iter()
            .filter_map(|(h, c)| Some((h.as_str(), owner_of(c.first()?).owner)))
            .collect()
    }
}

fn owner_of((_, created, key, kind): &Claim) -> HostOwner {
    HostOwner {
        owner: ObjectRef {
            kind: *kind,
            key: key.clone(),
        },
        created: created.clone(),
    }
}

fn claim_v1beta1(
    key: &ObjKey,
    ir: &sluice_core::api::heptio_v1beta1::IngressRoute,
    options: &Options,
) -> Option<(String, Claim)> {
    let vh = ir.spec.virtualhost.as_ref()?;
    if !ingressroute::validate_v1beta1(ir).allowed() {
        return None;
    }
    root_claim(
        &vh.fqdn,
        &ir.metadata,
        key,
        Kind::IngressRouteV1beta1,
        options,
    )
}

fn claim_v1(
    key: &ObjKey,
    ir: &sluice_core::api::contour_v1::IngressRoute,
    options: &Options,
) -> Option<(String, Claim)> {
    let vh = ir.spec.virtualhost.as_ref()?;
    if !ingressroute::validate_v1(ir).allowed() {
        return None;
    }
    root_claim(&vh.fqdn, &ir.metadata, key, Kind::IngressRouteV1, options)
}

fn claim_route(
    key: &ObjKey,
    r: &sluice_core::api::route_v1alpha1::Route,
    options: &Options,
) -> Option<(String, Claim)> {
    if !route::validate_route(r).allowed() {
        return None;
    }
    root_claim(&r.spec.host, &r.metadata, key, Kind::RouteV1alpha1, options)
}

/// A root's claim on its host, when it lives in a root namespace and names a host.
fn root_claim(
    host: &str,
    meta: &ObjectMeta,
    key: &ObjKey,
    kind: Kind,
    options: &Options,
) -> Option<(String, Claim)> {
    if !options.root_allowed_in(&key.namespace) || host.is_empty() {
        return None;
    }
    Some((host.to_ascii_lowercase(), claim_order(meta, key, kind)))
}

/// A shared, swappable [`Index`]: cheap to clone, read without blocking writers for long (the write
/// lock is only held to swap one `Arc`; the new index is built before taking it).
#[derive(Clone, Debug)]
pub struct IndexHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    current: RwLock<Arc<Index>>,
    options: Options,
    ready: AtomicBool,
    /// The snapshot the current index was built from by [`IndexHandle::replace`].
    last: Mutex<Option<Snapshot>>,
}

impl IndexHandle {
    /// An empty index, not ready until the first [`IndexHandle::replace`] or [`IndexHandle::set`].
    pub fn new(options: Options) -> IndexHandle {
        IndexHandle {
            inner: Arc::new(Inner {
                current: RwLock::new(Arc::new(Index::default())),
                options,
                ready: AtomicBool::new(false),
                last: Mutex::new(None),
            }),
        }
    }

    /// A ready handle over an index built from a snapshot.
    pub fn from_snapshot(snapshot: &Snapshot, options: Options) -> IndexHandle {
        let h = IndexHandle::new(options);
        h.replace(snapshot);
        h
    }

    /// Brings the index to a new snapshot and swaps it in. Requests in flight keep the old one.
    /// Only the roots that changed since the previous snapshot are looked at.
    pub fn replace(&self, snapshot: &Snapshot) {
        let mut last = self.inner.last.lock().unwrap_or_else(|p| p.into_inner());
        let index = match last.as_ref() {
            Some(prev) => self.load().update(prev, snapshot, &self.inner.options),
            None => Index::build(snapshot, &self.inner.options),
        };
        *last = Some(snapshot.clone());
        self.swap(index);
    }

    /// Swaps in a prebuilt index (the next [`IndexHandle::replace`] builds from scratch).
    pub fn set(&self, index: Index) {
        *self.inner.last.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.swap(index);
    }

    fn swap(&self, index: Index) {
        let index = Arc::new(index);
        // The previous index is dropped after the lock is released, so readers never wait on it.
        let previous = match self.inner.current.write() {
            Ok(mut guard) => std::mem::replace(&mut *guard, index),
            Err(poisoned) => std::mem::replace(&mut *poisoned.into_inner(), index),
        };
        self.inner.ready.store(true, Ordering::Release);
        drop(previous);
    }

    /// The current index.
    pub fn load(&self) -> Arc<Index> {
        match self.inner.current.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Whether an index has been loaded at least once (`/readyz`).
    pub fn is_ready(&self) -> bool {
        self.inner.ready.load(Ordering::Acquire)
    }

    /// The options the index is built with (root namespaces).
    pub fn options(&self) -> &Options {
        &self.inner.options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_snapshot(yaml: &str) -> Snapshot {
        Snapshot::from_test_yaml(yaml)
    }

    const ROOTS: &str = r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: young, namespace: b, creationTimestamp: "2024-02-01T00:00:00Z"}
spec: {virtualhost: {fqdn: Shop.Example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: old, namespace: a, creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {virtualhost: {fqdn: shop.example.com}, routes: [{backends: [{http: s, port: 80}]}]}
---
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {name: r, namespace: c}
spec: {host: blog.example.com, routes: [{pathPrefix: /, upstreams: [{serviceName: s, servicePort: 80}]}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: vertex, namespace: a}
spec: {routes: [{match: /, services: [{name: s, port: 80}]}]}
"#;

    #[test]
    fn oldest_root_owns_the_host_case_insensitively() {
        let idx = Index::build(&mk_snapshot(ROOTS), &Options::default());
        let owner = idx.host_owner("SHOP.example.com").unwrap();
        assert_eq!(owner.owner.to_string(), "IngressRoute a/old");
        assert_eq!(owner.owner.kind, Kind::IngressRouteV1);
        assert_eq!(
            idx.host_owner("blog.example.com")
                .unwrap()
                .owner
                .to_string(),
            "Route c/r"
        );
        assert_eq!(idx.owned_hosts().len(), 2);
        assert_eq!(idx.len(), 4);
    }

    #[test]
    fn roots_outside_root_namespaces_own_nothing() {
        let options = Options {
            root_namespaces: vec!["b".into()],
            ..Options::default()
        };
        let idx = Index::build(&mk_snapshot(ROOTS), &options);
        assert_eq!(
            idx.host_owner("shop.example.com")
                .unwrap()
                .owner
                .to_string(),
            "IngressRoute b/young"
        );
        assert!(idx.host_owner("blog.example.com").is_none());
    }

    #[test]
    fn invalid_roots_own_nothing() {
        let yaml = r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: broken, namespace: a, creationTimestamp: "2020-01-01T00:00:00Z"}
spec: {virtualhost: {fqdn: shop.example.com}, routes: [{match: finance, services: [{name: s, port: 80}]}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: fine, namespace: b, creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {virtualhost: {fqdn: shop.example.com}, routes: [{match: /, services: [{name: s, port: 80}]}]}
"#;
        let idx = Index::build(&mk_snapshot(yaml), &Options::default());
        assert_eq!(
            idx.host_owner("shop.example.com")
                .unwrap()
                .owner
                .to_string(),
            "IngressRoute b/fine"
        );
    }

    #[test]
    fn default_ingress_classes_are_listed_sorted() {
        let yaml = r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: zeta, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}
spec: {controller: example.com/z}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: alpha, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}
spec: {controller: example.com/a}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: off, annotations: {ingressclass.kubernetes.io/is-default-class: "false"}}
spec: {controller: example.com/o}
"#;
        let idx = Index::build(&mk_snapshot(yaml), &Options::default());
        assert_eq!(idx.default_ingress_classes(), ["alpha", "zeta"]);
    }

    #[test]
    fn handle_swaps_and_reports_readiness() {
        let h = IndexHandle::new(Options::default());
        assert!(!h.is_ready());
        let before = h.load();
        h.replace(&mk_snapshot(ROOTS));
        assert!(h.is_ready());
        assert!(before.host_owner("shop.example.com").is_none());
        assert!(h.load().host_owner("shop.example.com").is_some());
    }

    /// Every replacement follows the changed roots to the index a build from scratch gives.
    #[test]
    fn replacing_follows_changes_as_a_build_from_scratch_would() {
        use sluice_core::synth::pool::{is_routing, pool};
        use sluice_core::test_rng::Rng;
        let pool = pool();
        let routing: Vec<_> = pool.iter().filter(|o| is_routing(o)).collect();
        for options in [
            Options::default(),
            Options {
                root_namespaces: vec!["prod".into(), "default".into()],
                ..Options::default()
            },
        ] {
            let mut rng = Rng(0x1dea_5eed);
            let mut store = Snapshot::from_objects(
                pool.iter()
                    .filter(|o| !is_routing(o) || rng.below(2) == 0)
                    .cloned(),
            );
            let handle = IndexHandle::from_snapshot(&store, options.clone());
            for step in 0..400 {
                for _ in 0..=rng.below(3) {
                    let o = routing[rng.below(routing.len())];
                    if rng.below(3) == 0 {
                        store.remove(o.kind(), &o.key());
                    } else {
                        store.insert(o.clone());
                    }
                }
                handle.replace(&store);
                assert_eq!(
                    *handle.load(),
                    Index::build(&store, &options),
                    "step {step}"
                );
            }
            assert!(!handle.load().owned_hosts().is_empty());
        }
    }
}
