//! Services and their EndpointSlices by namespace and Service name: what resolving a backend
//! looks up. A one-thread build indexes the whole snapshot up front, a partial build what its
//! backends name (see `Builder::partial`), and the two halves of a parallel build share one
//! [`ServiceIndex`] made for both.

use std::ops::Bound;

use hashbrown::HashMap;

use crate::api::ObjKey;
use crate::store::{ServicePorts, SliceEndpoints, Snapshot};

/// The EndpointSlices of one Service, in snapshot order (almost always exactly one).
#[derive(Default)]
pub(super) enum Slices<'a> {
    #[default]
    None,
    One(&'a SliceEndpoints),
    Many(Vec<&'a SliceEndpoints>),
}

impl<'a> Slices<'a> {
    pub(super) fn as_slice(&self) -> &[&'a SliceEndpoints] {
        match self {
            Slices::None => &[],
            Slices::One(s) => std::slice::from_ref(s),
            Slices::Many(v) => v,
        }
    }

    fn push(&mut self, slice: &'a SliceEndpoints) {
        match self {
            Slices::None => *self = Slices::One(slice),
            Slices::One(first) => *self = Slices::Many(vec![*first, slice]),
            Slices::Many(v) => v.push(slice),
        }
    }
}

/// What a build knows of one Service name: the Service, when there is one (with its key in the
/// snapshot: a cluster names its Service with a copy of it), and the EndpointSlices naming it.
/// One entry for both, so resolving a backend costs one hash-table probe, not two (at 10k
/// Services each probe is a cache miss).
#[derive(Default)]
pub(super) struct ServiceEntry<'a> {
    pub(super) service: Option<(&'a ObjKey, &'a ServicePorts)>,
    pub(super) slices: Slices<'a>,
}

/// Services and their EndpointSlices by namespace and Service name.
pub(super) type ServiceMap<'a> = HashMap<(&'a str, &'a str), ServiceEntry<'a>>;

pub(super) fn add_service<'a>(map: &mut ServiceMap<'a>, key: &'a ObjKey, svc: &'a ServicePorts) {
    map.entry((key.namespace.as_ref(), key.name.as_ref()))
        .or_default()
        .service = Some((key, svc));
}

/// Adds an EndpointSlice to its Service's entry; a slice that names no Service is left out.
pub(super) fn add_slice<'a>(map: &mut ServiceMap<'a>, key: &'a ObjKey, slice: &'a SliceEndpoints) {
    let Some(svc) = slice.service.as_deref() else {
        return;
    };
    map.entry((key.namespace.as_ref(), svc))
        .or_default()
        .slices
        .push(slice);
}

/// Every Service and EndpointSlice of `snapshot` whose key is in `range`, a namespace at a time:
/// its Services, then its EndpointSlices, which find their Services' entries (and names) still
/// in the CPU's caches. All Services first, then all slices, read each Service's entry and name
/// from memory a second time.
fn index_range<'a>(
    snapshot: &'a Snapshot,
    range: (Bound<&ObjKey>, Bound<&ObjKey>),
    capacity: usize,
) -> ServiceMap<'a> {
    let mut map = ServiceMap::with_capacity(capacity);
    let mut services = snapshot.services.range::<_, ObjKey>(range).peekable();
    let mut slices = snapshot
        .endpoint_slices
        .range::<_, ObjKey>(range)
        .peekable();
    loop {
        // The first namespace either kind has left (both are in key order).
        let namespace = match (services.peek(), slices.peek()) {
            (None, None) => break,
            (Some((k, _)), None) | (None, Some((k, _))) => k.namespace.clone(),
            (Some((a, _)), Some((b, _))) => a.namespace.clone().min(b.namespace.clone()),
        };
        while let Some((k, svc)) = services.next_if(|(k, _)| k.namespace == namespace) {
            add_service(&mut map, k, svc);
        }
        while let Some((k, slice)) = slices.next_if(|(k, _)| k.namespace == namespace) {
            add_slice(&mut map, k, slice);
        }
    }
    map
}

/// Every Service and EndpointSlice of `snapshot` (a one-thread build's index).
pub(super) fn index_all(snapshot: &Snapshot) -> ServiceMap<'_> {
    index_range(
        snapshot,
        (Bound::Unbounded, Bound::Unbounded),
        snapshot.services.len(),
    )
}

/// Every Service and EndpointSlice of a snapshot, indexed once for both halves of a parallel
/// build: in two parts split by namespace (a slice is always in its Service's namespace), each
/// made on a thread of its own. Left to index what their backends name, as partial builds do,
/// both halves would index nearly every namespace of a large cluster: the same work twice.
pub(super) struct ServiceIndex<'a> {
    /// Namespaces from this one on are in `parts[1]`, those before it in `parts[0]`; None: all
    /// are in `parts[0]`.
    split: Option<ObjKey>,
    parts: [ServiceMap<'a>; 2],
}

