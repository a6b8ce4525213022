//! Clusters: the relative weights of a route's backends, the health-check policy with the seeds'
//! defaults, the stable name of a cluster, and the endpoints of a Service's clusters.

use std::fmt::Write as _;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::model::*;
use crate::api::{HealthCheck, LbStrategy, ObjKey};
use crate::store::Snapshot;

/// Host header of active health checks when the object names none.
pub const DEFAULT_HEALTH_CHECK_HOST: &str = "contour-envoy-healthcheck";

/// How a route names a Service port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRef<'a> {
    Number(i32),
    Name(&'a str),
}

/// A route's reference to one Service port, with the cluster settings it asks for.
#[derive(Clone, Debug)]
pub struct BackendRef<'a> {
    pub namespace: &'a str,
    pub service: &'a str,
    pub port: PortRef<'a>,
    pub protocol: UpstreamProtocol,
    pub lb: LbStrategy,
    pub health_check: Option<&'a HealthCheck>,
    pub outlier_detection: Option<OutlierDetection>,
}

/// Relative weights: when none is given traffic is split evenly; otherwise a backend without a weight
/// gets none. All-zero weights also split evenly.
pub fn effective_weights(weights: &[Option<u32>]) -> Vec<u32> {
    let even = weights_even(weights.iter().copied());
    weights.iter().map(|&w| effective_weight(even, w)).collect()
}

/// Whether traffic is split evenly (see [`effective_weights`]).
pub(super) fn weights_even(mut weights: impl Iterator<Item = Option<u32>> + Clone) -> bool {
    weights.clone().all(|w| w.is_none()) || weights.all(|w| w.unwrap_or(0) == 0)
}

/// One backend's weight (see [`effective_weights`]).
pub(super) fn effective_weight(even: bool, weight: Option<u32>) -> u32 {
    if even { 1 } else { weight.unwrap_or(0) }
}

/// The health check policy with the seed defaults: 5 s interval, 2 s timeout, 3 unhealthy,
/// 2 healthy, Host `contour-envoy-healthcheck` (seed 000).
pub fn health_check_policy(h: &HealthCheck) -> HealthCheckPolicy {
    use std::time::Duration;
    HealthCheckPolicy {
        path: h.path.clone(),
        host: h
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| DEFAULT_HEALTH_CHECK_HOST.to_string()),
        interval: Duration::from_secs(h.interval_seconds.unwrap_or(5).max(1) as u64),
        timeout: Duration::from_secs(h.timeout_seconds.unwrap_or(2).max(1) as u64),
        unhealthy_threshold: h.unhealthy_threshold_count.unwrap_or(3),
        healthy_threshold: h.healthy_threshold_count.unwrap_or(2),
    }
}

/// `namespace/service/port`, plus a short hash of the settings when they differ from the defaults,
/// so the same Service port with different settings gets distinct, stable clusters.
/// Writes the name into `out`, replacing what it held.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_cluster_name(
    out: &mut String,
    namespace: &str,
    service: &str,
    port: i32,
    b: &BackendRef<'_>,
    hc: Option<&HealthCheckPolicy>,
    validation: Option<&UpstreamValidation>,
    client_secret: Option<&str>,
) {
    out.clear();
    out.push_str(namespace);
    out.push('/');
    out.push_str(service);
    out.push('/');
    out.push_str(itoa::Buffer::new().format(port));
    let defaults = b.protocol == UpstreamProtocol::Http
        && b.lb == LbStrategy::RoundRobin
        && hc.is_none()
        && b.outlier_detection.is_none();
    if defaults {
        return;
    }
    let mut canon = format!(
        "{:?}|{:?}|{:?}|{:?}",
        b.protocol, b.lb, hc, b.outlier_detection
    );
    // Only with validation: the names of the clusters without it stay as they were.
    if let Some(v) = validation {
        let _ = write!(canon, "|{}|{}", v.ca_secret, v.subject_name);
        // Only with subject alternative names, or a client certificate: likewise.
        if !v.subject_alt_names.is_empty() {
            let _ = write!(canon, "|{:?}", v.subject_alt_names);
        }
    }
    if let Some(c) = client_secret {
        let _ = write!(canon, "|client {c}");
    }
    let digest = Sha256::digest(canon.as_bytes());
    out.push('/');
    for byte in &digest[..5] {
        let _ = write!(out, "{byte:02x}");
    }
}

/// The clusters of one Service in `clusters`. Their names begin with `namespace/service/` (see
/// [`cluster_name`]; neither part can hold a `/`), so they are one range of the sorted map:
/// finding them costs a lookup, not a walk over every cluster.
pub fn clusters_of_service<'d>(
    clusters: &'d crate::dag::Map<ClusterName, Arc<Cluster>>,
    service: &'d ObjKey,
) -> impl Iterator<Item = (&'d ClusterName, &'d Arc<Cluster>)> + 'd {
    let prefix = format!("{}/{}/", service.namespace, service.name);
    clusters
        .range_from::<str>(prefix.as_str())
        .take_while(move |(name, _)| name.starts_with(prefix.as_str()))
        .filter(move |(_, c)| c.service() == (&*service.namespace, &*service.name))
}

/// The endpoints `cluster` has in `snapshot`, computed as [`crate::dag::build`] computes them;
/// None when its Service or Service port is not there (only a full build can tell what then).
pub fn cluster_endpoints(snapshot: &Snapshot, cluster: &Cluster) -> Option<Endpoints> {
    let (namespace, name) = cluster.service();
    let (_, entry) = snapshot.service_index().get(namespace, name)?;
    let sp = entry.ports().iter().find(|p| p.port == cluster.port)?;
    Some(sp.endpoints.clone())
}
