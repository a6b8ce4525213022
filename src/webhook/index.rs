//! The webhook's read-only view of the cluster: just enough to answer the cross-object questions
//! whose answer does not depend on apply order, in O(1) per request.
//!
//! Whoever owns the snapshot (the kube watches in cluster mode, the manifest directory in standalone
//! mode) calls [`IndexHandle::replace`] after every change; requests read the current [`Index`]
//! through an `Arc` and never wait for a rebuild, never call the API server, never read a file.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::api::{Kind, ObjKey, ObjectRef};
use crate::dag::Options;
use crate::store::Snapshot;
use crate::validate::ingress::is_default_class;
use crate::validate::{ingressroute, route};

/// The root that owns a virtual host, and when it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostOwner {
    pub owner: ObjectRef,
    pub created: Option<Time>,
}

/// What the webhook knows about the cluster, built once per snapshot.
#[derive(Clone, Debug, Default)]
pub struct Index {
    /// Lowercased fqdn → the root owning it (oldest by creationTimestamp, then namespace, name, kind),
    /// among the roots that live in a root namespace and pass their single-object rules — the
    /// claimants `dag::build` considers, so the webhook names the owner the status names.
    hosts: HashMap<String, HostOwner>,
    /// Names of the IngressClasses marked default, sorted.
    default_classes: Vec<String>,
    /// GatewayClass name → controllerName.
    gateway_class_controllers: HashMap<String, String>,
    /// Gateway namespace/name → gatewayClassName.
    gateway_classes: HashMap<ObjKey, String>,
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
        let mut claims: HashMap<String, Claim> = HashMap::new();
        let mut claim = |host: &str, meta: &ObjectMeta, key: &ObjKey, kind: Kind| {
            if !options.root_allowed_in(&key.namespace) || host.is_empty() {
                return;
            }
            let candidate = claim_order(meta, key, kind);
            let host = host.to_ascii_lowercase();
            match claims.get(&host) {
                Some(current) if *current <= candidate => {}
                _ => {
                    claims.insert(host, candidate);
                }
            }
        };
        for (key, ir) in &snapshot.ingressroutes_v1beta1 {
            if let Some(vh) = &ir.spec.virtualhost
                && ingressroute::validate_v1beta1(ir).allowed()
            {
                claim(&vh.fqdn, &ir.metadata, key, Kind::IngressRouteV1beta1);
            }
        }
        for (key, ir) in &snapshot.ingressroutes_v1 {
            if let Some(vh) = &ir.spec.virtualhost
                && ingressroute::validate_v1(ir).allowed()
            {
                claim(&vh.fqdn, &ir.metadata, key, Kind::IngressRouteV1);
            }
        }
        for (key, r) in &snapshot.routes_v1alpha1 {
            if route::validate_route(r).allowed() {
                claim(&r.spec.host, &r.metadata, key, Kind::RouteV1alpha1);
            }
        }
        let hosts = claims
            .into_iter()
            .map(|(host, (_, created, key, kind))| {
                let owner = ObjectRef { kind, key };
                (host, HostOwner { owner, created })
            })
            .collect();

        let mut default_classes: Vec<String> = snapshot
            .ingress_classes
            .iter()
            .filter(|(_, c)| is_default_class(c))
            .map(|(k, _)| k.name.clone())
            .collect();
        default_classes.sort();

        let gateway_class_controllers = snapshot
            .gateway_classes
            .iter()
            .map(|(k, c)| (k.name.clone(), c.spec.controller_name.clone()))
            .collect();
        let gateway_classes = snapshot
            .gateways
            .iter()
            .map(|(k, g)| (k.clone(), g.spec.gateway_class_name.clone()))
            .collect();

        Index {
            hosts,
            default_classes,
            gateway_class_controllers,
            gateway_classes,
            objects: snapshot.len(),
        }
    }

    /// The root owning a host (case-insensitive), if any.
    pub fn host_owner(&self, host: &str) -> Option<&HostOwner> {
        if host.bytes().any(|b| b.is_ascii_uppercase()) {
            self.hosts.get(&host.to_ascii_lowercase())
        } else {
            self.hosts.get(host)
        }
    }

    /// Names of the IngressClasses marked default, sorted.
    pub fn default_ingress_classes(&self) -> &[String] {
        &self.default_classes
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
    pub fn owned_hosts(&self) -> BTreeMap<&str, &ObjectRef> {
        self.hosts
            .iter()
            .map(|(h, o)| (h.as_str(), &o.owner))
            .collect()
    }
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
}

impl IndexHandle {
    /// An empty index, not ready until the first [`IndexHandle::replace`] or [`IndexHandle::set`].
    pub fn new(options: Options) -> IndexHandle {
        IndexHandle {
            inner: Arc::new(Inner {
                current: RwLock::new(Arc::new(Index::default())),
                options,
                ready: AtomicBool::new(false),
            }),
        }
    }

    /// A ready handle over an index built from a snapshot.
    pub fn from_snapshot(snapshot: &Snapshot, options: Options) -> IndexHandle {
        let h = IndexHandle::new(options);
        h.replace(snapshot);
        h
    }

    /// Rebuilds the index from a new snapshot and swaps it in. Requests in flight keep the old one.
    pub fn replace(&self, snapshot: &Snapshot) {
        let index = Index::build(snapshot, &self.inner.options);
        self.set(index);
    }

    /// Swaps in a prebuilt index.
    pub fn set(&self, index: Index) {
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
    use crate::manifest::{Document, parse_documents};

    fn mk_snapshot(yaml: &str) -> Snapshot {
        let objects = parse_documents("t.yaml", yaml)
            .unwrap()
            .into_iter()
            .filter_map(|(_, d)| match d {
                Document::Object(o) => Some(o),
                _ => None,
            });
        Snapshot::from_objects(objects)
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
}
