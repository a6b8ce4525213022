//! Services and the EndpointSlices that name them, by namespace and Service name: what resolving
//! a backend looks up.
//!
//! The store keeps this index up to date as Services and EndpointSlices arrive, change and go (a
//! lookup or two each), so a build finds a backend's Service and slices with one lookup and makes
//! no index of its own. Before, a full build indexed every Service and EndpointSlice of the store
//! first (~1.5 ms of a 10k build, on both threads), a partial build the namespaces its backends
//! named, and the incremental builder followed the slices' changes in an index of its own.
//!
//! A slice names its Service with its `kubernetes.io/service-name` label; an entry exists while
//! its Service or a slice naming it does (slices may arrive before their Service).
//!
//! Each entry also holds the Service's ports with the endpoints its slices give each port,
//! worked out whenever the Service or one of its slices changes: a build resolves a backend by
//! port number from the entry alone, without reading the Service's or the slices' own memory
//! (three or four cache misses a backend, in a build that resolves 10,000 of them).
//!
//! A persistent map, like the store's other maps: a snapshot's clone shares it, and a change
//! copies the path to one entry.

use std::sync::Arc;

use smallvec::SmallVec;

use super::endpoints::{Endpoints, slice_endpoints};
use super::{ServicePorts, SliceEndpoints};
use crate::api::ObjKey;
use crate::pmap::OrdMap;

/// One Service name of a namespace, as a build resolves it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceEntry {
    /// The Service, when the store has it.
    pub service: Option<Arc<ServicePorts>>,
    /// The EndpointSlices naming the Service, by name (their namespace is the Service's), in
    /// name order: the store's key order. Nearly every Service has one.
    slices: SmallVec<[(Arc<str>, Arc<SliceEndpoints>); 1]>,
    /// Whether the Service is of type ExternalName (false without a Service).
    external_name: bool,
    /// The Service's ports in its order, each with its endpoints ([`PortEndpoints`]); none
    /// without a Service or for an ExternalName one.
    ports: SmallVec<[PortEndpoints; 1]>,
}

/// One port of a Service and the endpoints its EndpointSlices give it: what a cluster of that
/// Service port holds ([`slice_endpoints`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortEndpoints {
    /// The port's number, as routes name it.
    pub port: i32,
    pub endpoints: Endpoints,
}

impl ServiceEntry {
    /// The EndpointSlices naming the Service, in the store's key order.
    pub fn slices(&self) -> impl Iterator<Item = &SliceEndpoints> + Clone + '_ {
        self.slices.iter().map(|(_, s)| &**s)
    }

    /// Whether the Service is of type ExternalName.
    pub fn is_external_name(&self) -> bool {
        self.external_name
    }

    /// The Service's ports, in the order of `service.ports`, each with the endpoints its slices
    /// give it; empty without a Service or for an ExternalName one.
    pub fn ports(&self) -> &[PortEndpoints] {
        &self.ports
    }

    /// Works the ports' endpoints out again, after the Service or a slice changed.
    fn resolve(&mut self) {
        let service = self.service.as_deref();
        self.external_name = service.is_some_and(|s| s.external_name);
        self.ports = match service {
            Some(s) if !s.external_name => (s.ports.iter())
                .map(|p| PortEndpoints {
                    port: p.port,
                    endpoints: slice_endpoints(self.slices(), p.slice_port_name()),
                })
                .collect(),
            _ => SmallVec::new(),
        };
    }

    fn is_empty(&self) -> bool {
        self.service.is_none() && self.slices.is_empty()
    }
}

/// Services and the EndpointSlices naming them, by namespace and Service name: a persistent map
/// (a snapshot's clone shares it) keyed by a hash of the two names, so that a lookup compares
/// numbers on its way down, not names; the entries of names whose hashes collide share a bucket.
#[derive(Clone, Debug, Default)]
pub struct ServiceIndex {
    buckets: OrdMap<u64, Bucket>,
    len: usize,
}

type Bucket = SmallVec<[(ObjKey, ServiceEntry); 1]>;

/// The hasher of a Service's names: one per process, randomly seeded (the index lives in memory
/// only).
static NAME_HASHER: std::sync::LazyLock<hashbrown::DefaultHashBuilder> =
    std::sync::LazyLock::new(Default::default);

fn hash_of(namespace: &str, name: &str) -> u64 {
    use std::hash::BuildHasher;
    NAME_HASHER.hash_one((namespace, name))
}

fn is(key: &ObjKey, namespace: &str, name: &str) -> bool {
    *key.namespace == *namespace && *key.name == *name
}

