//! Which EndpointSlices belong to each Service (their `kubernetes.io/service-name` label), kept
//! from build to build by the incremental builder.
//!
//! A partial build resolves a backend by finding its Service's EndpointSlices. The store keeps
//! slices by namespace and name, and a slice's Service is a label, so without this index each
//! backend cost a pass over every slice of its namespace (thousands in a large namespace, each a
//! pointer to follow). The index follows the store's slices through the persistent map's diff,
//! which costs the slices that changed since it last looked.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::ObjKey;
use crate::store::{Objects, SliceEndpoints, each_change};

/// The slices of each Service, by namespace and Service name, as of one version of the store's
/// slices.
#[derive(Default)]
pub(super) struct SliceIndex {
    /// The version of the store's slices this index describes.
    slices: Objects<SliceEndpoints>,
    /// Sorted keys; most Services have one slice or a few.
    by_service: HashMap<Arc<str>, HashMap<Box<str>, Vec<ObjKey>>>,
}

impl SliceIndex {
    /// Makes the index describe `slices` (a later version of the store's slices, usually).
    pub(super) fn follow(&mut self, slices: &Objects<SliceEndpoints>) {
        let by_service = &mut self.by_service;
        each_change(&self.slices, slices, |key, old, new| {
            if let Some(service) = old.and_then(|s| s.service.as_deref()) {
                let services = by_service.get_mut(&key.namespace);
                if let Some(services) = services {
                    if let Some(keys) = services.get_mut(service) {
                        if let Ok(i) = keys.binary_search(key) {
                            keys.remove(i);
                        }
                        if keys.is_empty() {
                            services.remove(service);
                        }
                    }
                    if services.is_empty() {
                        by_service.remove(&key.namespace);
                    }
                }
            }
            if let Some(service) = new.and_then(|s| s.service.as_deref()) {
                let keys = by_service
                    .entry(key.namespace.clone())
                    .or_default()
                    .entry(service.into())
                    .or_default();
                if let Err(i) = keys.binary_search(key) {
                    keys.insert(i, key.clone());
                }
            }
        });
        self.slices = slices.clone();
    }

    /// The keys of the slices of Service `service` in `namespace`, in key order.
    pub(super) fn of_service<'s>(
        &'s self,
        namespace: &str,
        service: &str,
    ) -> impl Iterator<Item = &'s ObjKey> + 's {
        self.by_service
            .get(namespace)
            .and_then(|services| services.get(service))
            .into_iter()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    fn slice(service: Option<&str>) -> Arc<SliceEndpoints> {
        Arc::new(SliceEndpoints {
            service: service.map(Into::into),
            ports: Box::new([]),
            ready: Default::default(),
        })
    }

    /// The index of `slices` made by looking at every slice.
    fn scanned(slices: &Objects<SliceEndpoints>) -> Vec<(String, String, Vec<ObjKey>)> {
        let mut out: std::collections::BTreeMap<(String, String), Vec<ObjKey>> = Default::default();
        for (k, s) in slices {
            if let Some(svc) = &s.service {
                out.entry((k.namespace.to_string(), svc.to_string()))
                    .or_default()
                    .push(k.clone());
            }
        }
        out.into_iter()
            .map(|((ns, s), keys)| (ns, s, keys))
            .collect()
    }

    fn listed(index: &SliceIndex) -> Vec<(String, String, Vec<ObjKey>)> {
        let mut out = Vec::new();
        for (ns, services) in &index.by_service {
            for (svc, keys) in services {
                assert!(!keys.is_empty(), "{ns}/{svc}: an empty entry is kept");
                out.push((ns.to_string(), svc.to_string(), keys.to_vec()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_index_follows_slices_added_removed_and_relabelled() {
        let mut rng = Rng::new(17);
        let mut slices: Objects<SliceEndpoints> = Default::default();
        let mut index = SliceIndex::default();
        for step in 0..400 {
            // A few changes at a time, between versions the index looks at.
            for _ in 0..1 + rng.below(3) {
                let key = ObjKey::new(format!("ns{}", rng.below(3)), format!("s{}", rng.below(12)));
                match rng.below(4) {
                    0 => {
                        slices.remove(&key);
                    }
                    1 => {
                        slices.insert(key, slice(None));
                    }
                    _ => {
                        let service = format!("svc{}", rng.below(4));
                        slices.insert(key, slice(Some(&service)));
                    }
                }
            }
            if rng.chance(70) {
                index.follow(&slices);
                assert_eq!(listed(&index), scanned(&slices), "step {step}");
                for (ns, svc, keys) in scanned(&slices) {
                    let found: Vec<&ObjKey> = index.of_service(&ns, &svc).collect();
                    assert_eq!(found, keys.iter().collect::<Vec<_>>(), "step {step}");
                }
                assert_eq!(index.of_service("ns0", "absent").count(), 0);
            }
        }
    }
}
