//! The versioned resource cache: one immutable [`Snapshot`] per published routing state, holding
//! every resource encoded once, with a content version per resource and per type. Versions are
//! content hashes, so an endpoint change leaves the cluster version alone, and a restarted sluice
//! computes the same versions for the same objects (Envoy reconnecting with known versions gets
//! nothing it already has).

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use sha2::{Digest, Sha256};

use crate::translate::{ResourceType, Resources};

/// One encoded resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    pub name: String,
    /// Hash of the encoded bytes.
    pub version: String,
    pub body: Any,
}

impl Resource {
    /// A resource from its encoded body; the version is the hash of the bytes.
    pub fn new(name: String, body: Any) -> Resource {
        Resource {
            version: short_hash(&body.value),
            name,
            body,
        }
    }
}

/// All resources of one type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeSnapshot {
    /// Hash over every (name, version) of the type.
    pub version: String,
    pub resources: BTreeMap<String, Arc<Resource>>,
}

/// Every resource sluice serves at one moment. Types are shared between snapshots that differ
/// only in other types ([`Snapshot::with_replaced`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    types: BTreeMap<ResourceType, Arc<TypeSnapshot>>,
}

/// Resources at least this large are hashed with BLAKE3, smaller ones with SHA-256: SHA-256 (with
/// the CPU's SHA instructions) is the faster of the two on a cluster or an endpoint list of a few
/// hundred bytes, BLAKE3 three to four times faster on the HTTP route configuration of thousands of
/// hosts, which every routing change hashes again (630 KB at 6,000 hosts: 0.39 → 0.11 ms).
const LARGE: usize = 64 << 10;

/// The content version of encoded bytes. Which hash depends on the length only, so equal bytes
/// always get equal versions, whichever way they were encoded.
fn short_hash(bytes: &[u8]) -> String {
    if bytes.len() >= LARGE {
        hex8(blake3::hash(bytes).as_bytes())
    } else {
        hex8(&Sha256::digest(bytes))
    }
}

