//! A Service per Gateway of sluice's: the Gateway's own object in its namespace, so that
//! `kubectl get svc -l gateway.networking.k8s.io/gateway-name=<name>` finds it, clients in the
//! cluster resolve the Gateway by DNS (`sluice-<gateway>.<namespace>.svc`), and the Gateway's
//! `spec.infrastructure.labels` and `.annotations` reach an object the platform's tools read
//! (a load balancer's or a DNS controller's annotations, cost labels), as the Gateway API asks
//! (`GatewayInfrastructurePropagation`).
//!
//! - One headless Service (`clusterIP: None`, no selector) per accepted Gateway, named
//!   `sluice-<gateway>`, with a port per listener port, the labels `gateway.networking.k8s.io/
//!   gateway-name` and `app.kubernetes.io/managed-by: sluice` and the Gateway's infrastructure
//!   labels and annotations, owned by the Gateway (deleting the Gateway deletes it).
//! - When the Gateway has its own address (`--gateway-addresses`), an EndpointSlice of the
//!   Service with that address: the Service's DNS name answers with the Gateway's address. The
//!   API server refuses loopback and link-local endpoints, so a Gateway at such an address
//!   (the tests' `127.0.1.0/24`) gets the Service without endpoints.
//! - Written by the leader with server-side apply (field manager `sluice-gateway-services`, not
//!   forced: an object of that name that someone else wrote is left alone and the conflict
//!   logged); deleted when the Gateway is no longer accepted or no longer sluice's.
//!
//! Only written when `--gateway-services` is on (the chart's default); what to write is
//! [`desired`], a pure function of the snapshot and the model.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use tokio::sync::watch;

use super::Built;
use gateway_api::apis::experimental::gateways::Gateway;
use sluice_core::api::{Kind, ObjKey, ObjectRef};
use sluice_core::dag::Dag;
use sluice_core::store::Snapshot;

/// The label every Gateway's generated objects carry (the Gateway API's
/// `GatewayNameLabelKey`).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// The field manager of the applies.
pub const FIELD_MANAGER: &str = "sluice-gateway-services";
/// How long one write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often writes that failed are tried again while nothing else changes.
const RETRY_EVERY: Duration = Duration::from_secs(30);

/// The objects of one Gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayObjects {
    pub service: Service,
    pub slice: Option<EndpointSlice>,
}

/// The name of a Gateway's Service: `sluice-<gateway>`, dots made dashes (a Service name is a
/// DNS label); a name that would be longer than 63 characters, or that had dots, ends with a
/// hash of the Gateway's name so that two Gateways never share one.
pub fn service_name(gateway: &str) -> String {
    let plain = format!("sluice-{}", gateway.replace('.', "-"));
    if plain.len() <= 63 && !gateway.contains('.') {
        return plain;
    }
    // SHA-256, as the other names sluice makes (clusters, Gateway addresses) are hashed.
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(gateway.as_bytes());
    let mut head = plain;
    head.truncate(63 - 9);
    let head = head.trim_end_matches('-');
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{head}-{hex}")
}

/// The objects sluice keeps for each accepted Gateway of its own, by namespace and Service name.
pub fn desired(snapshot: &Snapshot, dag: &Dag) -> BTreeMap<ObjKey, GatewayObjects> {
    let mut out = BTreeMap::new();
    for (key, gw) in &snapshot.gateways {
        let obj = ObjectRef {
            kind: Kind::Gateway,
            key: key.clone(),
        };
        let Some(status) = dag.statuses.get(&obj).and_then(|s| s.gateway.as_ref()) else {
            continue;
        };
        let accepted = (status.conditions.iter()).any(|c| c.type_ == "Accepted" && c.status);
        let Some(uid) = gw.metadata.uid.clone().filter(|_| accepted) else {
            continue;
        };
        let owned = Owned::new(key, gw, uid);
        let service = owned.service();
        let address = status.addresses.first().filter(|a| endpoint_allowed(a));
        let slice = address.map(|a| owned.slice(a));
        let key = ObjKey::new(&*key.namespace, &*owned.name);
        out.insert(key, GatewayObjects { service, slice });
    }
    out
}

