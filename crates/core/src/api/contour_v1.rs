//! `IngressRoute` `projectcontour.io/v1` (seed 002): routes match a path prefix plus header conditions,
//! delegate by path and headers, and name each backend's protocol.
//!
//! Seed 002's YAML mixes a mapping with list items under `match`; sluice's schema keeps every example's
//! intent with `match: {path, headers: [...]}` (see docs/api.md).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::heptio_v1beta1::VirtualHost;
use super::status::RoutingStatus;
use super::{Delegate, HealthCheck, LbStrategy};

/// Spec of an IngressRoute `projectcontour.io/v1`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "projectcontour.io",
    version = "v1",
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
    /// Default load-balancing strategy for every backend of this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Default active health check for every backend of this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// The routes; matched from most to least specific whatever their order here.
    #[x_kube(validation = Rule::new("size(self) > 0").message("spec.routes must hold at least one route"))]
    #[schemars(length(max = 1000))]
    pub routes: Vec<Route>,
}

/// One route: match conditions and either backends or a delegation.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.backends) && has(self.services))").message("use backends or its alias services, not both"))]
#[x_kube(validation = Rule::new("has(self.delegate) != ((has(self.backends) && size(self.backends) > 0) || (has(self.services) && size(self.services) > 0))").message("a route has backends or a delegate, exactly one of them"))]
pub struct Route {
    /// What a request must look like to take this route; everything when absent.
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_: Option<MatchConditions>,
    /// Backends the matched traffic is balanced over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub backends: Vec<Backend>,
    /// Alias of `backends`, as seed 002's examples write it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub services: Vec<Backend>,
    /// Hands requests matching these conditions to another IngressRoute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    /// Serve this route over plain HTTP even when the virtual host has TLS (no 301 redirect).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permit_insecure: bool,
    /// Request timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_policy: Option<TimeoutPolicy>,
    /// Retries and passive health checking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
}

impl Route {
    /// `backends`, or its alias `services`.
    pub fn backend_list(&self) -> &[Backend] {
        if self.backends.is_empty() {
            &self.services
        } else {
            &self.backends
        }
    }
}

/// Path prefix plus header conditions; all must hold.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MatchConditions {
    /// Path prefix matched segment by segment; `/` (everything) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub path: Option<String>,
    /// Header conditions, all of which must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub headers: Vec<HeaderCondition>,
}

/// One header condition: a generic `header` with exactly one operator, or a `cookie` / `userAgent`
/// shortcut (both "contains" matches on their header).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.header) ? 1 : 0) + (has(self.cookie) ? 1 : 0) + (has(self.userAgent) ? 1 : 0) == 1").message("a header condition names exactly one of header, cookie, userAgent"))]
#[x_kube(validation = Rule::new("!has(self.header) || (has(self.value) ? 1 : 0) + (has(self.exact) ? 1 : 0) + (has(self.contains) ? 1 : 0) + (has(self.notContains) ? 1 : 0) + (has(self.present) ? 1 : 0) + (has(self.regex) ? 1 : 0) == 1").message("a header condition has exactly one of value, exact, contains, notContains, present, regex"))]
pub struct HeaderCondition {
    /// Name of the request header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub header: Option<String>,
    /// The header equals this value (seed 002's spelling of `exact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The header equals this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// The header contains this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub contains: Option<String>,
    /// The header is absent or does not contain this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub not_contains: Option<String>,
    /// true: the header is present; false: it is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
    /// The whole header value matches this RE2 regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub regex: Option<String>,
    /// The Cookie header contains this text, e.g. `user=test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub cookie: Option<String>,
    /// The User-Agent header contains this text, e.g. `Chrome`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub user_agent: Option<String>,
}