/// The first 8 bytes of a digest as 16 lowercase hex digits.
fn hex8(digest: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(16);
    for &b in &digest[..8] {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

/// The version of a set of (name, version) pairs.
pub fn set_version<'a>(entries: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    let mut h = Sha256::new();
    for (n, v) in entries {
        h.update(n.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex8(&h.finalize())
}

impl TypeSnapshot {
    /// The resources of one type, with the version of the set.
    pub fn new(resources: BTreeMap<String, Arc<Resource>>) -> TypeSnapshot {
        TypeSnapshot {
            version: set_version(resources.iter().map(|(n, r)| (n, &r.version))),
            resources,
        }
    }
}

impl Snapshot {
    /// A snapshot of the given types (a type not given has no resources).
    pub fn from_types(types: BTreeMap<ResourceType, Arc<TypeSnapshot>>) -> Snapshot {
        Snapshot { types }
    }

    /// Whether both snapshots hold the same resources. Types shared between the two (the usual
    /// case for what did not change) are not looked into, and the resources of a type are
    /// compared only when no type's version tells the snapshots apart.
    pub fn same_as(&self, other: &Snapshot) -> bool {
        let pairs = ResourceType::ALL
            .map(|t| (self.types.get(&t), other.types.get(&t)))
            .into_iter()
            .filter(|(a, b)| !matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
        let cheap = pairs.clone().all(|pair| match pair {
            (Some(a), Some(b)) => a.version == b.version,
            (None, None) => true,
            (Some(a), None) | (None, Some(a)) => a.resources.is_empty(),
        });
        cheap
            && pairs.into_iter().all(|pair| match pair {
                (Some(a), Some(b)) => a.resources == b.resources,
                _ => true,
            })
    }

    /// This snapshot with each type whose version equals `other`'s taken from `other` (the same
    /// `Arc`). Versions are content hashes, so such a type holds the same resources; sharing it
    /// lets xDS streams see at a glance that the type did not change. (The pipeline's endpoint
    /// fast path publishes load assignments the encoder later computes again: without this, the
    /// next routing change would look like a change of every load assignment.)
    pub fn sharing_types_of(mut self, other: &Snapshot) -> Snapshot {
        for (t, mine) in self.types.iter_mut() {
            if let Some(theirs) = other.types.get(t)
                && !Arc::ptr_eq(mine, theirs)
                && mine.version == theirs.version
                && mine.resources.len() == theirs.resources.len()
            {
                *mine = theirs.clone();
            }
        }
        self
    }

    /// Encodes translated resources. The same as [`Snapshot::from_encoded`] of
    /// [`Resources::encode`], without the intermediate maps.
    pub fn from_resources(resources: &Resources) -> Snapshot {
        fn typed<T: Message + Name>(items: &[T], name: impl Fn(&T) -> &str) -> Arc<TypeSnapshot> {
            let type_url = T::type_url();
            let resources: BTreeMap<String, Arc<Resource>> = items
                .iter()
                .map(|r| {
                    let body = Any {
                        type_url: type_url.clone(),
                        value: r.encode_to_vec(),
                    };
                    let name = name(r).to_string();
                    (name.clone(), Arc::new(Resource::new(name, body)))
                })
                .collect();
            Arc::new(TypeSnapshot::new(resources))
        }
        let r = resources;
        let types = BTreeMap::from([
            (ResourceType::Listener, typed(&r.listeners, |l| &l.name)),
            (ResourceType::Route, typed(&r.routes, |r| &r.name)),
            (ResourceType::Cluster, typed(&r.clusters, |c| &c.name)),
            (
                ResourceType::Endpoint,
                typed(&r.endpoints, |e| &e.cluster_name),
            ),
            (ResourceType::Secret, typed(&r.secrets, |s| &s.name)),
        ]);
        Snapshot { types }
    }

    /// Builds a snapshot from already encoded resources (tests, other sources).
    pub fn from_encoded(items: BTreeMap<ResourceType, BTreeMap<String, Any>>) -> Snapshot {
        let mut types = BTreeMap::new();
        for t in ResourceType::ALL {
            types.insert(t, Self::type_snapshot(BTreeMap::new()));
        }
        for (t, items) in items {
            types.insert(t, Self::type_snapshot(items));
        }
        Snapshot { types }
    }

    /// This snapshot with the resources of type `t` in `items` replaced (or added), by name; every
    /// other type is shared with `self`, not copied.
    pub fn with_replaced(&self, t: ResourceType, items: Vec<(String, Any)>) -> Snapshot {
        let mut types = self.types.clone();
        let mut ts = types
            .get(&t)
            .map(|ts| TypeSnapshot::clone(ts))
            .unwrap_or_default();
        for (name, body) in items {
            ts.resources
                .insert(name.clone(), Arc::new(Resource::new(name, body)));
        }
        types.insert(t, Arc::new(TypeSnapshot::new(ts.resources)));
        Snapshot { types }
    }

    fn type_snapshot(items: BTreeMap<String, Any>) -> Arc<TypeSnapshot> {
        let resources: BTreeMap<String, Arc<Resource>> = items
            .into_iter()
            .map(|(name, body)| (name.clone(), Arc::new(Resource::new(name, body))))
            .collect();
        Arc::new(TypeSnapshot::new(resources))
    }

    /// The resources of one type (empty when the snapshot has none).
    pub fn of(&self, t: ResourceType) -> &BTreeMap<String, Arc<Resource>> {
        static EMPTY: BTreeMap<String, Arc<Resource>> = BTreeMap::new();
        self.types.get(&t).map(|s| &s.resources).unwrap_or(&EMPTY)
    }

    /// The resources of one type with their version, shared with other snapshots holding the
    /// same (None when the snapshot has no such type).
    pub fn shared(&self, t: ResourceType) -> Option<&Arc<TypeSnapshot>> {
        self.types.get(&t)
    }

    /// The content version of one type.
    pub fn version(&self, t: ResourceType) -> &str {
        self.types.get(&t).map(|s| s.version.as_str()).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_any(v: &[u8]) -> Any {
        Any {
            type_url: "t".into(),
            value: v.to_vec(),
        }
    }

    #[test]
    fn from_resources_is_from_encoded_of_encode() {
        let options = crate::translate::Options::default();
        let snap = crate::synth::snapshot(crate::synth::Shape {
            routing_objects: 50,
            endpoints_per_service: 2,
            unrelated_secrets: 3,
        });
        let dag = crate::dag::build(&snap, &crate::dag::Options::default());
        let resources = crate::translate::build(&dag, &options);
        assert_eq!(
            Snapshot::from_resources(&resources),
            Snapshot::from_encoded(resources.encode())
        );
    }

    #[test]
    fn types_with_the_same_version_are_taken_from_the_other_snapshot() {
        let items = |e: &[u8]| {
            BTreeMap::from([
                (
                    ResourceType::Cluster,
                    BTreeMap::from([("c".to_string(), mk_any(b"c1"))]),
                ),
                (
                    ResourceType::Endpoint,
                    BTreeMap::from([("c".to_string(), mk_any(e))]),
                ),
            ])
        };
        let published = Snapshot::from_encoded(items(b"e1"));
        // Built separately: equal content, other allocations.
        let same = Snapshot::from_encoded(items(b"e1")).sharing_types_of(&published);
        for t in ResourceType::ALL {
            assert!(Arc::ptr_eq(
                same.shared(t).unwrap(),
                published.shared(t).unwrap()
            ));
        }
        let changed = Snapshot::from_encoded(items(b"e2")).sharing_types_of(&published);
        assert!(Arc::ptr_eq(
            changed.shared(ResourceType::Cluster).unwrap(),
            published.shared(ResourceType::Cluster).unwrap()
        ));
        assert!(!Arc::ptr_eq(
            changed.shared(ResourceType::Endpoint).unwrap(),
            published.shared(ResourceType::Endpoint).unwrap()
        ));
        assert_eq!(changed.of(ResourceType::Endpoint)["c"].body, mk_any(b"e2"));
    }

    #[test]
    fn large_resources_are_versioned_by_content_too() {
        let big: Vec<u8> = (0..LARGE + 100).map(|i| (i % 251) as u8).collect();
        let version = |bytes: &[u8]| Resource::new("r".into(), mk_any(bytes)).version;
        assert_eq!(version(&big), version(&big.clone()));
        let mut other = big.clone();
        other[LARGE / 2] ^= 1;
        assert_ne!(version(&big), version(&other));
        assert_ne!(version(&big), version(&big[..LARGE - 1]));
        assert_eq!(version(&big).len(), 16);
    }

    #[test]
    fn versions_follow_content_per_type() {
        let mut items = BTreeMap::new();
        items.insert(
            ResourceType::Cluster,
            BTreeMap::from([("c".to_string(), mk_any(b"c1"))]),
        );
        items.insert(
            ResourceType::Endpoint,
            BTreeMap::from([("c".to_string(), mk_any(b"e1"))]),
        );
        let a = Snapshot::from_encoded(items.clone());
        items.insert(
            ResourceType::Endpoint,
            BTreeMap::from([("c".to_string(), mk_any(b"e2"))]),
        );
        let b = Snapshot::from_encoded(items);
        assert_eq!(
            a.version(ResourceType::Cluster),
            b.version(ResourceType::Cluster)
        );
        assert_ne!(
            a.version(ResourceType::Endpoint),
            b.version(ResourceType::Endpoint)
        );
        assert_eq!(
            a.of(ResourceType::Cluster)["c"].version,
            b.of(ResourceType::Cluster)["c"].version
        );
        assert_eq!(a.version(ResourceType::Listener).len(), 16);
    }
}
