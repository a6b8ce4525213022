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
//! A persistent hash map, like the store's other maps: a snapshot's clone shares it, and a
//! change copies the path to one entry.

use std::sync::Arc;

use smallvec::SmallVec;

use super::endpoints::{Endpoints, slice_endpoints};
use super::{ServicePorts, SliceEndpoints};
use crate::api::{KeyParts, ObjKey};
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
/// (a snapshot's clone shares it), searched with borrowed names ([`KeyParts`]).
#[derive(Clone, Debug, Default)]
pub struct ServiceIndex(OrdMap<ObjKey, ServiceEntry>);

impl ServiceIndex {
    /// The entry of Service `name` in `namespace`, with its key.
    pub fn get(&self, namespace: &str, name: &str) -> Option<(&ObjKey, &ServiceEntry)> {
        self.0.get_key_value(&(namespace, name) as &dyn KeyParts)
    }

    /// The number of Service names with a Service or an EndpointSlice.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets (or, with None, clears) the Service of key `key`.
    pub(super) fn set_service(&mut self, key: &ObjKey, service: Option<Arc<ServicePorts>>) {
        let name: &dyn KeyParts = key;
        if let Some(entry) = self.0.get_mut(name) {
            entry.service = service;
            if entry.is_empty() {
                self.0.remove(name);
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
            self.0.insert(key.clone(), entry);
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
        let parts = (&*key.namespace, service);
        let name: &dyn KeyParts = &parts;
        let put = |entry: &mut ServiceEntry| {
            let slices = &mut entry.slices;
            match slices.binary_search_by(|(n, _)| (**n).cmp(&*key.name)) {
                Ok(at) => slices[at].1 = slice.clone(),
                Err(at) => slices.insert(at, (key.name.clone(), slice.clone())),
            }
            entry.resolve();
        };
        if let Some(entry) = self.0.get_mut(name) {
            put(entry);
            return;
        }
        let mut entry = ServiceEntry::default();
        put(&mut entry);
        self.0
            .insert(ObjKey::new(key.namespace.clone(), service), entry);
    }

    /// Takes EndpointSlice `key`, as it was (`slice`), out of the entry of the Service it named.
    fn unlink_slice(&mut self, key: &ObjKey, slice: &SliceEndpoints) {
        let Some(service) = slice.service.as_deref() else {
            return;
        };
        let parts = (&*key.namespace, service);
        let name: &dyn KeyParts = &parts;
        let Some(entry) = self.0.get_mut(name) else {
            return;
        };
        if let Ok(at) = (entry.slices).binary_search_by(|(n, _)| (**n).cmp(&*key.name)) {
            entry.slices.remove(at);
        }
        if entry.is_empty() {
            self.0.remove(name);
        } else {
            entry.resolve();
        }
    }
}

#[cfg(test)]
#[path = "service_index_tests.rs"]
mod tests;
