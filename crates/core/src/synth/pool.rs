//! Every object of the golden DAG cases (tests/golden/dag), with EndpointSlices for their
//! Services: the pool randomized tests draw snapshots from.

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::api::Kind;
use crate::manifest::{Document, parse_documents};
use crate::store::AnyObject;

/// Every object of the golden DAG cases: roots, vertices, delegation chains and cycles in both
/// IngressRoute versions, Routes, Ingresses of several classes, TLS, fqdn and path conflicts. The
/// cases reuse names and hosts, so objects of different cases meet, conflict and delegate to each
/// other when they share a snapshot.
pub fn pool() -> Vec<AnyObject> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/dag");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "golden cases in {dir:?}");
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // One document at a time: the `kind: GoldenCase` document is not an object.
        for part in text.split("\n---\n") {
            for (_, doc) in parse_documents(&f.to_string_lossy(), part).unwrap_or_default() {
                if let Document::Object(o) = doc {
                    out.push(o);
                }
            }
        }
    }
    // EndpointSlices for the Services: two versions of each (other addresses, one unready).
    let mut slices = Vec::new();
    for o in &out {
        let AnyObject::Service(svc) = o else { continue };
        for version in 0..2 {
            slices.push(AnyObject::EndpointSlice(Arc::new(slice_for(svc, version))));
        }
    }
    out.extend(slices);
    out
}

fn slice_for(svc: &k8s_openapi::api::core::v1::Service, version: u8) -> EndpointSlice {
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    let name = svc.metadata.name.clone().unwrap_or_default();
    let ports = svc
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| EndpointPort {
            name: p.name.clone(),
            port: Some(8000 + p.port % 1000),
            ..Default::default()
        })
        .collect();
    let endpoint = |ip: String, ready: bool| Endpoint {
        addresses: vec![ip],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..Default::default()
        }),
        ..Default::default()
    };
    EndpointSlice {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(format!("{name}-abc")),
            namespace: svc.metadata.namespace.clone(),
            labels: Some([(crate::dag::SERVICE_NAME_LABEL.to_string(), name)].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: vec![
            endpoint(format!("10.0.{version}.1"), true),
            endpoint(format!("10.0.{version}.2"), version == 0),
        ],
        ports: Some(ports),
    }
}

/// Whether the object is of a kind sluice routes by itself (Ingress, IngressRoute, Route).
pub fn is_routing(o: &AnyObject) -> bool {
    matches!(
        o.object_ref().kind,
        Kind::Ingress | Kind::IngressRouteV1beta1 | Kind::IngressRouteV1 | Kind::RouteV1alpha1
    )
}
