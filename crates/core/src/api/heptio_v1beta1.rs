//! `IngressRoute` `contour.heptio.com/v1beta1` (seed 000): roots own a virtual host, vertices are
//! reached only by delegation of a path prefix.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::status::RoutingStatus;
use super::{Delegate, HealthCheck, LbStrategy, TlsVersion};

/// Spec of an IngressRoute `contour.heptio.com/v1beta1`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "contour.heptio.com",
    version = "v1beta1",
    kind = "IngressRoute",
    namespaced,
    derive = "PartialEq",
    status = "RoutingStatus",
    shortname = "ir",
    category = "sluice",
    printcolumn = r#"{"name":"FQDN","type":"string","jsonPath":".spec.virtualhost.fqdn"}"#,
    printcolumn = r#"{"name":"TLS Secret","type":"string","jsonPath":".spec.virtualhost.tls.secretName"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.currentStatus"}"#,
    printcolumn = r#"{"name":"Status Description","type":"string","jsonPath":".status.description"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct IngressRouteSpec {
    /// Present on roots only: the virtual host this tree of routes serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualhost: Option<VirtualHost>,
    /// Default load-balancing strategy for every service of this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Default active health check for every service of this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// The routes; matched from most to least specific whatever their order here.
    #[x_kube(validation = Rule::new("size(self) > 0").message("spec.routes must hold at least one route"))]
    #[schemars(length(max = 1000))]
    pub routes: Vec<Route>,
}

/// The virtual host of a root IngressRoute.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VirtualHost {
    /// Fully qualified domain name served, e.g. `www.example.com`.
    #[schemars(length(min = 1, max = 253))]
    pub fqdn: String,
    /// TLS termination for this virtual host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// TLS termination settings.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Tls {
    /// Name of a `kubernetes.io/tls` Secret in the IngressRoute's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// Minimum TLS version negotiated (default 1.2; "1.1" also offers the CBC suites TLS 1.1 clients need).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_protocol_version: Option<TlsVersion>,
}

/// One route: a path prefix and either services or a delegation.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
// `service` (the deprecated spelling) has no schema type, so CEL cannot see it: "a route needs
// services or a delegate" and the `service` half of "not both" are left to sluice's validation.
#[x_kube(validation = Rule::new("!(has(self.delegate) && has(self.services) && size(self.services) > 0)").message("a route has services or a delegate, not both"))]
pub struct Route {
    /// Path prefix matched segment by segment: `/foo` matches `/foo` and `/foo/bar`, not `/foobar`.
    #[serde(rename = "match")]
    #[schemars(length(min = 1, max = 4096))]
    pub match_: String,
    /// Services the matched traffic is balanced over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub services: Vec<Service>,
    /// Deprecated spelling of `services` used by seed 000: one service object or a list of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value")]
    pub service: Option<serde_json::Value>,
    /// Hands this prefix to another IngressRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    /// Serve this route over plain HTTP even when the virtual host has TLS (no 301 redirect).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permit_insecure: bool,
}

/// A Service in the IngressRoute's own namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// Name of a Service in the same namespace.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Service port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Relative weight of this service; services without a weight share the rest evenly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000))]
    pub weight: Option<u32>,
    /// Load-balancing strategy for this service; overrides spec.strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Active health check for this service; overrides spec.healthCheck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// Schema of a field that accepts any JSON value (validated by sluice, not by the schema).
pub fn any_value(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}
