//! API types sluice serves: its own CRDs plus the upstream Kubernetes and Gateway API types it reads.
//!
//! - [`heptio_v1beta1`]: `IngressRoute` `contour.heptio.com/v1beta1` (delegation by path prefix).
//! - [`contour_v1`]: `IngressRoute` `projectcontour.io/v1` (path + header conditions, header delegation).
//! - [`route_v1alpha1`]: `Route` `contour.heptio.com/v1alpha1` (one virtual host, upstreams).
//! - [`status`]: the status shape every routing object shares, and the condition vocabulary.

pub mod contour_v1;
pub mod crds;
pub mod gateway_route;
pub mod heptio_v1beta1;
pub mod route_v1alpha1;
pub mod status;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Every kind of object the store holds. Routing kinds get a status from `dag::build`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Ingress,
    IngressClass,
    IngressRouteV1beta1,
    IngressRouteV1,
    RouteV1alpha1,
    Service,
    EndpointSlice,
    Secret,
    GatewayClass,
    Gateway,
    HttpRoute,
    GrpcRoute,
    TlsRoute,
    TcpRoute,
    /// `ListenerSet` `gateway.networking.k8s.io/v1`: listeners attached to a Gateway (GEP-1713).
    ListenerSet,
    ReferenceGrant,
    Namespace,
    /// Read for what routing needs of it: the `ca.crt` a BackendTLSPolicy names.
    ConfigMap,
    BackendTlsPolicy,
}

impl Kind {
    pub const ALL: [Kind; 19] = [
        Kind::Ingress,
        Kind::IngressClass,
        Kind::IngressRouteV1beta1,
        Kind::IngressRouteV1,
        Kind::RouteV1alpha1,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
        Kind::GatewayClass,
        Kind::Gateway,
        Kind::HttpRoute,
        Kind::GrpcRoute,
        Kind::TlsRoute,
        Kind::TcpRoute,
        Kind::ListenerSet,
        Kind::ReferenceGrant,
        Kind::Namespace,
        Kind::ConfigMap,
        Kind::BackendTlsPolicy,
    ];

    /// `apiVersion` as written in manifests.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Ingress | Kind::IngressClass => "networking.k8s.io/v1",
            Kind::IngressRouteV1beta1 => "contour.heptio.com/v1beta1",
            Kind::IngressRouteV1 => "projectcontour.io/v1",
            Kind::RouteV1alpha1 => "contour.heptio.com/v1alpha1",
            Kind::Service | Kind::Secret | Kind::Namespace | Kind::ConfigMap => "v1",
            Kind::EndpointSlice => "discovery.k8s.io/v1",
            Kind::GatewayClass
            | Kind::Gateway
            | Kind::HttpRoute
            | Kind::GrpcRoute
            | Kind::TlsRoute
            | Kind::ReferenceGrant
            | Kind::BackendTlsPolicy => "gateway.networking.k8s.io/v1",
            Kind::TcpRoute | Kind::ListenerSet => "gateway.networking.k8s.io/v1",
        }
    }

    /// `kind` as written in manifests.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Ingress => "Ingress",
            Kind::IngressClass => "IngressClass",
            Kind::IngressRouteV1beta1 | Kind::IngressRouteV1 => "IngressRoute",
            Kind::RouteV1alpha1 => "Route",
            Kind::Service => "Service",
            Kind::EndpointSlice => "EndpointSlice",
            Kind::Secret => "Secret",
            Kind::GatewayClass => "GatewayClass",
            Kind::Gateway => "Gateway",
            Kind::HttpRoute => "HTTPRoute",
            Kind::GrpcRoute => "GRPCRoute",
            Kind::TlsRoute => "TLSRoute",
            Kind::TcpRoute => "TCPRoute",
            Kind::ListenerSet => "ListenerSet",
            Kind::ReferenceGrant => "ReferenceGrant",
            Kind::Namespace => "Namespace",
            Kind::ConfigMap => "ConfigMap",
            Kind::BackendTlsPolicy => "BackendTLSPolicy",
        }
    }

    /// The API group (empty for the core group).
    pub fn group(self) -> &'static str {
        self.api_version()
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }

    /// Resolves `apiVersion` + `kind` as found in a manifest or an AdmissionReview.
    /// Gateway API kinds are accepted at every version the upstream project has served them.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let k = match (group, kind) {
            ("networking.k8s.io", "Ingress") if api_version.ends_with("/v1") => Kind::Ingress,
            ("networking.k8s.io", "IngressClass") if api_version.ends_with("/v1") => {
                Kind::IngressClass
            }
            ("contour.heptio.com", "IngressRoute") if api_version.ends_with("/v1beta1") => {
                Kind::IngressRouteV1beta1
            }
            ("projectcontour.io", "IngressRoute") if api_version.ends_with("/v1") => {
                Kind::IngressRouteV1
            }
            ("contour.heptio.com", "Route") if api_version.ends_with("/v1alpha1") => {
                Kind::RouteV1alpha1
            }
            ("", "Service") if api_version == "v1" => Kind::Service,
            ("", "Secret") if api_version == "v1" => Kind::Secret,
            ("", "Namespace") if api_version == "v1" => Kind::Namespace,
            ("", "ConfigMap") if api_version == "v1" => Kind::ConfigMap,
            ("discovery.k8s.io", "EndpointSlice") if api_version.ends_with("/v1") => {
                Kind::EndpointSlice
            }
            ("gateway.networking.k8s.io", "GatewayClass") => Kind::GatewayClass,
            ("gateway.networking.k8s.io", "Gateway") => Kind::Gateway,
            ("gateway.networking.k8s.io", "HTTPRoute") => Kind::HttpRoute,
            ("gateway.networking.k8s.io", "GRPCRoute") => Kind::GrpcRoute,
            ("gateway.networking.k8s.io", "TLSRoute") => Kind::TlsRoute,
            ("gateway.networking.k8s.io", "TCPRoute") => Kind::TcpRoute,
            ("gateway.networking.k8s.io", "ListenerSet") => Kind::ListenerSet,
            ("gateway.networking.k8s.io", "ReferenceGrant") => Kind::ReferenceGrant,
            ("gateway.networking.k8s.io", "BackendTLSPolicy") => Kind::BackendTlsPolicy,
            _ => return None,
        };
        Some(k)
    }

    /// Cluster-scoped kinds have no namespace.
    pub fn is_cluster_scoped(self) -> bool {
        matches!(
            self,
            Kind::IngressClass | Kind::GatewayClass | Kind::Namespace
        )
    }

    /// Kinds that describe routing and therefore get a status from the DAG.
    pub fn is_routing(self) -> bool {
        matches!(
            self,
            Kind::Ingress
                | Kind::IngressRouteV1beta1
                | Kind::IngressRouteV1
                | Kind::RouteV1alpha1
                | Kind::GatewayClass
                | Kind::Gateway
                | Kind::HttpRoute
                | Kind::GrpcRoute
                | Kind::TlsRoute
                | Kind::TcpRoute
                | Kind::ListenerSet
                | Kind::BackendTlsPolicy
        )
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.api_version())
    }
}

