#![forbid(unsafe_code)]
//! Cluster mode: watches, the debounced rebuild loop, leader election and the status writer.
//! It decides nothing about routing — that is `dag::build`'s job — it only moves objects in and
//! statuses out.
//!
//! ```text
//!  watch tasks (one per kind) ──► ClusterState (live Snapshot + observed statuses)
//!         │ bump "changed"                  │
//!         ▼                                 ▼
//!  rebuild loop (debounced) ── publish(&Snapshot) ──► app pipeline: dag::build → translate → xDS
//!         │ Built {snapshot, dag}
//!         ▼
//!  watch channel ──► webhook index (app)
//!                ├─► status writer (only while this replica holds the Lease)
//!                └─► warning Events (the same replica; `events.rs`)
//!  elector (Lease) ──► leader: watch<bool>
//! ```
//!
//! [`Cluster::start`] spawns all of it and hands back receivers; [`Cluster::shutdown`] stops the
//! writer, releases the Lease and stops the watches. See docs/cluster-mode.md.

pub mod events;
pub mod gateway_services;
pub mod kinds;
pub mod leader;
pub mod metrics;
pub mod rebuild;
pub mod state;
pub mod status;
pub mod watch;
pub mod writer;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;

use sluice_core::api::{Kind, ObjKey};

pub use leader::LeaseTimings;
pub use metrics::Metrics;
pub use rebuild::{Built, Publisher, build_only};
pub use status::LoadBalancer;

/// Where Ingress `status.loadBalancer` comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LoadBalancerSource {
    /// Ingress status is not written.
    #[default]
    None,
    /// `--ingress-status-address`: an IP or host name.
    Address(String),
    /// `--envoy-service ns/name`: that Service's load-balancer ingress (or external IPs).
    EnvoyService(ObjKey),
}

/// Status writes per second on average. High enough that a burst of 1,000 new objects gets its
/// statuses within a second; the apiserver's priority and fairness still protects it (a 429 is
/// retried with backoff).
pub const DEFAULT_STATUS_QPS: f64 = 500.0;
/// Status writes allowed at once above the average.
pub const DEFAULT_STATUS_BURST: u32 = 1000;
/// Status writes in flight at once.
pub const DEFAULT_STATUS_CONCURRENCY: u32 = 64;

/// Settings of cluster mode.
#[derive(Clone, Debug)]
pub struct Config {
    /// sluice's own namespace: the Lease lives here.
    pub namespace: String,
    /// This replica's identity in leader election (unique per replica).
    pub identity: String,
    pub lease_name: String,
    pub lease: LeaseTimings,
    pub load_balancer: LoadBalancerSource,
    /// Coalescing window of the rebuild loop after a quiet period, and how wide sustained churn
    /// may make it (see [`rebuild::Debounce`]).
    pub debounce: Duration,
    pub max_debounce: Duration,
    /// Status writes per second (average) and burst.
    pub status_qps: f64,
    pub status_burst: u32,
    /// Status writes in flight at once.
    pub status_concurrency: usize,
    /// How often kinds missing at start (CRDs not installed) are looked for again.
    pub rediscover_every: Duration,
    /// Whether the leader keeps a Service per Gateway ([`gateway_services`]).
    pub gateway_services: bool,
}

impl Config {
    pub fn new(namespace: &str, identity: &str) -> Self {
        Config {
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            lease_name: "sluice-leader".to_string(),
            lease: LeaseTimings::default(),
            load_balancer: LoadBalancerSource::None,
            debounce: Duration::from_millis(100),
            max_debounce: Duration::from_millis(400),
            status_qps: DEFAULT_STATUS_QPS,
            status_burst: DEFAULT_STATUS_BURST,
            status_concurrency: DEFAULT_STATUS_CONCURRENCY as usize,
            rediscover_every: Duration::from_secs(30),
            gateway_services: false,
        }
    }
}

/// How long connecting to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request that is not a watch may wait for the API server's next bytes (the
/// apiserver answers the requests sluice makes in well under a second; its own limit is 60 s).
/// Without it a connection the network stopped carrying hangs a request forever: a Lease renewal
/// that never returns, a status write that never ends.
pub const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How long sending a request's bytes may stall.
pub const REQUEST_WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// The API clients of cluster mode. Lists and watches are long reads by design (a watch of a
/// quiet kind carries nothing for minutes; kube-runtime's watcher ends one that stays silent past
/// its server-side timeout), so they get a client of their own without a read timeout; every other
/// request (discovery, the Lease, status writes, Events) goes through a client whose reads time
/// out after [`REQUEST_READ_TIMEOUT`], and the elector and the status writer bound each of their
/// calls besides (`leader.rs`, `writer.rs`).
#[derive(Clone)]
pub struct ApiClients {
    /// Every request that is not a list or a watch.
    pub requests: Client,
    /// Lists and watches.
    pub watches: Client,
}

