//! The synthetic cluster the benchmark creates: its namespaces, routes, Ingresses and Secrets,
//! and the wait for the routes' statuses.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use sluice::api::heptio_v1beta1::IngressRoute;

use crate::common::apiserver::{obj, wait_until};

const LABEL: &str = "sluice-bench";

pub fn namespace_of(i: usize) -> String {
    format!("bench-{}-{}", std::process::id(), i % 20)
}

fn route(ns: &str, name: &str, host: &str, svc: &str, phase: &str) -> IngressRoute {
    obj(serde_json::json!({
        "apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
        "metadata": {"name": name, "namespace": ns, "labels": {LABEL: phase}},
        "spec": {
            "virtualhost": {"fqdn": host},
            "routes": [
                {"match": "/", "services": [{"name": svc, "port": 80}]},
                {"match": "/api", "services": [{"name": svc, "port": 80}]},
            ],
        },
    }))
}

fn valid(ir: &IngressRoute) -> bool {
    ir.status.as_ref().is_some_and(|s| {
        s.current_status.as_deref() == Some("valid")
            && s.observed_generation.is_some()
            && s.observed_generation == ir.metadata.generation
    })
}

/// Watches the routes labelled `phase` until `count` of them are valid at their generation;
/// returns when that happened. Panics after `timeout`.
pub async fn wait_valid(
    client: kube::Client,
    phase: &str,
    count: usize,
    timeout: Duration,
) -> Instant {
    let selector = format!("{LABEL}={phase}");
    let routes: Api<IngressRoute> = Api::all(client);
    wait_until(routes, &selector, count, timeout, "routes valid", valid).await
}

pub fn host(i: usize) -> String {
    format!("r-{i}.bench-{}.example.com", std::process::id())
}

/// Root IngressRoute `i`: its own host, a Service of its namespace. Among the routes that exist
/// before sluice starts (`base`), every tenth serves HTTPS (i % 10 == 0) and every tenth delegates
/// `/team` to a vertex in its namespace (i % 10 == 5).
pub fn route_for(i: usize, services: usize, phase: &str) -> IngressRoute {
    // Services are spread over the 20 namespaces like routes (svc-s lives in namespace s % 20),
    // so with a multiple of 20 Services svc-(i % services) is in i's namespace.
    let svc = format!("svc-{}", i % services);
    let mut ir = route(&namespace_of(i), &format!("r-{i}"), &host(i), &svc, phase);
    if phase == "base" && i.is_multiple_of(10) {
        ir.spec.virtualhost.as_mut().unwrap().tls = Some(obj(serde_json::json!({
            "secretName": format!("tls-{i}"),
        })));
    }
    if phase == "base" && i % 10 == 5 {
        ir.spec.routes.push(obj(serde_json::json!({
            "match": "/team",
            "delegate": {"name": format!("v-{i}")},
        })));
    }
    ir
}

pub fn routes(range: std::ops::Range<usize>, services: usize, phase: &str) -> Vec<IngressRoute> {
    range.map(|i| route_for(i, services, phase)).collect()
}

/// The vertices the `base` roots delegate to.
pub fn extras(range: std::ops::Range<usize>, services: usize) -> Vec<IngressRoute> {
    range
        .filter(|i| i % 10 == 5)
        .map(|i| {
            obj(serde_json::json!({
                "apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
                "metadata": {"name": format!("v-{i}"), "namespace": namespace_of(i),
                             "labels": {LABEL: "extra"}},
                "spec": {"routes": [{"match": "/team",
                                     "services": [{"name": format!("svc-{}", i % services), "port": 80}]}]},
            }))
        })
        .collect()
}

/// `n` Ingresses of class sluice, each with its own host.
pub fn ingresses(n: usize, services: usize) -> Vec<k8s_openapi::api::networking::v1::Ingress> {
    (0..n)
        .map(|k| {
            obj(serde_json::json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": format!("ing-{k}"), "namespace": namespace_of(k),
                             "labels": {LABEL: "extra"}},
                "spec": {
                    "ingressClassName": "sluice",
                    "rules": [{"host": format!("ing-{k}.bench-{}.example.com", std::process::id()),
                               "http": {"paths": [{"path": "/", "pathType": "Prefix",
                                 "backend": {"service": {"name": format!("svc-{}", k % services),
                                                         "port": {"number": 80}}}}]}}],
                },
            }))
        })
        .collect()
}

/// The TLS Secrets of the HTTPS roots: one real self-signed certificate (Envoy loads them).
pub fn tls_secrets(range: std::ops::Range<usize>) -> Vec<Secret> {
    let key = rcgen::KeyPair::generate().expect("key pair");
    let params =
        rcgen::CertificateParams::new(vec![format!("*.bench-{}.example.com", std::process::id())])
            .expect("certificate parameters");
    let cert = params.self_signed(&key).expect("self-signed certificate");
    let (crt, key) = (cert.pem(), key.serialize_pem());
    range
        .filter(|i| i.is_multiple_of(10))
        .map(|i| {
            obj(serde_json::json!({
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": format!("tls-{i}"), "namespace": namespace_of(i)},
                "stringData": {"tls.crt": crt, "tls.key": key},
            }))
        })
        .collect()
}