/// What a Gateway's Service and EndpointSlice share: name, namespace, labels, annotations,
/// owner and ports.
struct Owned<'a> {
    key: &'a ObjKey,
    /// The Service's name ([`service_name`]).
    name: String,
    labels: BTreeMap<String, String>,
    annotations: Option<BTreeMap<String, String>>,
    owner: OwnerReference,
    /// Port and protocol of each listener.
    ports: BTreeSet<(i32, &'static str)>,
}

impl<'a> Owned<'a> {
    /// For the accepted Gateway `gw` at `key`, whose uid is `uid`.
    fn new(key: &'a ObjKey, gw: &Gateway, uid: String) -> Self {
        let infra = gw.spec.infrastructure.as_ref();
        let mut labels = (infra.and_then(|i| i.labels.clone())).unwrap_or_default();
        labels.insert(GATEWAY_NAME_LABEL.into(), key.name.to_string());
        labels.insert("app.kubernetes.io/managed-by".into(), "sluice".into());
        let annotations = infra
            .and_then(|i| i.annotations.clone())
            .filter(|a| !a.is_empty());
        let ports = (gw.spec.listeners.iter())
            .map(|l| {
                let protocol = if l.protocol == "UDP" { "UDP" } else { "TCP" };
                (l.port, protocol)
            })
            .collect();
        let owner = OwnerReference {
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            name: key.name.to_string(),
            uid,
            controller: Some(true),
            block_owner_deletion: None,
        };
        Owned {
            key,
            name: service_name(&key.name),
            labels,
            annotations,
            owner,
            ports,
        }
    }