impl ApiClients {
    /// Both clients from one configuration (a kubeconfig's or the in-cluster one): the same
    /// server and credentials, their own connection pools and timeouts.
    pub fn from_config(config: kube::Config) -> Result<Self, kube::Error> {
        let mut requests = config.clone();
        requests.connect_timeout = Some(CONNECT_TIMEOUT);
        requests.read_timeout = Some(REQUEST_READ_TIMEOUT);
        requests.write_timeout = Some(REQUEST_WRITE_TIMEOUT);
        let mut watches = config;
        watches.connect_timeout = Some(CONNECT_TIMEOUT);
        watches.read_timeout = None;
        watches.write_timeout = Some(REQUEST_WRITE_TIMEOUT);
        Ok(ApiClients {
            requests: Client::try_from(requests)?,
            watches: Client::try_from(watches)?,
        })
    }

    /// One client for everything (tests with a mock API server).
    pub fn single(client: Client) -> Self {
        ApiClients {
            requests: client.clone(),
            watches: client,
        }
    }
}

/// The load-balancer address Ingress statuses carry: fixed, none, or followed from the Envoy
/// Service by a task pushed onto `background`.
fn load_balancer(
    source: &LoadBalancerSource,
    watches: &Client,
    background: &mut Vec<JoinHandle<()>>,
) -> channel::Receiver<Option<LoadBalancer>> {
    let (lb_tx, lb_rx) = channel::channel(None);
    match source {
        LoadBalancerSource::None => {}
        LoadBalancerSource::Address(a) => {
            lb_tx.send_replace(Some(LoadBalancer::from_address(a)));
        }
        LoadBalancerSource::EnvoyService(key) => {
            background.push(tokio::spawn(watch_envoy_service(
                watches.clone(),
                key.clone(),
                lb_tx,
            )));
        }
    }
    lb_rx
}

/// Keeps the `sluice_leader` gauge at the value of `leader`.
fn leader_gauge(metrics: &Metrics, mut leader: channel::Receiver<bool>) -> JoinHandle<()> {
    let gauge = metrics.leader.clone();
    tokio::spawn(async move {
        while leader.changed().await.is_ok() {
            gauge.set(i64::from(*leader.borrow()));
        }
    })
}

/// The leader's tasks besides the status writer: warning Events, and the Gateway Services
/// when `config` asks for them.
fn leader_tasks(
    client: &Client,
    config: &Config,
    built: &channel::Receiver<Option<Arc<Built>>>,
    leader: &channel::Receiver<bool>,
    shutdown: &channel::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![tokio::spawn(events::event_loop(
        client.clone(),
        config.identity.clone(),
        events::EventInputs {
            built: built.clone(),
            leader: leader.clone(),
            shutdown: shutdown.clone(),
        },
    ))];
    if config.gateway_services {
        tasks.push(tokio::spawn(gateway_services::service_loop(
            client.clone(),
            gateway_services::ServiceInputs {
                built: built.clone(),
                leader: leader.clone(),
                shutdown: shutdown.clone(),
            },
        )));
    }
    tasks
}

/// Errors starting cluster mode.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach the Kubernetes API server: {0}")]
    Discovery(#[source] kube::Error),
    #[error("--envoy-service must be NAMESPACE/NAME, got {0:?}")]
    EnvoyService(String),
}

/// The watches and the rebuild loop, as [`Cluster::watch`] started them.
struct Watching {
    metrics: Metrics,
    state: Arc<Mutex<state::ClusterState>>,
    resources: Arc<Mutex<BTreeMap<Kind, kube::core::ApiResource>>>,
    built: channel::Receiver<Option<Arc<Built>>>,
    background: Vec<JoinHandle<()>>,
}

/// A running cluster mode.
pub struct Cluster {
    built: channel::Receiver<Option<Arc<Built>>>,
    leader: channel::Receiver<bool>,
    metrics: Metrics,
    shutdown: channel::Sender<bool>,
    elector: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    background: Vec<JoinHandle<()>>,
}

impl Drop for Cluster {
    /// Dropped without [`Cluster::shutdown`]: stop every task (the Lease then expires by itself).
    fn drop(&mut self) {
        for task in self
            .writer
            .iter()
            .chain(self.elector.iter())
            .chain(&self.background)
        {
            task.abort();
        }
    }
}

