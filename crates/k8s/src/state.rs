//! The live cluster state cluster mode keeps: the [`Snapshot`] `dag::build` reads, updated on every
//! watch event, plus what the status writer needs to know about each routing object (its current
//! status, whether sluice owns status fields on it) and the objects that could not be decoded.
//!
//! Everything here is synchronous and pure so it is tested without a cluster; the watch tasks hold
//! the lock only to apply one event.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use serde_json::Value;

use sluice_core::api::{Kind, ObjKey, ObjectRef};
use sluice_core::manifest::{Document, decode_value};
use sluice_core::store::{AnyObject, Snapshot};
use sluice_core::validate::FieldError;

pub use super::status::{Observed, Rejected};
use super::status::{ObservedStatus, writes_status};

/// The field manager sluice writes status with.
pub const FIELD_MANAGER: &str = "sluice";

/// One object from a watch, made ready for the store.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub object: ObjectRef,
    /// Hash of everything routing can read (status, resourceVersion, managedFields and the
    /// metadata `prepare` drops excluded): an event that changes only those does not trigger a
    /// rebuild.
    pub fingerprint: u64,
    pub observed: Observed,
    /// `metadata.resourceVersion`, when it is a number (etcd's always are): the status writer
    /// sends it as a precondition (`writer.rs`).
    pub resource_version: Option<u64>,
    /// The typed object, or why it does not decode.
    pub decoded: Result<AnyObject, FieldError>,
}

/// Why a watched value cannot be stored at all (not even as a rejected object).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PrepareError {
    #[error("object has no metadata.name")]
    NoName,
    #[error("{0}")]
    Decode(#[from] sluice_core::manifest::DecodeError),
    #[error("unexpected type {0}")]
    UnexpectedType(String),
}

/// Metadata nothing in sluice reads of a stored object: identity and bookkeeping of the API
/// server and of other controllers. Dropped when an object is stored (two to five strings per
/// object, ~1 MiB at 10k routing objects), and a change to them alone triggers no rebuild.
/// (`name`, `namespace`, `generation` and `creationTimestamp`, which orders host claims, are
/// kept, and a Gateway's `uid`.)
const UNREAD_METADATA: [&str; 6] = [
    "uid",
    "resourceVersion",
    "selfLink",
    "generateName",
    "ownerReferences",
    "finalizers",
];

/// Turns one watched object (as JSON) into a [`Prepared`]: drops what sluice never reads
/// (managedFields, [`UNREAD_METADATA`], the last-applied annotation, and the labels and
/// annotations of kinds whose labels and annotations nothing reads: [`reads_labels`],
/// [`reads_annotations`]), takes the status aside and decodes the rest.
/// `api_version`/`kind` are those of the watched resource (list items may omit them).
pub fn prepare(kind: Kind, mut value: Value) -> Result<Prepared, PrepareError> {
    let Value::Object(map) = &mut value else {
        return Err(sluice_core::manifest::DecodeError::NotAMapping.into());
    };
    // The apiVersion the object came at may differ for Gateway API fallbacks; decode_value only
    // needs the group to match.
    if !map.contains_key("apiVersion") {
        map.insert("apiVersion".into(), Value::from(kind.api_version()));
    }
    map.insert("kind".into(), Value::from(kind.kind()));
    let status = map.remove("status");
    let mut sluice_owns_status = false;
    let mut generation = None;
    let mut resource_version = None;
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        resource_version = (meta.get("resourceVersion").and_then(Value::as_str))
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(Value::Array(fields)) = meta.remove("managedFields") {
            sluice_owns_status = fields.iter().any(owns_status);
        }
        for field in UNREAD_METADATA {
            // A Gateway's uid is the owner reference of the Service sluice keeps for it
            // (k8s::gateway_services).
            if field == "uid" && kind == Kind::Gateway {
                continue;
            }
            meta.remove(field);
        }
        if !reads_labels(kind) {
            meta.remove("labels");
        }
        if !reads_annotations(kind) {
            meta.remove("annotations");
        } else if let Some(Value::Object(ann)) = meta.get_mut("annotations") {
            ann.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        generation = meta.get("generation").and_then(Value::as_i64);
    }
    let fingerprint = fingerprint(map);
    let observed = Observed {
        generation,
        status: status.as_ref().map(ObservedStatus::new),
        sluice_owns_status,
    };
    match decode_value(value)? {
        Document::Object(obj) => Ok(Prepared {
            object: obj.object_ref(),
            fingerprint,
            observed,
            resource_version,
            decoded: Ok(obj),
        }),
        Document::Rejected { object, error } if !object.key.name.is_empty() => Ok(Prepared {
            object,
            fingerprint,
            observed,
            resource_version,
            decoded: Err(error),
        }),
        Document::Rejected { .. } => Err(PrepareError::NoName),
        Document::Skipped { api_version, kind } => Err(PrepareError::UnexpectedType(format!(
            "{api_version} {kind}"
        ))),
    }
}

