//! Shared by the benchmarks that run inside the e2e control plane (`cluster`, `contour`): objects
//! made from JSON, creates in parallel, a watch until objects reach a state, and the first 200
//! through an Envoy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

/// Creates in flight at once while building a cluster.
pub const PARALLEL: usize = 32;

/// A typed object from its JSON.
pub fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("a well-formed object")
}

/// A Service of one port (80, named `http`) and its EndpointSlice: one ready endpoint, `ip:port`.
pub fn service(ns: &str, name: &str, ip: &str, port: u16) -> (Service, EndpointSlice) {
    (
        obj(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]},
        })),
        obj(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-1"), "namespace": ns,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
        })),
    )
}

/// A client of the e2e control plane's apiserver, as its admin (the harness's KUBECONFIG).
pub fn admin_client(rt: &tokio::runtime::Runtime) -> kube::Client {
    rt.block_on(kube::Client::try_default())
        .expect("admin kubeconfig")
}

/// Creates these namespaces.
pub async fn create_namespaces(client: &kube::Client, names: impl IntoIterator<Item = String>) {
    let api: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns: Namespace = obj(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name},
        }));
        api.create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
}

/// Creates `items` with [`PARALLEL`] requests in flight.
pub async fn create_all<K>(client: &kube::Client, items: Vec<K>)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    futures::stream::iter(items)
        .map(|item| {
            let api: Api<K> =
                Api::namespaced(client.clone(), &item.meta().namespace.clone().unwrap());
            async move { api.create(&PostParams::default(), &item).await }
        })
        .buffer_unordered(PARALLEL)
        .try_for_each(|_| async { Ok(()) })
        .await
        .expect("create");
}

/// Watches the objects of `api` that carry the label `selector` until `count` of them are `done`;
/// returns when that happened. Panics after `timeout`, saying how many were (`what` names them).
pub async fn wait_until<K>(
    api: Api<K>,
    selector: &str,
    count: usize,
    timeout: Duration,
    what: &str,
    done: impl Fn(&K) -> bool,
) -> Instant
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher(api, watcher::Config::default().labels(selector));
    futures::pin_mut!(stream);
    let mut seen: BTreeMap<(String, String), bool> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let event = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| {
                let ok = seen.values().filter(|v| **v).count();
                panic!(
                    "{selector}: only {ok} of {count} {what} after {timeout:?} (seen {})",
                    seen.len()
                )
            });
        match event {
            Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                let key = (
                    o.meta().namespace.clone().unwrap_or_default(),
                    o.meta().name.clone().unwrap_or_default(),
                );
                seen.insert(key, done(&o));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => eprintln!("watch error (retried): {e}"),
            None => panic!("watch ended"),
        }
        if seen.values().filter(|v| **v).count() >= count {
            return Instant::now();
        }
    }
}

/// GETs `/` with this Host through Envoy until it answers 200; returns when it did. Panics after
/// 30 s.
pub async fn first_200(http: &reqwest::Client, port: u16, host: &str) -> Instant {
    first_200_within(http, port, host, Duration::from_secs(30)).await
}

/// [`first_200`] with another deadline (an Envoy taking in a whole cluster at its start).
pub async fn first_200_within(
    http: &reqwest::Client,
    port: u16,
    host: &str,
    timeout: Duration,
) -> Instant {
    let deadline = Instant::now() + timeout;
    loop {
        let r = http
            .get(format!("http://127.0.0.1:{port}/"))
            .header("host", host)
            .send()
            .await;
        if r.as_ref().is_ok_and(|r| r.status() == 200) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{host} did not answer 200 within {timeout:?}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A duration in ms.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
