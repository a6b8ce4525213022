//! Admission metrics: requests by endpoint, kind, operation and verdict, a latency histogram, and
//! what the limits do (docs/webhook.md, "Limits"): requests and connections refused by a limit,
//! bytes of request bodies buffered, connections open.
//!
//! Label values are always from fixed sets (never user-supplied strings), so cardinality is bounded
//! whatever objects are submitted.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use sluice_core::api::Kind;

/// Labels of `sluice_webhook_admission_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `validate` or `mutate`.
    pub endpoint: &'static str,
    /// `Kind.group` of the object (see [`kind_label`]), `other` for kinds sluice does not read,
    /// `unknown` when the request could not be read.
    pub kind: &'static str,
    /// CREATE, UPDATE, DELETE, CONNECT, or `unknown`.
    pub operation: &'static str,
    /// `allowed`, `denied`, `patched` (allowed with a patch), `bad_request` or `error` (HTTP 5xx:
    /// an internal error, or a limit's 503).
    pub verdict: &'static str,
}

/// Labels of `sluice_webhook_admission_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub endpoint: &'static str,
}

/// Labels of `sluice_webhook_limit_hits_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// Which limit (see [`Limit`]).
    pub limit: &'static str,
}

/// A limit that refused a request or a connection (the `limit` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// A body larger than the largest accepted (413).
    BodySize,
    /// A body that did not arrive before the request deadline (408).
    BodyTimeout,
    /// No room in the byte budget before the deadline (503).
    BufferedBytes,
    /// No review slot before the deadline (503).
    Reviews,
    /// A review that did not finish before the deadline (503).
    ReviewTimeout,
    /// A connection refused: the listener's connections all in use.
    Connections,
    /// A connection refused: its peer address has its share of connections open.
    PeerConnections,
    /// A TLS handshake that did not finish in time.
    Handshake,
    /// A connection closed after a while without a request.
    Idle,
}

impl Limit {
    pub const ALL: [Limit; 9] = [
        Limit::BodySize,
        Limit::BodyTimeout,
        Limit::BufferedBytes,
        Limit::Reviews,
        Limit::ReviewTimeout,
        Limit::Connections,
        Limit::PeerConnections,
        Limit::Handshake,
        Limit::Idle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Limit::BodySize => "body_size",
            Limit::BodyTimeout => "body_timeout",
            Limit::BufferedBytes => "buffered_bytes",
            Limit::Reviews => "reviews",
            Limit::ReviewTimeout => "review_timeout",
            Limit::Connections => "connections",
            Limit::PeerConnections => "peer_connections",
            Limit::Handshake => "handshake",
            Limit::Idle => "idle",
        }
    }
}

fn latency_histogram() -> Histogram {
    // 25µs … ~0.8s in 16 doubling steps.
    Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
}

/// The webhook's metrics. Cheap to clone (clones share the counters).
#[derive(Clone, Debug)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    limit_hits: Family<LimitLabels, Counter>,
    /// Bytes of request bodies held in memory now (charged to the byte budget).
    pub(crate) buffered_bytes: Gauge,
    /// Connections open now.
    pub(crate) connections: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            limit_hits: Family::default(),
            buffered_bytes: Gauge::default(),
            connections: Gauge::default(),
        }
    }
}

impl Metrics {
    /// Metrics not yet exposed anywhere; see [`Metrics::register`].
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Metrics registered in `registry` under the `sluice_webhook` prefix.
    pub fn registered(registry: &mut Registry) -> Metrics {
        let m = Metrics::new();
        m.register(registry);
        m
    }

