//! Synthetic clusters for benchmarks and scale tests: a mix of IngressRoute roots with delegation
//! across namespaces, vertices, Ingresses, Services, EndpointSlices, TLS Secrets and unrelated
//! Secrets. Deterministic for a given size.

#[cfg(any(test, feature = "test-support"))]
pub mod pool;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Delegate;
use crate::api::heptio_v1beta1::{
    IngressRoute, IngressRouteSpec, Route, Service as IrService, Tls, VirtualHost,
};
use crate::store::{AnyObject, Snapshot};

/// Shape of a synthetic cluster.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Routing objects in all: 40% IngressRoute roots, 40% vertices (one per root), 20% Ingresses.
    /// Every tenth root serves HTTPS with its own TLS Secret.
    pub routing_objects: usize,
    /// Ready endpoints per Service.
    pub endpoints_per_service: usize,
    /// Secrets routing never uses.
    pub unrelated_secrets: usize,
}

/// A self-signed ECDSA P-256 certificate (`CN=synthetic.example.com`) and its key, made for this
/// file with openssl: throwaway test data that protects nothing. Every synthetic TLS Secret
/// holds them (the store checks that a key is its certificate's, so they must be a real pair).
const SYNTH_CERT_PEM: &str = "\
-----BEGIN CERTIFICATE-----
MIIBmDCCAT2gAwIBAgIUeJfYVSHswFKYWDo8CpCgnwrRHyQwCgYIKoZIzj0EAwIw
IDEeMBwGA1UEAwwVc3ludGhldGljLmV4YW1wbGUuY29tMCAXDTI2MTEyNjA0NDQ0
OFoYDzIxMjYxMTAyMDQ0NDQ4WjAgMR4wHAYDVQQDDBVzeW50aGV0aWMuZXhhbXBs
ZS5jb20wWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQYQDqEy66NGIMflchNpSz/
UojzzzJxrRbWn9heKx863ptg3EGLUGPLFQEABHaaeAOo3REJeTaV2TGLMNjTwFQG
o1MwUTAdBgNVHQ4EFgQUMBdIzwug7XMbCDNh7pr3ugzHV5AwHwYDVR0jBBgwFoAU
MBdIzwug7XMbCDNh7pr3ugzHV5AwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNJADBGAiEA5SMvRmW3CCziK1gmIVIavRQZ1WMxPdNa9ujt+nvGTQgCIQDZKcbk
SFBayHaahPFj1pNwfci/nYGtKYIxqX/TEwDivQ==
-----END CERTIFICATE-----
";
const SYNTH_KEY_PEM: &str = "\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOfF8X49UF2i6rBdo
LX4tGZXwzxBSnUOWyyl0bfLv7ZKhRANCAAQYQDqEy66NGIMflchNpSz/UojzzzJx
rRbWn9heKx863ptg3EGLUGPLFQEABHaaeAOo3REJeTaV2TGLMNjTwFQG
-----END PRIVATE KEY-----
";

/// A `kubernetes.io/tls` Secret holding [`SYNTH_CERT_PEM`] and [`SYNTH_KEY_PEM`].
pub(crate) fn tls_secret(ns: &str, name: &str) -> Secret {
    let mut data = BTreeMap::new();
    data.insert(
        "tls.crt".to_string(),
        ByteString(SYNTH_CERT_PEM.as_bytes().to_vec()),
    );
    data.insert(
        "tls.key".to_string(),
        ByteString(SYNTH_KEY_PEM.as_bytes().to_vec()),
    );
    Secret {
        metadata: meta(ns, name),
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    }
}

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(ns.to_string()),
        name: Some(name.to_string()),
        generation: Some(1),
        ..Default::default()
    }
}