impl<'a> ServiceIndex<'a> {
    pub(super) fn new(snapshot: &'a Snapshot) -> Self {
        use Bound::{Excluded, Included, Unbounded};
        let services = snapshot.services.len();
        // The first key of the namespace of the middle Service: Services in key order are
        // grouped by namespace.
        let split = (snapshot.services.iter().nth(services / 2))
            .map(|(k, _)| ObjKey::new(k.namespace.clone(), ""));
        let Some(at) = &split else {
            let all = index_all(snapshot);
            return ServiceIndex {
                split,
                parts: [all, ServiceMap::new()],
            };
        };
        let capacity = services / 2 + 1;
        let parts = std::thread::scope(|scope| {
            let second = scope.spawn(|| index_range(snapshot, (Included(at), Unbounded), capacity));
            let first = index_range(snapshot, (Unbounded, Excluded(at)), capacity);
            let second = second
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            [first, second]
        });
        ServiceIndex { split, parts }
    }

    /// The entry of Service `service` in `namespace`.
    pub(super) fn get<'s>(
        &'s self,
        namespace: &'s str,
        service: &'s str,
    ) -> Option<&'s ServiceEntry<'s>> {
        let second = self
            .split
            .as_ref()
            .is_some_and(|at| namespace >= &*at.namespace);
        let part: &'s ServiceMap<'s> = &self.parts[usize::from(second)];
        part.get(&(namespace, service))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn slice(service: &str, addr: &str) -> Arc<SliceEndpoints> {
        Arc::new(SliceEndpoints {
            service: Some(service.into()),
            ports: Box::new([]),
            ready: [addr.parse::<std::net::IpAddr>().expect("an address")].into(),
        })
    }

    /// The same Service and the same slices, in the same order.
    fn assert_same_entry(got: &ServiceEntry<'_>, want: &ServiceEntry<'_>, what: &str) {
        assert_eq!(
            got.service.map(|(k, s)| (k, s as *const ServicePorts)),
            want.service.map(|(k, s)| (k, s as *const ServicePorts)),
            "{what}"
        );
        let ptrs = |s: &Slices<'_>| -> Vec<*const SliceEndpoints> {
            s.as_slice().iter().map(|s| *s as *const _).collect()
        };
        assert_eq!(ptrs(&got.slices), ptrs(&want.slices), "{what}");
    }

    #[test]
    fn both_parts_together_find_what_one_map_of_everything_finds() {
        let mut snapshot = Snapshot::default();
        let names = ["a", "b", "b-1", "c", "c", "z"];
        for (i, ns) in names.iter().enumerate() {
            let svc = format!("svc-{i}");
            let key = ObjKey::new(*ns, svc.as_str());
            snapshot
                .services
                .insert(key, Arc::new(ServicePorts::default()));
            for j in 0..(i % 3) {
                snapshot.endpoint_slices.insert(
                    ObjKey::new(*ns, format!("{svc}-{j}")),
                    slice(&svc, &format!("10.0.{i}.{j}")),
                );
            }
        }
        // A slice of a Service that does not exist, and one in a namespace with no Services.
        (snapshot.endpoint_slices).insert(ObjKey::new("c", "lost-0"), slice("lost", "10.1.0.1"));
        (snapshot.endpoint_slices).insert(ObjKey::new("y", "gone-0"), slice("gone", "10.1.0.2"));
        // A namespace of slices alone before every namespace of Services.
        (snapshot.endpoint_slices).insert(ObjKey::new("0", "early-0"), slice("a", "10.1.0.3"));
        let index = ServiceIndex::new(&snapshot);
        assert!(index.split.is_some());
        assert!(!index.parts[0].is_empty() && !index.parts[1].is_empty());
        let whole = index_all(&snapshot);
        assert_eq!(index.parts[0].len() + index.parts[1].len(), whole.len());
        // The index made a namespace at a time holds what every Service, then every slice,
        // added one by one make.
        let mut reference = ServiceMap::new();
        for (k, svc) in &snapshot.services {
            add_service(&mut reference, k, svc);
        }
        for (k, s) in &snapshot.endpoint_slices {
            add_slice(&mut reference, k, s);
        }
        assert_eq!(reference.len(), whole.len());
        for ((ns, svc), entry) in &reference {
            let got = whole.get(&(*ns, *svc)).expect("indexed");
            assert_same_entry(got, entry, &format!("{ns}/{svc}"));
        }
        for ((ns, svc), entry) in &whole {
            assert_same_entry(
                index.get(ns, svc).expect("indexed"),
                entry,
                &format!("{ns}/{svc}"),
            );
        }
        assert!(index.get("c", "no-such-service").is_none());
        assert!(index.get("zz", "svc-5").is_none());
    }

    #[test]
    fn a_snapshot_without_services_still_finds_its_slices() {
        let mut snapshot = Snapshot::default();
        (snapshot.endpoint_slices).insert(ObjKey::new("a", "s-0"), slice("s", "10.0.0.1"));
        let index = ServiceIndex::new(&snapshot);
        let entry = index.get("a", "s").expect("indexed");
        assert!(entry.service.is_none());
        assert_eq!(entry.slices.as_slice().len(), 1);
    }
}