/// A backend Service in the IngressRoute's own namespace, keyed by the protocol spoken to it:
/// exactly one of `http`, `https`, `http2` (alias `h2c`), `https2` (alias `h2`), `tcp`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.http) ? 1 : 0) + (has(self.https) ? 1 : 0) + (has(self.http2) ? 1 : 0) + (has(self.h2c) ? 1 : 0) + (has(self.https2) ? 1 : 0) + (has(self.h2) ? 1 : 0) + (has(self.tcp) ? 1 : 0) == 1").message("a backend names its Service under exactly one protocol key: http, https, http2, h2c, https2, h2 or tcp"))]
#[x_kube(validation = Rule::new("!has(self.validation) || has(self.https) || has(self.https2) || has(self.h2)").message("validation is for TLS backends only: name the Service under https, https2 or h2"))]
pub struct Backend {
    /// Service spoken to over HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Service spoken to over HTTP/1.1 with TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<String>,
    /// Service spoken to over cleartext HTTP/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<String>,
    /// Alias of http2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2c: Option<String>,
    /// Service spoken to over HTTP/2 with TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https2: Option<String>,
    /// Alias of https2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2: Option<String>,
    /// Service receiving the TLS-encapsulated TCP session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<String>,
    /// Service port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// Relative weight; backends without a weight share the rest evenly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000))]
    pub weight: Option<u32>,
    /// Load-balancing strategy; overrides spec.strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<LbStrategy>,
    /// Active health check; overrides spec.healthCheck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// TLS backends (`https`, `https2`/`h2`) only: verify the backend's certificate against a CA
    /// and a subject name, which is also sent as SNI. Without it, Envoy sends SNI
    /// `<service>.<namespace>.svc` and accepts any certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<UpstreamValidation>,
}

/// How Envoy verifies a TLS backend's certificate.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamValidation {
    /// Name of a Secret in the IngressRoute's own namespace whose `ca.crt` holds the PEM
    /// certificates of the CA(s) the backend's certificate must chain to.
    #[schemars(length(min = 1, max = 253))]
    pub ca_secret: String,
    /// The DNS name the backend's certificate must carry as a subject alternative name; also
    /// the SNI Envoy sends.
    #[schemars(length(min = 1, max = 253))]
    pub subject_name: String,
}

/// The protocol spoken to a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendProtocol {
    Http,
    Https,
    H2c,
    H2,
    Tcp,
}

impl BackendProtocol {
    /// Whether Envoy speaks TLS to such a backend (HTTP over TLS: `https`, `https2`).
    pub fn is_tls(self) -> bool {
        matches!(self, BackendProtocol::Https | BackendProtocol::H2)
    }
}

impl Backend {
    /// The protocol and Service name, when exactly one protocol key is set.
    pub fn protocol_and_name(&self) -> Option<(BackendProtocol, &str)> {
        let set: Vec<(BackendProtocol, &str)> = [
            (BackendProtocol::Http, &self.http),
            (BackendProtocol::Https, &self.https),
            (BackendProtocol::H2c, &self.http2),
            (BackendProtocol::H2c, &self.h2c),
            (BackendProtocol::H2, &self.https2),
            (BackendProtocol::H2, &self.h2),
            (BackendProtocol::Tcp, &self.tcp),
        ]
        .into_iter()
        .filter_map(|(p, n)| n.as_deref().map(|n| (p, n)))
        .collect();
        match set.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }
}

/// Request timeouts, as Go-style durations (`1s`, `150ms`, `1m30s`) or `infinity`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TimeoutPolicy {
    /// Time allowed for the whole request, from the first byte received to the last byte sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub request: Option<String>,
}

/// Retries and passive health checking (outlier detection) for a route's backends.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Retries of a failed request (default 1); also consecutive 5xx before a host is ejected (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub count: Option<u32>,
    /// Timeout of each try, as a Go-style duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub per_try_timeout: Option<String>,
    /// Eject hosts that answer 5xx repeatedly (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passive_health_check_enabled: Option<bool>,
    /// Retry failed requests (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy_enabled: Option<bool>,
}