/// Whether sluice reads the labels of objects of this kind: an EndpointSlice's
/// (`kubernetes.io/service-name` ties it to its Service) and a Namespace's (Gateway listeners
/// select the namespaces whose routes they take by label). Everything else's labels (Argo CD's,
/// Helm's, `app.kubernetes.io/*`) are dropped when the object is stored: at 10k IngressRoutes a
/// label map is ~5 MB of memory, and a label-only change then triggers no rebuild. Code that starts
/// reading the labels of another kind must add it here.
pub fn reads_labels(kind: Kind) -> bool {
    matches!(kind, Kind::EndpointSlice | Kind::Namespace)
}

/// Whether sluice reads the annotations of objects of this kind: an Ingress's (the class
/// annotation) and an IngressClass's (the default-class annotation). Like [`reads_labels`], code
/// that starts reading another kind's annotations must add it here.
pub fn reads_annotations(kind: Kind) -> bool {
    matches!(kind, Kind::Ingress | Kind::IngressClass)
}

/// Whether one managedFields entry is sluice's, on the status subresource, owning something.
fn owns_status(entry: &Value) -> bool {
    entry.get("manager").and_then(Value::as_str) == Some(FIELD_MANAGER)
        && entry.get("subresource").and_then(Value::as_str) == Some("status")
        && entry
            .get("fieldsV1")
            .and_then(|f| f.get("f:status"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
}

fn fingerprint(map: &serde_json::Map<String, Value>) -> u64 {
    let mut h = DefaultHasher::new();
    for (k, v) in map {
        if k == "metadata" {
            if let Value::Object(meta) = v {
                for (mk, mv) in meta {
                    if mk != "resourceVersion" && mk != "managedFields" {
                        mk.hash(&mut h);
                        mv.to_string().hash(&mut h);
                    }
                }
            }
        } else {
            k.hash(&mut h);
            v.to_string().hash(&mut h);
        }
    }
    h.finish()
}

#[derive(Clone, Debug)]
struct Entry {
    fingerprint: u64,
    observed: Observed,
    /// The object's resourceVersion as last seen (not part of [`Observed`]: a new version with
    /// the same status plans nothing new).
    resource_version: Option<u64>,
}

/// The live state: snapshot + per-object bookkeeping.
///
/// Every stored object (decoded or rejected) has a fingerprint; only objects of kinds whose
/// status sluice writes ([`writes_status`]) keep their [`Observed`] too. The two live in separate
/// maps because most watched objects are Services and EndpointSlices: at 10k routing objects a
/// single map of fingerprint and observed status for all ~30k objects was ~9 MiB of hash table,
/// mostly empty room for an `Observed` nothing reads (half of that now).
#[derive(Debug, Default)]
pub struct ClusterState {
    snapshot: Snapshot,
    /// Objects of kinds whose status sluice writes: fingerprint and observed status.
    entries: HashMap<ObjectRef, Entry>,
    /// Objects of every other kind: fingerprint only.
    fingerprints: HashMap<ObjectRef, u64>,
    rejected: BTreeMap<ObjectRef, Rejected>,
    synced: BTreeSet<Kind>,
    /// Objects with a status sluice writes whose [`Observed`] changed (or that were removed)
    /// since the status writer last took them: what it must plan again besides the objects
    /// whose verdict changed.
    observed_changes: HashSet<ObjectRef>,
}

impl ClusterState {
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Objects that are stored in the cluster but do not decode.
    pub fn rejected(&self) -> &BTreeMap<ObjectRef, Rejected> {
        &self.rejected
    }

    /// What the status writer knows of a stored object of a kind whose status sluice writes
    /// (`None` for other kinds, whose status sluice neither reads nor writes).
    pub fn observed(&self, obj: &ObjectRef) -> Option<&Observed> {
        self.entries.get(obj).map(|e| &e.observed)
    }

    /// The resourceVersion of a stored object of a kind whose status sluice writes, as this
    /// replica last saw it (a watch event or a write's answer).
    pub fn resource_version(&self, obj: &ObjectRef) -> Option<u64> {
        self.entries.get(obj).and_then(|e| e.resource_version)
    }

    /// Records what a status write returned, so the writer does not write it again before the
    /// watch event arrives.
    pub fn set_observed(&mut self, obj: &ObjectRef, observed: Observed) {
        if let Some(e) = self.entries.get_mut(obj)
            && e.observed != observed
        {
            e.observed = observed;
            self.observed_changed(obj);
        }
    }

    /// [`Self::set_observed`] from a write's answer, with the object's new resourceVersion;
    /// ignored when the watch already brought a later version (resourceVersions of one object
    /// grow: an answer processed after the watch event of a later change is stale).
    pub fn set_written(
        &mut self,
        obj: &ObjectRef,
        observed: Observed,
        resource_version: Option<u64>,
    ) {
        let Some(e) = self.entries.get_mut(obj) else {
            return;
        };
        if let (Some(seen), Some(written)) = (e.resource_version, resource_version)
            && written < seen
        {
            return;
        }
        if resource_version.is_some() {
            e.resource_version = resource_version;
        }
        self.set_observed(obj, observed);
    }

    /// Takes the objects whose observed status changed since the last call (see
    /// [`Self::observed`]); only kinds whose status sluice writes are recorded.
    pub fn take_observed_changes(&mut self) -> HashSet<ObjectRef> {
        std::mem::take(&mut self.observed_changes)
    }

    fn observed_changed(&mut self, obj: &ObjectRef) {
        if writes_status(obj.kind) && !self.observed_changes.contains(obj) {
            self.observed_changes.insert(obj.clone());
        }
    }

    /// Whether the initial list of a kind is complete.
    pub fn is_synced(&self, kind: Kind) -> bool {
        self.synced.contains(&kind)
    }

    /// Adds or updates one object. Returns whether routing input changed (a rebuild is needed).
    pub fn apply(&mut self, p: Prepared) -> bool {
        let generation = p.observed.generation;
        let changed = if writes_status(p.object.kind) {
            if self
                .entries
                .get(&p.object)
                .is_none_or(|e| e.observed != p.observed)
            {
                self.observed_changed(&p.object);
            }
            let previous = self.entries.insert(
                p.object.clone(),
                Entry {
                    fingerprint: p.fingerprint,
                    observed: p.observed,
                    resource_version: p.resource_version,
                },
            );
            previous.is_none_or(|e| e.fingerprint != p.fingerprint)
        } else {
            self.fingerprints.insert(p.object.clone(), p.fingerprint) != Some(p.fingerprint)
        };
        match p.decoded {
            // The content sluice reads is what is stored already (a status write, a relist): the
            // stored object stays. Replacing it with an equal copy would leave the snapshot's
            // maps sharing no nodes with the last build's, and the next build would compare the
            // objects one by one (after sluice wrote the statuses of 5,000 routes, the first
            // build after them spent ~10 ms comparing equal objects).
            Ok(_) if !changed => {}
            Ok(obj) => {
                self.rejected.remove(&p.object);
                self.snapshot.insert(obj);
            }
            Err(error) => {
                self.snapshot.remove(p.object.kind, &p.object.key);
                self.rejected
                    .insert(p.object, Rejected { error, generation });
            }
        }
        changed
    }

    /// Removes one object. Returns whether it was there.
    pub fn delete(&mut self, obj: &ObjectRef) -> bool {
        let had = if writes_status(obj.kind) {
            self.entries.remove(obj).is_some()
        } else {
            self.fingerprints.remove(obj).is_some()
        };
        if had {
            self.observed_changed(obj);
        }
        self.rejected.remove(obj);
        self.snapshot.remove(obj.kind, &obj.key) || had
    }

    /// Replaces every object of a kind with a complete listing (a watch (re)started). Returns
    /// whether anything changed.
    pub fn replace_kind(&mut self, kind: Kind, items: Vec<Prepared>) -> bool {
        let listed: BTreeSet<ObjKey> = items.iter().map(|p| p.object.key.clone()).collect();
        let stored: Box<dyn Iterator<Item = &ObjectRef>> = if writes_status(kind) {
            Box::new(self.entries.keys())
        } else {
            Box::new(self.fingerprints.keys())
        };
        let stale: Vec<ObjectRef> = stored
            .filter(|r| r.kind == kind && !listed.contains(&r.key))
            .cloned()
            .collect();
        let mut changed = !self.synced.contains(&kind);
        for r in stale {
            changed |= self.delete(&r);
        }
        for p in items {
            changed |= self.apply(p);
        }
        self.synced.insert(kind);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mk_route(name: &str, rv: &str, prefix: Value) -> Value {
        json!({
            "apiVersion": "contour.heptio.com/v1alpha1",
            "kind": "Route",
            "metadata": {
                "name": name, "namespace": "team", "generation": 3, "resourceVersion": rv,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}", "keep": "me"},
                "managedFields": [
                    {"manager": "sluice", "subresource": "status", "operation": "Apply",
                     "fieldsV1": {"f:status": {"f:currentStatus": {}}}}
                ]
            },
            "spec": {"host": "a.example.com", "routes": [{"pathPrefix": prefix, "upstreams": [{"serviceName": "s", "servicePort": 80}]}]},
            "status": {"currentStatus": "valid"}
        })
    }

    #[test]
    fn prepare_takes_status_aside_and_strips_noise() {
        let p = prepare(Kind::RouteV1alpha1, mk_route("r", "1", json!("/"))).unwrap();
        assert_eq!(p.object, ObjectRef::new(Kind::RouteV1alpha1, "team", "r"));
        assert_eq!(p.observed.generation, Some(3));
        assert_eq!(
            p.observed.status,
            Some(ObservedStatus::new(&json!({"currentStatus": "valid"})))
        );
        assert!(p.observed.sluice_owns_status);
        let Ok(AnyObject::RouteV1alpha1(r)) = &p.decoded else {
            panic!("not decoded: {:?}", p.decoded)
        };
        assert!(r.metadata.annotations.is_none());
        assert!(r.metadata.managed_fields.is_none());
    }

    #[test]
    fn the_resource_version_is_kept_and_a_late_write_answer_never_moves_it_back() {
        let r = ObjectRef::new(Kind::RouteV1alpha1, "team", "r");
        let p = prepare(Kind::RouteV1alpha1, mk_route("r", "7", json!("/"))).unwrap();
        assert_eq!(p.resource_version, Some(7));
        let mut st = ClusterState::default();
        st.apply(p);
        assert_eq!(st.resource_version(&r), Some(7));
        // A write's answer moves it on, with the status the write left.
        let written = Observed {
            generation: Some(3),
            status: Some(ObservedStatus::new(&json!({"currentStatus": "valid"}))),
            sluice_owns_status: true,
        };
        st.set_written(&r, written.clone(), Some(8));
        assert_eq!(st.resource_version(&r), Some(8));
        // The watch brings a later change first; the answer of a write before it comes late.
        let mut later = mk_route("r", "10", json!("/"));
        later["status"] = json!({"currentStatus": "orphaned"});
        st.apply(prepare(Kind::RouteV1alpha1, later).unwrap());
        st.set_written(&r, written, Some(9));
        assert_eq!(st.resource_version(&r), Some(10));
        assert_eq!(
            st.observed(&r).unwrap().status,
            Some(ObservedStatus::new(&json!({"currentStatus": "orphaned"})))
        );
        // Not a number: no precondition.
        let p = prepare(Kind::RouteV1alpha1, mk_route("r", "x1", json!("/"))).unwrap();
        assert_eq!(p.resource_version, None);
    }

    #[test]
    fn prepare_drops_the_metadata_nothing_reads() {
        let ir = json!({
            "apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
            "metadata": {
                "name": "web", "namespace": "team", "generation": 2,
                "uid": "6f1c8a52-5d1e-4a0b-9a57-3f1d2c4b5e6f", "resourceVersion": "4711",
                "creationTimestamp": "2026-11-25T10:00:00Z", "generateName": "web-",
                "selfLink": "/apis/contour.heptio.com/v1beta1/namespaces/team/ingressroutes/web",
                "finalizers": ["example.com/cleanup"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                     "uid": "0b4e8c1a-3c2d-4e5f-8a9b-1c2d3e4f5a6b"}]
            },
            "spec": {"virtualhost": {"fqdn": "a.example.com"},
                     "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}
        });
        let p = prepare(Kind::IngressRouteV1beta1, ir.clone()).unwrap();
        let Ok(AnyObject::IngressRouteV1beta1(r)) = &p.decoded else {
            panic!("IngressRoute not decoded: {:?}", p.decoded)
        };
        let m = &r.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.generation),
            (Some("web"), Some("team"), Some(2))
        );
        assert!(m.creation_timestamp.is_some());
        assert!(m.uid.is_none() && m.resource_version.is_none() && m.self_link.is_none());
        assert!(m.generate_name.is_none() && m.finalizers.is_none());
        assert!(m.owner_references.is_none());
        // A change to them alone is no change to routing.
        let mut adopted = ir;
        adopted["metadata"]["ownerReferences"][0]["name"] = json!("other");
        adopted["metadata"]["finalizers"] = json!([]);
        let q = prepare(Kind::IngressRouteV1beta1, adopted).unwrap();
        assert_eq!(p.fingerprint, q.fingerprint);
    }

    #[test]
    fn a_gateway_keeps_its_uid_for_the_owner_reference_of_its_service() {
        let gw = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "team", "uid": "u-1", "resourceVersion": "7"},
            "spec": {"gatewayClassName": "sluice",
                     "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}
        });
        let p = prepare(Kind::Gateway, gw).unwrap();
        let Ok(AnyObject::Gateway(g)) = &p.decoded else {
            panic!("Gateway not decoded: {:?}", p.decoded)
        };
        assert_eq!(g.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(g.metadata.resource_version, None);
    }

    #[test]
    fn prepare_keeps_only_the_labels_and_annotations_sluice_reads() {
        let meta = json!({
            "name": "x", "namespace": "team",
            "labels": {"app.kubernetes.io/name": "shop", "kubernetes.io/service-name": "web"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{…}",
                "kubernetes.io/ingress.class": "sluice",
                "argocd.argoproj.io/tracking-id": "shop:networking/Ingress:team/x"
            }
        });
        let ingress = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta.clone(),
            "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}
        });
        let Ok(AnyObject::Ingress(i)) = prepare(Kind::Ingress, ingress).unwrap().decoded else {
            panic!("Ingress not decoded")
        };
        assert!(i.metadata.labels.is_none());
        let ann = i.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            ann.keys().collect::<Vec<_>>(),
            vec![
                "argocd.argoproj.io/tracking-id",
                "kubernetes.io/ingress.class"
            ]
        );

        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta.clone(),
            "addressType": "IPv4", "endpoints": []
        });
        let Ok(AnyObject::EndpointSlice(e)) = prepare(Kind::EndpointSlice, slice).unwrap().decoded
        else {
            panic!("EndpointSlice not decoded")
        };
        assert_eq!(e.metadata.labels.as_ref().unwrap().len(), 2);
        assert!(e.metadata.annotations.is_none());

        let ir = json!({
            "apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute", "metadata": meta,
            "spec": {"virtualhost": {"fqdn": "a.example.com"},
                     "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}
        });
        let p = prepare(Kind::IngressRouteV1beta1, ir.clone()).unwrap();
        let Ok(AnyObject::IngressRouteV1beta1(r)) = &p.decoded else {
            panic!("IngressRoute not decoded")
        };
        assert!(r.metadata.labels.is_none() && r.metadata.annotations.is_none());
        // A label-only change is no change to routing.
        let mut relabelled = ir;
        relabelled["metadata"]["labels"] = json!({"app.kubernetes.io/version": "2"});
        let q = prepare(Kind::IngressRouteV1beta1, relabelled).unwrap();
        assert_eq!(p.fingerprint, q.fingerprint);
    }

    #[test]
    fn fingerprint_ignores_status_and_resource_version_only() {
        let a = prepare(Kind::RouteV1alpha1, mk_route("r", "1", json!("/"))).unwrap();
        let mut v = mk_route("r", "2", json!("/"));
        v["status"] = json!({"currentStatus": "invalid"});
        let b = prepare(Kind::RouteV1alpha1, v).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint);
        let c = prepare(Kind::RouteV1alpha1, mk_route("r", "3", json!("/x"))).unwrap();
        assert_ne!(a.fingerprint, c.fingerprint);
    }

    #[test]
    fn other_managers_do_not_count_as_sluice_owning_status() {
        let mut v = mk_route("r", "1", json!("/"));
        v["metadata"]["managedFields"][0]["manager"] = json!("kubectl");
        assert!(
            !prepare(Kind::RouteV1alpha1, v)
                .unwrap()
                .observed
                .sluice_owns_status
        );
        let mut v = mk_route("r", "1", json!("/"));
        v["metadata"]["managedFields"][0]["subresource"] = Value::Null;
        assert!(
            !prepare(Kind::RouteV1alpha1, v)
                .unwrap()
                .observed
                .sluice_owns_status
        );
    }

    #[test]
    fn malformed_object_is_rejected_not_stored_and_recovers() {
        let mut st = ClusterState::default();
        let good = prepare(Kind::RouteV1alpha1, mk_route("r", "1", json!("/"))).unwrap();
        assert!(st.apply(good));
        assert_eq!(st.snapshot().routes_v1alpha1.len(), 1);

        let bad = prepare(Kind::RouteV1alpha1, mk_route("r", "2", json!(42))).unwrap();
        let err = bad.decoded.clone().unwrap_err();
        assert!(err.path.contains("pathPrefix"), "{err}");
        assert!(st.apply(bad));
        assert!(st.snapshot().routes_v1alpha1.is_empty());
        let r = ObjectRef::new(Kind::RouteV1alpha1, "team", "r");
        assert_eq!(st.rejected().get(&r).map(|x| x.generation), Some(Some(3)));

        let fixed = prepare(Kind::RouteV1alpha1, mk_route("r", "3", json!("/"))).unwrap();
        assert!(st.apply(fixed));
        assert!(st.rejected().is_empty());
        assert_eq!(st.snapshot().routes_v1alpha1.len(), 1);
    }

    #[test]
    fn status_only_updates_do_not_ask_for_a_rebuild_but_are_observed() {
        let mut st = ClusterState::default();
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("r", "1", json!("/"))).unwrap());
        let mut v = mk_route("r", "2", json!("/"));
        v["status"] = json!({"currentStatus": "orphaned"});
        let before = st.snapshot().clone();
        assert!(!st.apply(prepare(Kind::RouteV1alpha1, v).unwrap()));
        let r = ObjectRef::new(Kind::RouteV1alpha1, "team", "r");
        assert_eq!(
            st.observed(&r).unwrap().status,
            Some(ObservedStatus::new(&json!({"currentStatus": "orphaned"})))
        );
        // The stored object is kept, so the next build finds its kind unchanged without
        // comparing objects.
        assert!(
            st.snapshot()
                .routes_v1alpha1
                .ptr_eq(&before.routes_v1alpha1)
        );
        // A change to what routing reads replaces it.
        assert!(st.apply(prepare(Kind::RouteV1alpha1, mk_route("r", "3", json!("/x"))).unwrap()));
        assert!(
            !st.snapshot()
                .routes_v1alpha1
                .ptr_eq(&before.routes_v1alpha1)
        );
    }

    #[test]
    fn the_writer_learns_which_observed_statuses_changed() {
        let mut st = ClusterState::default();
        let r = ObjectRef::new(Kind::RouteV1alpha1, "team", "r");
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("r", "1", json!("/"))).unwrap());
        let svc = json!({"apiVersion": "v1", "kind": "Service",
                         "metadata": {"name": "web", "namespace": "team"}, "spec": {"ports": [{"port": 80}]}});
        st.apply(prepare(Kind::Service, svc).unwrap());
        // New objects are changes; Services have no status sluice writes.
        assert_eq!(st.take_observed_changes(), HashSet::from([r.clone()]));
        assert!(st.take_observed_changes().is_empty());
        // A new resourceVersion with the same status and generation is not a change.
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("r", "2", json!("/"))).unwrap());
        assert!(st.take_observed_changes().is_empty());
        // A status update is, whether from the watch or from a write's answer.
        let mut v = mk_route("r", "3", json!("/"));
        v["status"] = json!({"currentStatus": "orphaned"});
        st.apply(prepare(Kind::RouteV1alpha1, v).unwrap());
        assert_eq!(st.take_observed_changes(), HashSet::from([r.clone()]));
        st.set_observed(&r, Observed::default());
        assert_eq!(st.take_observed_changes(), HashSet::from([r.clone()]));
        st.set_observed(&r, Observed::default());
        assert!(st.take_observed_changes().is_empty());
        // So is a deletion.
        st.delete(&r);
        assert_eq!(st.take_observed_changes(), HashSet::from([r]));
    }

    #[test]
    fn replace_kind_drops_what_the_new_listing_lacks() {
        let mut st = ClusterState::default();
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("a", "1", json!("/"))).unwrap());
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("b", "1", json!("/"))).unwrap());
        assert!(!st.is_synced(Kind::RouteV1alpha1));
        let listing = vec![prepare(Kind::RouteV1alpha1, mk_route("b", "1", json!("/"))).unwrap()];
        assert!(st.replace_kind(Kind::RouteV1alpha1, listing.clone()));
        assert!(st.is_synced(Kind::RouteV1alpha1));
        let names: Vec<_> = st
            .snapshot()
            .routes_v1alpha1
            .keys()
            .map(|k| k.name.to_string())
            .collect();
        assert_eq!(names, vec!["b"]);
        // The same listing again changes nothing.
        assert!(!st.replace_kind(Kind::RouteV1alpha1, listing));
    }

    #[test]
    fn delete_removes_everything_about_the_object() {
        let mut st = ClusterState::default();
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("a", "1", json!(7))).unwrap());
        let r = ObjectRef::new(Kind::RouteV1alpha1, "team", "a");
        assert!(st.delete(&r));
        assert!(st.rejected().is_empty() && st.observed(&r).is_none());
        assert!(!st.delete(&r));
    }

    #[test]
    fn kinds_without_a_status_keep_a_fingerprint_only() {
        let svc = |name: &str, rv: &str, port: Value| {
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": name, "namespace": "team", "resourceVersion": rv},
                   "spec": {"ports": [{"port": port}]}})
        };
        let mut st = ClusterState::default();
        let a = ObjectRef::new(Kind::Service, "team", "a");
        assert!(st.apply(prepare(Kind::Service, svc("a", "1", json!(80))).unwrap()));
        assert!(st.observed(&a).is_none());
        assert!(st.take_observed_changes().is_empty());
        // Same content at a new resourceVersion: no rebuild; new content: a rebuild.
        assert!(!st.apply(prepare(Kind::Service, svc("a", "2", json!(80))).unwrap()));
        assert!(st.apply(prepare(Kind::Service, svc("a", "3", json!(81))).unwrap()));
        // One that does not decode is rejected, then recovers.
        assert!(st.apply(prepare(Kind::Service, svc("a", "4", json!("eighty"))).unwrap()));
        assert!(st.snapshot().services().is_empty() && st.rejected().contains_key(&a));
        assert!(st.apply(prepare(Kind::Service, svc("a", "5", json!(81))).unwrap()));
        assert!(st.rejected().is_empty());
        // A listing without it drops it, and only it.
        st.apply(prepare(Kind::RouteV1alpha1, mk_route("a", "1", json!("/"))).unwrap());
        let listing = vec![prepare(Kind::Service, svc("b", "1", json!(80))).unwrap()];
        assert!(st.replace_kind(Kind::Service, listing.clone()));
        let services: Vec<_> = st
            .snapshot()
            .services()
            .keys()
            .map(|k| k.name.to_string())
            .collect();
        assert_eq!(services, vec!["b"]);
        assert_eq!(st.snapshot().routes_v1alpha1.len(), 1);
        assert!(!st.replace_kind(Kind::Service, listing));
        let b = ObjectRef::new(Kind::Service, "team", "b");
        assert!(st.delete(&b) && !st.delete(&b));
        assert!(st.snapshot().services().is_empty());
    }

    #[test]
    fn list_items_without_type_meta_still_decode() {
        let v = json!({"metadata": {"name": "svc", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}});
        let p = prepare(Kind::Service, v).unwrap();
        assert!(matches!(p.decoded, Ok(AnyObject::Service(_))));
        assert_eq!(
            prepare(Kind::Service, json!({"metadata": {}})).unwrap_err(),
            PrepareError::NoName
        );
    }
}
