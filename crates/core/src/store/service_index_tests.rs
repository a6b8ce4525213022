use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::super::{ServicePortRef, ServicePorts, SliceEndpoints, Snapshot};
use super::PortEndpoints;
use crate::api::ObjKey;
use crate::store::slice_endpoints;
use crate::test_rng::Rng;

fn slice(service: Option<&str>, address: u8) -> Arc<SliceEndpoints> {
    Arc::new(SliceEndpoints {
        service: service.map(Into::into),
        // An unnamed port and a named one, as a Service's ports name them.
        ports: Box::new([("".into(), Some(80)), ("http".into(), Some(8080))]),
        ready: [IpAddr::from([10, 0, 0, address])].into(),
    })
}

/// What the index should hold, worked out from the store's maps alone: by namespace and Service
/// name, the Service and the slices naming it in key order.
type Expected = BTreeMap<(String, String), (Option<Arc<ServicePorts>>, Vec<Arc<SliceEndpoints>>)>;

fn expected(s: &Snapshot) -> Expected {
    let mut want = Expected::new();
    for (k, svc) in s.services() {
        let at = (k.namespace.to_string(), k.name.to_string());
        want.entry(at).or_default().0 = Some(svc.clone());
    }
    for (k, slice) in s.endpoint_slices() {
        if let Some(service) = slice.service.as_deref() {
            let at = (k.namespace.to_string(), service.to_string());
            want.entry(at).or_default().1.push(slice.clone());
        }
    }
    want
}

fn assert_index_matches(s: &Snapshot, what: &str) {
    let want = expected(s);
    assert_eq!(s.service_index().len(), want.len(), "{what}");
    for ((ns, name), (service, slices)) in &want {
        let (key, entry) = (s.service_index().get(ns, name))
            .unwrap_or_else(|| panic!("{what}: {ns}/{name} not found"));
        assert_eq!((&*key.namespace, &*key.name), (&**ns, &**name), "{what}");
        assert_eq!(&entry.service, service, "{what}: {ns}/{name}");
        let got: Vec<&SliceEndpoints> = entry.slices().collect();
        let want: Vec<&SliceEndpoints> = slices.iter().map(|s| &**s).collect();
        assert_eq!(got, want, "{what}: {ns}/{name}");
        // Each port's endpoints, as a build would work them out from the Service and slices.
        let external = service.as_ref().is_some_and(|s| s.external_name);
        let ports: Vec<PortEndpoints> = match service {
            Some(svc) if !external => (svc.ports.iter())
                .map(|p| PortEndpoints {
                    port: p.port,
                    endpoints: slice_endpoints(want.iter().copied(), p.slice_port_name()),
                })
                .collect(),
            _ => Vec::new(),
        };
        assert_eq!(entry.ports(), &ports[..], "{what}: {ns}/{name}");
        assert_eq!(entry.is_external_name(), external, "{what}: {ns}/{name}");
    }
    assert!(s.service_index().get("none", "none").is_none(), "{what}");
}

#[test]
fn the_index_follows_every_change_of_services_and_slices() {
    // Few names, so that Services and slices come and go under names already used, slices move
    // between Services, and entries empty and fill again.
    let namespaces = ["a", "b"];
    let services = ["s0", "s1", "s2"];
    let slices = ["x", "y", "z"];
    for seed in 0..40 {
        let mut rng = Rng::new(seed);
        let mut s = Snapshot::default();
        let mut earlier = Vec::new();
        for step in 0..60 {
            let ns = namespaces[rng.below(namespaces.len())];
            let what = format!("seed {seed}, step {step}");
            match rng.below(5) {
                0 | 1 => {
                    let name = slices[rng.below(slices.len())];
                    let service = (!rng.chance(15)).then(|| services[rng.below(services.len())]);
                    let address = rng.below(250) as u8;
                    s.put_endpoint_slice(ObjKey::new(ns, name), slice(service, address));
                }
                2 => {
                    let name = slices[rng.below(slices.len())];
                    s.remove_endpoint_slice(&ObjKey::new(ns, name));
                }
                3 => {
                    let name = services[rng.below(services.len())];
                    let port = |name: Option<&str>, port| ServicePortRef {
                        name: name.map(Into::into),
                        port,
                        app_protocol: Default::default(),
                    };
                    let ports = ServicePorts {
                        external_name: rng.chance(20),
                        ports: match rng.below(3) {
                            0 => Box::new([]),
                            1 => Box::new([port(None, 80)]),
                            _ => Box::new([port(Some("http"), 8080), port(Some("metrics"), 9090)]),
                        },
                    };
                    s.put_service(ObjKey::new(ns, name), Arc::new(ports));
                }
                _ => {
                    let name = services[rng.below(services.len())];
                    s.remove_service(&ObjKey::new(ns, name));
                }
            }
            assert_index_matches(&s, &what);
            // Earlier snapshots share the index's structure and keep what they held.
            earlier.push((what, s.clone()));
        }
        for (what, snapshot) in &earlier {
            assert_index_matches(snapshot, what);
        }
    }
}

#[test]
fn a_slice_before_its_service_and_a_service_without_slices_have_entries() {
    let mut s = Snapshot::default();
    s.put_endpoint_slice(ObjKey::new("ns", "web-1"), slice(Some("web"), 1));
    let (key, entry) = s
        .service_index()
        .get("ns", "web")
        .expect("the slice's entry");
    assert_eq!(key, &ObjKey::new("ns", "web"));
    assert!(entry.service.is_none());
    assert_eq!(entry.slices().count(), 1);
    s.put_service(ObjKey::new("ns", "web"), Arc::default());
    s.put_service(ObjKey::new("ns", "db"), Arc::default());
    let entry = |n: &str| s.service_index().get("ns", n).map(|(_, e)| e.clone());
    assert!(entry("web").is_some_and(|e| e.service.is_some() && e.slices().count() == 1));
    assert!(entry("db").is_some_and(|e| e.service.is_some() && e.slices().count() == 0));
    // Neither left: no entry.
    s.remove_service(&ObjKey::new("ns", "web"));
    s.remove_endpoint_slice(&ObjKey::new("ns", "web-1"));
    assert!(s.service_index().get("ns", "web").is_none());
    assert_eq!(s.service_index().len(), 1);
}
