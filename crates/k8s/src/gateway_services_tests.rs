//! What [`desired`] keeps for each Gateway.

use super::*;
use sluice_core::dag::{Options, build};
use sluice_core::manifest::{Document, parse_documents};

const CLASSES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
";

fn gateway(name: &str, class: &str, extra: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: infra, uid: uid-{name}}}
spec:
  gatewayClassName: {class}
{extra}  listeners:
  - {{name: http, protocol: HTTP, port: 9080}}
  - {{name: http2, protocol: HTTP, port: 9080, hostname: a.example.com}}
  - {{name: dns, protocol: UDP, port: 53}}
"
    )
}

fn desired_of(docs: &[String], pool: Option<&str>) -> BTreeMap<ObjKey, GatewayObjects> {
    let yaml = docs.join("---\n");
    let parsed = parse_documents("test.yaml", &yaml).expect("test input parses");
    let snapshot = Snapshot::from_objects(parsed.into_iter().map(|(_, d)| match d {
        Document::Object(o) => o,
        other => panic!("unexpected document {other:?}"),
    }));
    let options = Options {
        gateway_addresses: pool.map(|p| p.parse().unwrap()),
        ..Options::default()
    };
    desired(&snapshot, &build(&snapshot, &options))
}

#[test]
fn an_accepted_gateway_gets_a_headless_service_with_its_infrastructure_metadata() {
    let infra = "  infrastructure:\n    labels: {team: edge}\n    annotations: {example.com/lb: internal}\n";
    let got = desired_of(
        &[
            CLASSES.into(),
            gateway("web", "sluice", infra),
            gateway("theirs", "other", ""),
        ],
        None,
    );
    assert_eq!(
        got.keys().map(ToString::to_string).collect::<Vec<_>>(),
        ["infra/sluice-web"],
        "only sluice's Gateways"
    );
    let objects = &got[&ObjKey::new("infra", "sluice-web")];
    let meta = &objects.service.metadata;
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(labels[GATEWAY_NAME_LABEL], "web");
    assert_eq!(labels["team"], "edge");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "sluice");
    assert_eq!(
        meta.annotations.as_ref().unwrap()["example.com/lb"],
        "internal"
    );
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Gateway", "web", "uid-web")
    );
    let spec = objects.service.spec.as_ref().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.selector, None);
    let ports: Vec<_> = (spec.ports.iter().flatten())
        .map(|p| (p.name.clone().unwrap(), p.port, p.protocol.clone().unwrap()))
        .collect();
    assert_eq!(
        ports,
        [
            ("udp-53".to_string(), 53, "UDP".to_string()),
            ("tcp-9080".to_string(), 9080, "TCP".to_string())
        ],
        "one port per listener port and protocol"
    );
    assert_eq!(objects.slice, None, "no address of its own");
}

#[test]
fn a_gateway_with_its_own_address_gets_an_endpoint_slice_unless_the_api_server_refuses_it() {
    let got = desired_of(
        &[CLASSES.into(), gateway("web", "sluice", "")],
        Some("192.0.2.0/28"),
    );
    let objects = got
        .get(&ObjKey::new("infra", "sluice-web"))
        .expect("the Service");
    let slice = objects.slice.as_ref().expect("an EndpointSlice");
    assert_eq!(slice.address_type, "IPv4");
    let labels = slice.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kubernetes.io/service-name"], "sluice-web");
    let address = &slice.endpoints[0].addresses[0];
    assert!(address.starts_with("192.0.2."), "{address}");

    let loopback = desired_of(
        &[CLASSES.into(), gateway("web", "sluice", "")],
        Some("127.0.1.0/24"),
    );
    assert_eq!(loopback[&ObjKey::new("infra", "sluice-web")].slice, None);
}

#[test]
fn a_gateway_that_is_not_accepted_gets_nothing() {
    let bad = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bad, namespace: infra, uid: uid-bad}
spec:
  gatewayClassName: sluice
  listeners: [{name: x, protocol: INVALID, port: 1111}]
";
    assert!(desired_of(&[CLASSES.into(), bad.into()], None).is_empty());
}

#[test]
fn service_names_are_dns_labels_and_never_shared() {
    assert_eq!(service_name("web"), "sluice-web");
    let dotted = service_name("a.b");
    assert!(
        dotted.starts_with("sluice-a-b-") && dotted.len() == 19,
        "{dotted}"
    );
    assert_ne!(dotted, service_name("a-b"));
    let long = service_name(&"x".repeat(253));
    assert_eq!(long.len(), 63);
    assert_ne!(long, service_name(&"x".repeat(252)));
    assert!(!long.contains("--"));
}

#[test]
fn the_gateway_class_lists_infrastructure_propagation_only_with_gateway_services() {
    let with = |gateway_services| {
        sluice_core::dag::gateway::supported_features(&Options {
            gateway_services,
            ..Options::default()
        })
        .contains(&"GatewayInfrastructurePropagation")
    };
    assert!(with(true));
    assert!(!with(false));
}