/// Namespace + name of a namespaced object (namespace empty for cluster-scoped ones).
///
/// The parts are shared strings: a key is copied wherever the object is named (its status, the
/// routes it defines, the walks that reach it), and a copy costs two reference counts, not two
/// allocations.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjKey {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        ObjKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written piece by piece: keys are formatted into many status messages, and `write!`
        // would go through the formatting machinery (padding included) for each part.
        if !self.namespace.is_empty() {
            f.write_str(&self.namespace)?;
            f.write_str("/")?;
        }
        f.write_str(&self.name)
    }
}

/// A reference to one object of one kind: the unit status is computed for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: Kind,
    pub key: ObjKey,
}

impl ObjectRef {
    pub fn new(kind: Kind, namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> Self {
        ObjectRef {
            kind,
            key: ObjKey::new(namespace, name),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.kind())?;
        f.write_str(" ")?;
        fmt::Display::fmt(&self.key, f)
    }
}

/// The load-balancing strategies of seeds 000 and 004, shared by every sluice CRD.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum LbStrategy {
    #[default]
    RoundRobin,
    WeightedLeastRequest,
    Random,
}

/// Active HTTP health checking of upstream hosts (seeds 000 and 004).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// HTTP path probed on each upstream host; a 200 marks it healthy, a 503 unhealthy at once.
    pub path: String,
    /// Host header of the probe; defaults to `contour-envoy-healthcheck`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Seconds between probes (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub interval_seconds: Option<i64>,
    /// Seconds to wait for a probe's answer (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<i64>,
    /// Failed probes before a host is unhealthy (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub unhealthy_threshold_count: Option<u32>,
    /// Passed probes before a host is healthy again (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub healthy_threshold_count: Option<u32>,
}

/// Minimum TLS version a virtual host negotiates.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum TlsVersion {
    #[default]
    #[serde(rename = "1.1")]
    V1_1,
    #[serde(rename = "1.2")]
    V1_2,
    #[serde(rename = "1.3")]
    V1_3,
}

/// A reference to another IngressRoute that takes over part of the route space.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delegate {
    /// Name of the IngressRoute delegated to.
    pub name: String,
    /// Its namespace; the delegating object's own namespace when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Delegate {
    /// The namespace the delegation names: its own, or the delegating object's (`own_ns`) when
    /// it names none.
    pub fn namespace_in<'a>(&'a self, own_ns: &'a str) -> &'a str {
        self.namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(own_ns)
    }
}

// The stored routing objects are `Eq`: their equality is an equivalence (strings, integers,
// booleans and JSON values, which hold no NaN), and with `Eq` an `Arc` of one compares its
// pointers before its contents. The store's diffs (`store::each_change`) compare the objects
// around a changed one: a whole persistent-map leaf of them per change, which without this
// compared every field of each unchanged neighbour.
impl Eq for heptio_v1beta1::IngressRoute {}
impl Eq for contour_v1::IngressRoute {}
impl Eq for route_v1alpha1::Route {}

#[cfg(test)]
mod stored_objects_tests {
    /// Compiles only while the stored kinds are `Eq` (see above).
    #[test]
    fn stored_routing_objects_are_eq() {
        fn eq<T: Eq>() {}
        eq::<super::heptio_v1beta1::IngressRoute>();
        eq::<super::contour_v1::IngressRoute>();
        eq::<super::route_v1alpha1::Route>();
        eq::<crate::store::ServicePorts>();
        eq::<crate::store::SliceEndpoints>();
        eq::<crate::store::TlsSecretData>();
    }
}