impl ServiceIndex {
    /// The entry of Service `name` in `namespace`, with its key.
    pub fn get(&self, namespace: &str, name: &str) -> Option<(&ObjKey, &ServiceEntry)> {
        let bucket = self.buckets.get(&hash_of(namespace, name))?;
        bucket
            .iter()
            .find(|(k, _)| is(k, namespace, name))
            .map(|(k, e)| (k, e))
    }

    /// The number of Service names with a Service or an EndpointSlice.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn get_mut(&mut self, namespace: &str, name: &str) -> Option<&mut ServiceEntry> {
        // A missing hash copies no path (the map looks before it copies); a name missing from
        // its hash's bucket (a collision) is rare enough that the copied path does not matter.
        let bucket = self.buckets.get_mut(&hash_of(namespace, name))?;
        let at = bucket.iter().position(|(k, _)| is(k, namespace, name))?;
        Some(&mut bucket[at].1)
    }

    fn insert(&mut self, key: ObjKey, entry: ServiceEntry) {
        let hash = hash_of(&key.namespace, &key.name);
        match self.buckets.get_mut(&hash) {
            Some(bucket) => bucket.push((key, entry)),
            None => _ = self.buckets.insert(hash, smallvec::smallvec![(key, entry)]),
        }
        self.len += 1;
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let hash = hash_of(namespace, name);
        let Some(bucket) = self.buckets.get_mut(&hash) else {
            return;
        };
        let before = bucket.len();
        bucket.retain(|(k, _)| !is(k, namespace, name));
        self.len -= before - bucket.len();
        if bucket.is_empty() {
            self.buckets.remove(&hash);
        }
    }

    /// Sets (or, with None, clears) the Service of key `key`.
    pub(super) fn set_service(&mut self, key: &ObjKey, service: Option<Arc<ServicePorts>>) {
        let (namespace, name) = (&*key.namespace, &*key.name);
        if let Some(entry) = self.get_mut(namespace, name) {
            entry.service = service;
            if entry.is_empty() {
                self.remove(namespace, name);
            } else {
                entry.resolve();
            }
            return;
        }
        if service.is_some() {
            let mut entry = ServiceEntry {
                service,
                ..ServiceEntry::default()
            };
            entry.resolve();
            self.insert(key.clone(), entry);
        }
    }

    /// Follows a change of EndpointSlice `key` from `old` to `new` (None: not there).
    pub(super) fn relink_slice(
        &mut self,
        key: &ObjKey,
        old: Option<&SliceEndpoints>,
        new: Option<&Arc<SliceEndpoints>>,
    ) {
        match (old, new) {
            // Still naming the same Service: replaced in place.
            (Some(old), Some(new)) if old.service == new.service => self.link_slice(key, new),
            _ => {
                if let Some(old) = old {
                    self.unlink_slice(key, old);
                }
                if let Some(new) = new {
                    self.link_slice(key, new);
                }
            }
        }
    }

    /// Adds EndpointSlice `key` to the entry of the Service it names, or replaces it there.
    fn link_slice(&mut self, key: &ObjKey, slice: &Arc<SliceEndpoints>) {
        let Some(service) = slice.service.as_deref() else {
            return;
        };
        let put = |entry: &mut ServiceEntry| {
            let slices = &mut entry.slices;
            match slices.binary_search_by(|(n, _)| (**n).cmp(&*key.name)) {
                Ok(at) => slices[at].1 = slice.clone(),
                Err(at) => slices.insert(at, (key.name.clone(), slice.clone())),
            }
            entry.resolve();
        };
        if let Some(entry) = self.get_mut(&key.namespace, service) {
            put(entry);
            return;
        }
        let mut entry = ServiceEntry::default();
        put(&mut entry);
        self.insert(ObjKey::new(key.namespace.clone(), service), entry);
    }

    /// Takes EndpointSlice `key`, as it was (`slice`), out of the entry of the Service it named.
    fn unlink_slice(&mut self, key: &ObjKey, slice: &SliceEndpoints) {
        let Some(service) = slice.service.as_deref() else {
            return;
        };
        let Some(entry) = self.get_mut(&key.namespace, service) else {
            return;
        };
        if let Ok(at) = (entry.slices).binary_search_by(|(n, _)| (**n).cmp(&*key.name)) {
            entry.slices.remove(at);
        }
        if entry.is_empty() {
            self.remove(&key.namespace, service);
        } else {
            entry.resolve();
        }
    }
}

#[cfg(test)]
#[path = "service_index_tests.rs"]
mod tests;