    /// The metadata of an object named `name` with `labels`.
    fn meta(&self, name: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.key.namespace.to_string()),
            labels: Some(labels),
            annotations: self.annotations.clone(),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }

    /// The headless Service, a port per listener port.
    fn service(&self) -> Service {
        Service {
            metadata: self.meta(&self.name, self.labels.clone()),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                ports: Some(
                    (self.ports.iter())
                        .map(|(port, protocol)| ServicePort {
                            name: Some(port_name(*port, protocol)),
                            port: *port,
                            protocol: Some((*protocol).into()),
                            ..ServicePort::default()
                        })
                        .collect(),
                ),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    /// The Service's EndpointSlice, with the Gateway's `address`.
    fn slice(&self, address: &std::net::IpAddr) -> EndpointSlice {
        let mut labels = self.labels.clone();
        labels.insert("kubernetes.io/service-name".into(), self.name.clone());
        labels.insert(
            "endpointslice.kubernetes.io/managed-by".into(),
            "sluice.dev".into(),
        );
        EndpointSlice {
            metadata: self.meta(&self.name, labels),
            address_type: if address.is_ipv4() { "IPv4" } else { "IPv6" }.into(),
            endpoints: vec![Endpoint {
                addresses: vec![address.to_string()],
                ..Endpoint::default()
            }],
            ports: Some(
                (self.ports.iter())
                    .map(|(port, protocol)| EndpointPort {
                        name: Some(port_name(*port, protocol)),
                        port: Some(*port),
                        protocol: Some((*protocol).into()),
                        ..EndpointPort::default()
                    })
                    .collect(),
            ),
        }
    }
}

/// The name of a Service's or EndpointSlice's port: protocol and number (`tcp-80`).
fn port_name(port: i32, protocol: &str) -> String {
    format!("{}-{port}", protocol.to_lowercase())
}

/// Whether the API server takes `address` in an EndpointSlice (not loopback, link-local or
/// unspecified).
fn endpoint_allowed(address: &std::net::IpAddr) -> bool {
    match address {
        std::net::IpAddr::V4(a) => !(a.is_loopback() || a.is_link_local() || a.is_unspecified()),
        std::net::IpAddr::V6(a) => {
            !(a.is_loopback() || a.is_unspecified() || (a.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// What the loop reacts to.
pub struct ServiceInputs {
    pub built: watch::Receiver<Option<Arc<Built>>>,
    pub leader: watch::Receiver<bool>,
    pub shutdown: watch::Receiver<bool>,
}

/// Keeps every accepted Gateway's Service (and EndpointSlice) as [`desired`] says while this
/// replica leads; runs until shutdown.
pub async fn service_loop(client: Client, mut inputs: ServiceInputs) {
    // What this replica wrote since it became the leader (empty: write everything).
    let mut written: BTreeMap<ObjKey, GatewayObjects> = BTreeMap::new();
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let leading = *inputs.leader.borrow_and_update();
        let built = inputs.built.borrow_and_update().clone();
        let mut failed = false;
        match (leading, built) {
            (true, Some(built)) => {
                let want = desired(&built.snapshot, &built.dag);
                for key in written
                    .keys()
                    .filter(|k| !want.contains_key(*k))
                    .cloned()
                    .collect::<Vec<_>>()
                {
                    if remove(&client, &key).await {
                        written.remove(&key);
                    } else {
                        failed = true;
                    }
                }
                for (key, objects) in want {
                    if written.get(&key) == Some(&objects) {
                        continue;
                    }
                    if apply(&client, &key, &objects).await {
                        written.insert(key, objects);
                    } else {
                        failed = true;
                    }
                }
            }
            _ => written.clear(),
        }
        let retry = async {
            match failed {
                true => tokio::time::sleep(RETRY_EVERY).await,
                false => std::future::pending().await,
            }
        };
        tokio::select! {
            r = inputs.built.changed() => if r.is_err() { return },
            r = inputs.leader.changed() => if r.is_err() { return },
            _ = inputs.shutdown.changed() => {}
            _ = retry => {}
        }
    }
}

/// Applies one Gateway's objects; false (logged) when a write failed.
async fn apply(client: &Client, key: &ObjKey, objects: &GatewayObjects) -> bool {
    let params = PatchParams::apply(FIELD_MANAGER);
    let services: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
    let mut ok = bounded(
        key,
        "apply the Gateway's Service",
        services.patch(&key.name, &params, &Patch::Apply(&objects.service)),
    )
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &key.namespace);
    ok &= match &objects.slice {
        Some(slice) => {
            bounded(
                key,
                "apply the Gateway's EndpointSlice",
                slices.patch(&key.name, &params, &Patch::Apply(slice)),
            )
            .await
        }
        None => delete(&slices, key, "EndpointSlice").await,
    };
    ok
}

/// Deletes one Gateway's objects; false (logged) when a delete failed.
async fn remove(client: &Client, key: &ObjKey) -> bool {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &key.namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
    delete(&slices, key, "EndpointSlice").await & delete(&services, key, "Service").await
}

async fn delete<K>(api: &Api<K>, key: &ObjKey, what: &str) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match tokio::time::timeout(
        WRITE_TIMEOUT,
        api.delete(&key.name, &DeleteParams::default()),
    )
    .await
    {
        Ok(Ok(_)) => true,
        Ok(Err(kube::Error::Api(e))) if e.code == 404 => true,
        Ok(Err(e)) => {
            tracing::warn!(object = %key, error = %e, "cannot delete the Gateway's {what}");
            false
        }
        Err(_) => {
            tracing::warn!(object = %key, "deleting the Gateway's {what} timed out");
            false
        }
    }
}

async fn bounded<T>(
    key: &ObjKey,
    what: &str,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> bool {
    match tokio::time::timeout(WRITE_TIMEOUT, call).await {
        Ok(Ok(_)) => {
            tracing::debug!(object = %key, "{what}: done");
            true
        }
        Ok(Err(e)) => {
            tracing::warn!(object = %key, error = %e, "cannot {what}");
            false
        }
        Err(_) => {
            tracing::warn!(object = %key, "{what}: timed out");
            false
        }
    }
}

#[cfg(test)]
#[path = "gateway_services_tests.rs"]
mod tests;
