//! What routing reads of the kinds it does not route by itself (Namespaces, Services,
//! EndpointSlices): the store keeps these instead of the whole objects.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// What routing reads of a Namespace: its labels. A change to anything else of a Namespace (its
/// status, annotations) compares equal and rebuilds nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceLabels {
    pub labels: BTreeMap<String, String>,
}

impl From<&Namespace> for NamespaceLabels {
    fn from(n: &Namespace) -> Self {
        NamespaceLabels {
            labels: n.metadata.labels.clone().unwrap_or_default(),
        }
    }
}

/// What routing reads of one Service: whether it is of type ExternalName (not routable) and its
/// ports. The store keeps this instead of the whole object (a tenth of its memory); a Service
/// update that changes anything else (labels, selector, cluster IPs) compares equal and rebuilds
/// nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePorts {
    pub external_name: bool,
    pub ports: Box<[ServicePortRef]>,
}

/// One port of a Service: its name (as the EndpointSlices' ports name it) and number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePortRef {
    pub name: Option<Box<str>>,
    pub port: i32,
    /// What its `appProtocol` says it speaks, of what Gateway API routes read.
    pub app_protocol: AppProtocol,
}

/// A Service port's `appProtocol`, as Gateway API routes read it (GEP-1911): Kubernetes' own
/// names for cleartext HTTP/2 and WebSockets over TLS change how sluice speaks to the port;
/// every other value (none, `http`, `kubernetes.io/ws`, names of other projects) is HTTP/1.1,
/// over which a WebSocket upgrade goes through as on every route of sluice's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AppProtocol {
    #[default]
    Http,
    /// `kubernetes.io/h2c`: cleartext HTTP/2.
    H2c,
    /// `kubernetes.io/wss`: WebSockets over TLS, which sluice does not speak to backends.
    WebSocketTls,
}

/// The `appProtocol` of a Service port that speaks cleartext HTTP/2 (Kubernetes' own name).
pub const APP_PROTOCOL_H2C: &str = "kubernetes.io/h2c";
/// The `appProtocol` of a Service port that speaks WebSockets over TLS.
pub const APP_PROTOCOL_WSS: &str = "kubernetes.io/wss";

impl AppProtocol {
    /// The protocol of a Service port's `appProtocol` value.
    pub fn of(app_protocol: Option<&str>) -> AppProtocol {
        match app_protocol {
            Some(APP_PROTOCOL_H2C) => AppProtocol::H2c,
            Some(APP_PROTOCOL_WSS) => AppProtocol::WebSocketTls,
            _ => AppProtocol::Http,
        }
    }
}

impl ServicePortRef {
    /// The name EndpointSlice ports carry for this port ("" when it has none).
    pub fn slice_port_name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

impl From<&Service> for ServicePorts {
    fn from(svc: &Service) -> Self {
        let spec = svc.spec.as_ref();
        ServicePorts {
            external_name: spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName"),
            ports: spec
                .and_then(|s| s.ports.as_deref())
                .unwrap_or_default()
                .iter()
                .map(|p| ServicePortRef {
                    name: p.name.as_deref().map(Into::into),
                    port: p.port,
                    app_protocol: AppProtocol::of(p.app_protocol.as_deref()),
                })
                .collect(),
        }
    }
}

/// Label EndpointSlices carry to name their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What routing reads of one EndpointSlice: the Service it belongs to, its ports and the addresses
/// of its ready endpoints. The store keeps this instead of the whole object: a Kubernetes
/// `Endpoint` carries room for a Pod reference, node, zone and hints that routing never reads,
/// about ten times the memory of what it does read. It also means a slice update that changes
/// only such fields (a Pod's node, a `serving` condition) compares equal and pushes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceEndpoints {
    /// The slice's `kubernetes.io/service-name` label.
    pub service: Option<Box<str>>,
    /// Each port's name ("" when unnamed) and number; None when the number is missing or does not
    /// fit a port (a slice whose matching port has no usable number contributes no endpoints).
    pub ports: Box<[(Box<str>, Option<u16>)]>,
    /// The addresses of the endpoints that are ready (an endpoint without a `ready` condition
    /// counts as ready, as Kubernetes specifies), sorted and without repeats: the set a cluster
    /// takes its endpoints from, so an update that only reorders a slice's endpoints compares
    /// equal, and a cluster of one slice needs no sort of its own. Only IP addresses: Envoy takes
    /// nothing else as an endpoint of a cluster whose endpoints sluice sends, so the hostnames of
    /// an `FQDN` slice are left out rather than sent for Envoy to refuse.
    /// Held parsed: 16 bytes each and no allocation, compared as numbers; written out in their
    /// canonical form (an IPv6 address in another spelling is the same endpoint). Shared: a
    /// cluster whose endpoints all come from this slice holds this list too
    /// ([`Endpoints`]).
    pub ready: Arc<[IpAddr]>,
}

impl SliceEndpoints {
    /// The number of the port named `name`, when the slice has that port with a usable number.
    pub fn port(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .find(|(n, _)| &**n == name)
            .and_then(|(_, p)| *p)
    }
}

impl From<&EndpointSlice> for SliceEndpoints {
    fn from(slice: &EndpointSlice) -> Self {
        SliceEndpoints {
            service: slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .map(|s| s.as_str().into()),
            ports: slice
                .ports
                .iter()
                .flatten()
                .map(|p| {
                    (
                        p.name.as_deref().unwrap_or("").into(),
                        // 0 and out-of-range numbers are no port (nothing listens on them).
                        p.port
                            .and_then(|n| u16::try_from(n).ok())
                            .filter(|n| *n != 0),
                    )
                })
                .collect(),
            ready: {
                let mut ready: Vec<IpAddr> = (slice.endpoints.iter())
                    .filter(|ep| ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
                    .flat_map(|ep| ep.addresses.iter())
                    .filter_map(|a| a.parse::<IpAddr>().ok())
                    .collect();
                ready.sort_unstable();
                ready.dedup();
                ready.into()
            },
        }
    }
}
