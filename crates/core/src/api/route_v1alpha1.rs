//! `Route` `contour.heptio.com/v1alpha1` (seed 004): one virtual host, path prefixes, upstreams.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::status::RouteStatus;
use super::{HealthCheck, LbStrategy};

/// Spec of a Route `contour.heptio.com/v1alpha1`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "contour.heptio.com",
    version = "v1alpha1",
    kind = "Route",
    namespaced,
    derive = "PartialEq",
    status = "RouteStatus",
    category = "sluice",
    printcolumn = r#"{"name":"Host","type":"string","jsonPath":".spec.host"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.currentStatus"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// Host name served, e.g. `heptio.com`.
    #[schemars(length(min = 1, max = 253))]
    pub host: String,
    /// Default load-balancing strategy for every upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Default active health check for every upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_health_check: Option<HealthCheck>,
    /// The routes of this host.
    #[x_kube(validation = Rule::new("size(self) > 0").message("spec.routes must hold at least one route"))]
    #[schemars(length(max = 1000))]
    pub routes: Vec<RouteRule>,
}

/// A path prefix and the upstreams serving it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteRule {
    /// Path prefix matched segment by segment.
    #[schemars(length(min = 1, max = 4096))]
    pub path_prefix: String,
    /// Load-balancing strategy; overrides spec.strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Services the matched traffic is balanced over.
    #[x_kube(validation = Rule::new("size(self) > 0").message("a route needs at least one upstream"))]
    #[schemars(length(max = 128))]
    pub upstreams: Vec<Upstream>,
}

/// A Service in the Route's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Upstream {
    /// Name of a Service in the same namespace.
    #[schemars(length(min = 1, max = 63))]
    pub service_name: String,
    /// Service port number.
    #[schemars(range(min = 1, max = 65535))]
    pub service_port: i32,
    /// Percentage of the route's traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub weight: Option<u32>,
    /// Active health check; overrides spec.lbHealthCheck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_health_check: Option<HealthCheck>,
}