impl Cluster {
    /// Discovers what the cluster serves, starts the watches, the rebuild loop, the election and
    /// the status writer.
    /// `publish` builds the DAG from each snapshot (see [`Publisher`]; [`build_only`] when nothing
    /// else needs feeding).
    pub async fn start(
        clients: ApiClients,
        config: Config,
        publish: Publisher,
    ) -> Result<Cluster, Error> {
        let client = clients.requests.clone();
        let watches = clients.watches.clone();
        let Watching {
            metrics,
            state,
            resources,
            built: built_rx,
            mut background,
        } = Self::watch(clients, &config, &kinds::WATCHED, publish).await?;

        let lb_rx = load_balancer(&config.load_balancer, &watches, &mut background);
        let (shutdown_tx, shutdown_rx) = channel::channel(false);
        let (leader_tx, leader_rx) = channel::channel(false);
        background.push(leader_gauge(&metrics, leader_rx.clone()));
        let elector = leader::Elector::new(
            client.clone(),
            &config.namespace,
            &config.lease_name,
            &config.identity,
            config.lease,
        );
        let elector = tokio::spawn(elector.run(leader_tx, shutdown_rx.clone()));

        background.extend(leader_tasks(
            &client,
            &config,
            &built_rx,
            &leader_rx,
            &shutdown_rx,
        ));
        let writer = tokio::spawn(writer::write_loop(
            writer::WriterContext {
                client,
                state,
                resources,
                metrics: metrics.clone(),
                rate: config.status_qps,
                burst: config.status_burst,
                concurrency: config.status_concurrency,
                write_timeout: writer::WRITE_TIMEOUT,
            },
            writer::WriterInputs {
                built: built_rx.clone(),
                leader: leader_rx.clone(),
                load_balancer: lb_rx,
                shutdown: shutdown_rx,
            },
        ));
        Ok(Cluster {
            built: built_rx,
            leader: leader_rx,
            metrics,
            shutdown: shutdown_tx,
            elector: Some(elector),
            writer: Some(writer),
            background,
        })
    }

    /// Cluster mode for the admission webhook alone (`sluice serve --role webhook`): watches
    /// only `kinds` (the webhook's index needs [`kinds::WEBHOOK_WATCHED`]: no Secrets, no
    /// Services, no EndpointSlices) and runs the debounced rebuild loop, whose `publish` feeds
    /// the index. No leader election, no status writes, no Events: [`Cluster::leader`] stays
    /// false, and the API server is only listed and watched.
    pub async fn start_watching(
        clients: ApiClients,
        config: Config,
        kinds: &[Kind],
        publish: Publisher,
    ) -> Result<Cluster, Error> {
        let Watching {
            metrics,
            built,
            background,
            ..
        } = Self::watch(clients, &config, kinds, publish).await?;
        let (shutdown, _) = channel::channel(false);
        let (_, leader) = channel::channel(false);
        Ok(Cluster {
            built,
            leader,
            metrics,
            shutdown,
            elector: None,
            writer: None,
            background,
        })
    }

    /// Discovers which of `kinds` the cluster serves, watches those (and looks for the others
    /// again) and starts the rebuild loop.
    async fn watch(
        clients: ApiClients,
        config: &Config,
        kinds: &[Kind],
        publish: Publisher,
    ) -> Result<Watching, Error> {
        let ApiClients {
            requests: client,
            watches,
        } = clients;
        let metrics = Metrics::default();
        let found = kinds::discover(&client, kinds)
            .await
            .map_err(Error::Discovery)?;
        let missing: Vec<Kind> = kinds
            .iter()
            .copied()
            .filter(|k| !found.contains_key(k))
            .collect();
        if !missing.is_empty() {
            tracing::warn!(missing = ?missing, "kinds not served by this cluster (CRDs not installed?); looked for again every {:?}", config.rediscover_every);
        }
        let state = Arc::new(Mutex::new(state::ClusterState::default()));
        let (changed_tx, changed_rx) = channel::channel(0u64);
        let watch_ctx = watch::WatchContext {
            client: watches.clone(),
            discovery: client.clone(),
            state: state.clone(),
            changed: changed_tx,
            metrics: metrics.clone(),
        };
        let mut background = Vec::new();
        for (&kind, ar) in &found {
            background.push(tokio::spawn(watch::watch_kind(
                watch_ctx.clone(),
                kind,
                ar.clone(),
            )));
        }
        let resources = Arc::new(Mutex::new(found.clone()));
        if !missing.is_empty() {
            background.push(tokio::spawn(rediscover(
                watch_ctx.clone(),
                missing,
                resources.clone(),
                config.rediscover_every,
            )));
        }

        let (built_tx, built_rx) = channel::channel(None);
        background.push(tokio::spawn(rebuild::rebuild_loop(
            rebuild::RebuildContext {
                state: state.clone(),
                changed: changed_rx,
                publish,
                required: found.keys().copied().collect(),
                window: config.debounce,
                max_window: config.max_debounce,
                metrics: metrics.clone(),
            },
            built_tx,
        )));

        Ok(Watching {
            metrics,
            state,
            resources,
            built: built_rx,
            background,
        })
    }