    /// Registers these metrics (`sluice_webhook_admission_requests_total`,
    /// `sluice_webhook_admission_duration_seconds`) in a registry the app serves on /metrics.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("sluice_webhook");
        sub.register(
            "admission_requests",
            "Admission reviews answered, by endpoint, object kind, operation and verdict",
            self.requests.clone(),
        );
        sub.register(
            "admission_duration_seconds",
            "Time to answer one admission review, from the complete body to the encoded answer",
            self.latency.clone(),
        );
        sub.register(
            "limit_hits",
            "Requests and connections refused or closed by one of the webhook's limits, by limit",
            self.limit_hits.clone(),
        );
        sub.register(
            "buffered_body_bytes",
            "Bytes of admission request bodies held in memory now (the byte budget in use)",
            self.buffered_bytes.clone(),
        );
        sub.register(
            "connections",
            "Connections open to the webhook's HTTPS listener now",
            self.connections.clone(),
        );
    }

    /// Counts one request or connection refused (or closed) by a limit.
    pub fn hit(&self, limit: Limit) {
        self.limit_hits
            .get_or_create(&LimitLabels {
                limit: limit.as_str(),
            })
            .inc();
    }

    /// How often a limit was hit so far (for tests).
    pub fn hits(&self, limit: Limit) -> u64 {
        self.limit_hits
            .get_or_create(&LimitLabels {
                limit: limit.as_str(),
            })
            .get()
    }

    /// Bytes of request bodies held in memory now.
    pub fn buffered_bytes(&self) -> i64 {
        self.buffered_bytes.get()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> i64 {
        self.connections.get()
    }

    /// Counts one answered review.
    pub fn observe(&self, labels: RequestLabels, elapsed: Duration) {
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&LatencyLabels {
                endpoint: labels.endpoint,
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Requests counted so far with these labels (for tests).
    pub fn count(&self, labels: &RequestLabels) -> u64 {
        self.requests.get_or_create(labels).get()
    }
}

/// The `kind` label of a kind: `Kind.group` as kubectl spells resources, distinct per API group.
pub fn kind_label(kind: Option<Kind>) -> &'static str {
    match kind {
        None => "other",
        Some(Kind::Ingress) => "Ingress.networking.k8s.io",
        Some(Kind::IngressClass) => "IngressClass.networking.k8s.io",
        Some(Kind::IngressRouteV1beta1) => "IngressRoute.contour.heptio.com",
        Some(Kind::IngressRouteV1) => "IngressRoute.projectcontour.io",
        Some(Kind::RouteV1alpha1) => "Route.contour.heptio.com",
        Some(Kind::Service) => "Service",
        Some(Kind::EndpointSlice) => "EndpointSlice.discovery.k8s.io",
        Some(Kind::Secret) => "Secret",
        Some(Kind::GatewayClass) => "GatewayClass.gateway.networking.k8s.io",
        Some(Kind::Gateway) => "Gateway.gateway.networking.k8s.io",
        Some(Kind::HttpRoute) => "HTTPRoute.gateway.networking.k8s.io",
        Some(Kind::GrpcRoute) => "GRPCRoute.gateway.networking.k8s.io",
        Some(Kind::TlsRoute) => "TLSRoute.gateway.networking.k8s.io",
        Some(Kind::TcpRoute) => "TCPRoute.gateway.networking.k8s.io",
        Some(Kind::ListenerSet) => "ListenerSet.gateway.networking.k8s.io",
        Some(Kind::ReferenceGrant) => "ReferenceGrant.gateway.networking.k8s.io",
        Some(Kind::Namespace) => "Namespace",
        Some(Kind::ConfigMap) => "ConfigMap",
        Some(Kind::BackendTlsPolicy) => "BackendTLSPolicy.gateway.networking.k8s.io",
    }
}

/// Encodes a registry in the Prometheus text format (what /metrics serves).
pub fn encode_text(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_metrics_show_in_the_text_format() {
        let mut registry = Registry::default();
        let m = Metrics::registered(&mut registry);
        let labels = RequestLabels {
            endpoint: "validate",
            kind: kind_label(Some(Kind::IngressRouteV1)),
            operation: "CREATE",
            verdict: "denied",
        };
        m.observe(labels.clone(), Duration::from_micros(300));
        m.observe(labels.clone(), Duration::from_micros(300));
        assert_eq!(m.count(&labels), 2);
        let text = encode_text(&registry);
        assert!(
            text.contains(
                "sluice_webhook_admission_requests_total{endpoint=\"validate\",kind=\"IngressRoute.projectcontour.io\",operation=\"CREATE\",verdict=\"denied\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "sluice_webhook_admission_duration_seconds_count{endpoint=\"validate\"} 2"
            ),
            "{text}"
        );
    }

    #[test]
    fn every_kind_has_a_distinct_label() {
        let mut labels: Vec<&str> = Kind::ALL.iter().map(|k| kind_label(Some(*k))).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Kind::ALL.len());
    }
}