fn service(ns: &str, name: &str) -> Service {
    Service {
        metadata: meta(ns, name),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                name: Some("http".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn slice(ns: &str, svc: &str, n: usize, seed: usize) -> EndpointSlice {
    let mut labels = BTreeMap::new();
    labels.insert(crate::dag::SERVICE_NAME_LABEL.to_string(), svc.to_string());
    EndpointSlice {
        metadata: ObjectMeta {
            labels: Some(labels),
            ..meta(ns, &format!("{svc}-abc"))
        },
        address_type: "IPv4".into(),
        endpoints: (0..n)
            .map(|i| Endpoint {
                addresses: vec![format!(
                    "10.{}.{}.{}",
                    (seed / 250) % 250,
                    seed % 250,
                    i % 250 + 1
                )],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            ..Default::default()
        }]),
    }
}

/// Builds a synthetic snapshot of the given shape.
pub fn snapshot(shape: Shape) -> Snapshot {
    Snapshot::from_objects(objects(shape))
}

/// The objects of a synthetic cluster of the given shape, as the sources decode them (whole
/// EndpointSlices, which the store reduces to what routing reads).
pub fn objects(shape: Shape) -> Vec<AnyObject> {
    let mut s: Vec<AnyObject> = Vec::new();
    let roots = shape.routing_objects * 2 / 5;
    let ingresses = shape.routing_objects - 2 * roots;
    for i in 0..roots {
        push_delegation(&mut s, shape, i);
    }
    for i in 0..ingresses {
        push_ingress(&mut s, shape, i);
    }
    for i in 0..shape.unrelated_secrets {
        s.push(AnyObject::Secret(Arc::new(unrelated_secret(i))));
    }
    s
}

/// Adds a Service `ns/name` and its EndpointSlice of the shape's endpoint count, whose
/// addresses `seed` picks.
fn push_service(s: &mut Vec<AnyObject>, shape: Shape, ns: &str, name: &str, seed: usize) {
    s.push(AnyObject::Service(Arc::new(service(ns, name))));
    s.push(AnyObject::EndpointSlice(Arc::new(slice(
        ns,
        name,
        shape.endpoints_per_service,
        seed,
    ))));
}

/// Adds root `i` (`team-{i % 100}/root-{i}`, host `host-{i}.example.com`, HTTPS with its own
/// Secret when `i` is a multiple of 10) delegating `/api` to vertex `i` (`app-{i % 100}`), each
/// with its Service.
fn push_delegation(s: &mut Vec<AnyObject>, shape: Shape, i: usize) {
    let root_ns = format!("team-{}", i % 100);
    let vertex_ns = format!("app-{}", i % 100);
    let root_svc = format!("root-svc-{i}");
    let vertex_svc = format!("vertex-svc-{i}");
    push_service(s, shape, &root_ns, &root_svc, 2 * i);
    push_service(s, shape, &vertex_ns, &vertex_svc, 2 * i + 1);
    let root = IngressRoute::new(
        &format!("root-{i}"),
        IngressRouteSpec {
            virtualhost: Some(VirtualHost {
                fqdn: format!("host-{i}.example.com"),
                tls: i.is_multiple_of(10).then(|| Tls {
                    secret_name: format!("tls-{i}"),
                    minimum_protocol_version: None,
                }),
            }),
            routes: vec![
                Route {
                    match_: "/".into(),
                    services: vec![IrService {
                        name: root_svc,
                        port: 80,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                Route {
                    match_: "/api".into(),
                    delegate: Some(Delegate {
                        name: format!("vertex-{i}"),
                        namespace: Some(vertex_ns.clone()),
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    );
    if i.is_multiple_of(10) {
        let name = format!("tls-{i}");
        s.push(AnyObject::Secret(Arc::new(tls_secret(&root_ns, &name))));
    }
    let mut root = root;
    root.metadata = meta(&root_ns, &format!("root-{i}"));
    s.push(AnyObject::IngressRouteV1beta1(Arc::new(root)));
    let mut vertex = IngressRoute::new(
        &format!("vertex-{i}"),
        IngressRouteSpec {
            routes: vec![Route {
                match_: "/api/v1".into(),
                services: vec![IrService {
                    name: vertex_svc,
                    port: 80,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    vertex.metadata = meta(&vertex_ns, &format!("vertex-{i}"));
    s.push(AnyObject::IngressRouteV1beta1(Arc::new(vertex)));
}

/// Adds Ingress `i` (`web-{i % 100}/web-{i}`, of sluice's default class by annotation) routing
/// host `web-{i}.example.com` to its own Service.
fn push_ingress(s: &mut Vec<AnyObject>, shape: Shape, i: usize) {
    let ns = format!("web-{}", i % 100);
    let svc = format!("web-svc-{i}");
    push_service(s, shape, &ns, &svc, 1_000_000 + i);
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "kubernetes.io/ingress.class".to_string(),
        crate::dag::DEFAULT_INGRESS_CLASS.to_string(),
    );
    let ing = Ingress {
        metadata: ObjectMeta {
            annotations: Some(annotations),
            ..meta(&ns, &format!("web-{i}"))
        },
        spec: Some(IngressSpec {
            rules: Some(vec![IngressRule {
                host: Some(format!("web-{i}.example.com")),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".into()),
                        path_type: "Prefix".into(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: svc,
                                port: Some(ServiceBackendPort {
                                    number: Some(80),
                                    ..Default::default()
                                }),
                            }),
                            ..Default::default()
                        },
                    }],
                }),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.push(AnyObject::Ingress(Arc::new(ing)));
}

/// Secret `i` that no route uses (`team-{i % 100}/unrelated-{i}`).
fn unrelated_secret(i: usize) -> Secret {
    let ns = format!("team-{}", i % 100);
    let mut data = BTreeMap::new();
    data.insert(
        "password".to_string(),
        ByteString(format!("secret-{i}").into_bytes()),
    );
    Secret {
        metadata: meta(&ns, &format!("unrelated-{i}")),
        data: Some(data),
        ..Default::default()
    }
}

/// Gateway API objects for a synthetic cluster of at least `routes` * 5 / 2 routing objects: a
/// GatewayClass of sluice's default controller, a Gateway `gateway-system/edge` with one HTTP
/// listener taking routes of every namespace, and `routes` HTTPRoutes, route `i` in the
/// namespace of root `i` (`team-{i % 100}`) on its own host `gw-{i}.example.com`, forwarding
/// to that root's Service.
pub fn gateway_api(routes: usize) -> Vec<AnyObject> {
    use gateway_api::apis::experimental::{gateways::Gateway, httproutes::HttpRoute};
    use gateway_api::apis::standard::gatewayclasses::GatewayClass;
    fn typed<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).expect("a synthetic Gateway API object"))
    }
    let mut s = vec![
        AnyObject::GatewayClass(typed::<GatewayClass>(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": crate::dag::DEFAULT_GATEWAY_CONTROLLER_NAME},
        }))),
        AnyObject::Gateway(typed::<Gateway>(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": "gateway-system"},
            "spec": {
                "gatewayClassName": "sluice",
                "listeners": [{"name": "http", "protocol": "HTTP", "port": 80,
                               "allowedRoutes": {"namespaces": {"from": "All"}}}],
            },
        }))),
    ];
    for i in 0..routes {
        s.push(AnyObject::HttpRoute(typed::<HttpRoute>(serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": format!("gw-route-{i}"), "namespace": format!("team-{}", i % 100)},
            "spec": {
                "parentRefs": [{"name": "edge", "namespace": "gateway-system"}],
                "hostnames": [format!("gw-{i}.example.com")],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": format!("root-svc-{i}"), "port": 80}],
                }],
            },
        }))));
    }
    s
}

/// Secure backends: Service `web/api` on port 443 behind a root IngressRoute v1 `web/root`, with
/// the CA Secret `web/api-ca` (docs/ingressroute.md, "Secure backends"). Test input for the
/// layers that build, translate and report it.
#[cfg(any(test, feature = "test-support"))]
pub mod secure_backends {
    /// A CA certificate's PEM (self-signed, as a CA's own certificate is).
    pub fn ca_pem(cn: &str) -> String {
        rcgen::generate_simple_self_signed(vec![cn.to_string()])
            .unwrap()
            .cert
            .pem()
    }

    /// Service `web/api` (port 443) with one endpoint, Secret `web/api-ca` holding `ca`, and a
    /// root IngressRoute v1 `web/root` whose one route has these backends (YAML flow mappings).
    pub fn manifests(backends: &[&str], ca: &str) -> String {
        let ca = ca.replace('\n', "\\n");
        format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: web}}
spec: {{ports: [{{name: https, port: 443}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: api-1, namespace: web, labels: {{kubernetes.io/service-name: api}}}}
addressType: IPv4
ports: [{{name: https, port: 8443}}]
endpoints: [{{addresses: [10.0.0.1], conditions: {{ready: true}}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: api-ca, namespace: web}}
type: kubernetes.io/tls
stringData: {{ca.crt: "{ca}", tls.crt: "", tls.key: ""}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: web}}
spec:
  virtualhost: {{fqdn: api.example.com}}
  routes:
  - services: [{}]
"#,
            backends.join(", ")
        )
    }

    /// A backend verified with the CA of Secret `web/api-ca` (subject name in other letter case).
    pub const VERIFIED: &str =
        "{https: api, port: 443, validation: {caSecret: api-ca, subjectName: API.example.com}}";
    /// A TLS backend without validation.
    pub const UNVERIFIED: &str = "{https: api, port: 443}";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::{self, State};

    #[test]
    fn a_delegation_is_two_services_two_routes_and_a_secret_every_tenth() {
        let shape = Shape {
            routing_objects: 0,
            endpoints_per_service: 3,
            unrelated_secrets: 0,
        };
        let kinds = |i: usize| {
            let mut s = Vec::new();
            push_delegation(&mut s, shape, i);
            s.iter()
                .map(|o| o.object_ref().kind.kind())
                .collect::<Vec<_>>()
        };
        let pair = ["Service", "EndpointSlice", "Service", "EndpointSlice"];
        let routes = ["IngressRoute", "IngressRoute"];
        assert_eq!(kinds(10), [&pair[..], &["Secret"], &routes].concat());
        assert_eq!(kinds(11), [&pair[..], &routes].concat());
        assert_eq!(
            unrelated_secret(7).metadata.name.as_deref(),
            Some("unrelated-7")
        );
    }

    #[test]
    fn every_object_routes_and_every_tenth_root_serves_https() {
        let s = snapshot(Shape {
            routing_objects: 100,
            endpoints_per_service: 2,
            unrelated_secrets: 10,
        });
        let built = dag::build(&s, &dag::Options::default());
        let not_valid: Vec<_> = built
            .statuses
            .iter()
            .filter(|(_, st)| st.state != State::Valid)
            .collect();
        assert!(not_valid.is_empty(), "{not_valid:?}");
        assert_eq!(built.statuses.len(), 100);
        let tls: Vec<&str> = built
            .vhosts
            .values()
            .filter(|v| v.tls.is_some())
            .map(|v| v.host.as_str())
            .collect();
        assert_eq!(tls.len(), 4, "{tls:?}"); // roots 0, 10, 20, 30 of 40
        assert_eq!(built.secrets.len(), 4);
        let endpoints: usize = built.clusters.values().map(|c| c.endpoints.len()).sum();
        assert_eq!(endpoints, 2 * built.clusters.len());
    }

    #[test]
    fn every_synthetic_httproute_is_served_on_its_own_host() {
        let mut s = snapshot(Shape {
            routing_objects: 100,
            endpoints_per_service: 2,
            unrelated_secrets: 0,
        });
        for o in gateway_api(10) {
            s.insert(o);
        }
        let built = dag::build(&s, &dag::Options::default());
        let gateway_api: Vec<_> = (built.statuses.iter())
            .filter(|(o, _)| {
                use crate::api::Kind;
                matches!(o.kind, Kind::GatewayClass | Kind::Gateway | Kind::HttpRoute)
            })
            .collect();
        assert_eq!(gateway_api.len(), 12, "{gateway_api:?}");
        assert!(
            gateway_api.iter().all(|(_, st)| st.state == State::Valid),
            "{gateway_api:?}"
        );
        for i in 0..10 {
            let v = &built.vhosts[&format!("gw-{i}.example.com")];
            assert_eq!(v.routes.len(), 1);
        }
    }
}