    /// Every published build (None until the first one: all initial lists complete).
    pub fn built(&self) -> channel::Receiver<Option<Arc<Built>>> {
        self.built.clone()
    }

    /// Whether this replica currently writes status.
    pub fn leader(&self) -> channel::Receiver<bool> {
        self.leader.clone()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Stops writing, releases the Lease (bounded to 5 s) and stops the watches.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for task in [self.writer.take(), self.elector.take()]
            .into_iter()
            .flatten()
        {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        // Drop aborts the rest.
    }
}

/// Looks for kinds that were missing at start and starts watching them when they appear. The
/// first build does not wait for these (they were absent), later builds include them.
async fn rediscover(
    ctx: watch::WatchContext,
    mut missing: Vec<Kind>,
    resources: Arc<Mutex<BTreeMap<Kind, kube::core::ApiResource>>>,
    every: Duration,
) {
    while !missing.is_empty() {
        tokio::time::sleep(every).await;
        let found = match kinds::discover(&ctx.discovery, &missing).await {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(error = %e, "rediscovery failed");
                continue;
            }
        };
        for (kind, ar) in found {
            tracing::info!(kind = %kind, "kind is now served; watching it");
            resources
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(kind, ar.clone());
            missing.retain(|k| *k != kind);
            tokio::spawn(watch::watch_kind(ctx.clone(), kind, ar));
        }
    }
}

/// Follows the Envoy Service's load-balancer address for Ingress status.
async fn watch_envoy_service(
    client: Client,
    key: ObjKey,
    out: channel::Sender<Option<LoadBalancer>>,
) {
    let api: Api<Service> = Api::namespaced(client, &key.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Apply(svc) | Event::InitApply(svc)) => {
                let lb = service_load_balancer(&svc);
                out.send_if_modified(|cur| {
                    let changed = *cur != lb;
                    *cur = lb.clone();
                    changed
                });
            }
            Ok(Event::Delete(_)) => {
                out.send_if_modified(|cur| cur.take().is_some());
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(service = %key, error = %e, "watching the Envoy Service failed; retrying")
            }
        }
    }
}

/// A Service's public addresses: its load-balancer ingress, else its external IPs.
pub fn service_load_balancer(svc: &Service) -> Option<LoadBalancer> {
    let mut lb = LoadBalancer::default();
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref());
    for i in ingress.into_iter().flatten() {
        if let Some(ip) = &i.ip {
            lb.ips.push(ip.clone());
        } else if let Some(h) = &i.hostname {
            lb.hostnames.push(h.clone());
        }
    }
    if lb.is_empty() {
        let external = svc.spec.as_ref().and_then(|s| s.external_ips.as_ref());
        lb.ips.extend(external.into_iter().flatten().cloned());
    }
    (!lb.is_empty()).then_some(lb)
}

/// Parses `--envoy-service NAMESPACE/NAME`.
pub fn parse_service_ref(s: &str) -> Result<ObjKey, Error> {
    match s.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(ObjKey::new(ns, name))
        }
        _ => Err(Error::EnvoyService(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_service_ref_needs_namespace_and_name() {
        assert_eq!(
            parse_service_ref("sluice/envoy").unwrap(),
            ObjKey::new("sluice", "envoy")
        );
        for bad in ["envoy", "/envoy", "sluice/", "a/b/c"] {
            assert_eq!(
                parse_service_ref(bad).unwrap_err().to_string(),
                format!("--envoy-service must be NAMESPACE/NAME, got {bad:?}")
            );
        }
    }

    #[test]
    fn service_addresses_prefer_load_balancer_over_external_ips() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "envoy"},
            "spec": {"externalIPs": ["198.51.100.1"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}]}}
        }))
        .unwrap();
        let lb = service_load_balancer(&svc).unwrap();
        assert_eq!(lb.ips, vec!["192.0.2.1"]);
        assert_eq!(lb.hostnames, vec!["lb.example.com"]);
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "envoy"}, "spec": {"externalIPs": ["198.51.100.1"]}
        }))
        .unwrap();
        assert_eq!(
            service_load_balancer(&svc).unwrap().ips,
            vec!["198.51.100.1"]
        );
        let svc: Service =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "envoy"}})).unwrap();
        assert!(service_load_balancer(&svc).is_none());
    }
}
