//! The store: an immutable snapshot of every object sluice reads, filled by the sources (kube watches
//! in cluster mode, the manifest directory in standalone mode, the files given to the CLI) and read by
//! `dag::build`, which never sees anything else.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use gateway_api::{
    apis::experimental::{
        gateways::Gateway, httproutes::HttpRoute as HTTPRoute, listenersets::ListenerSet,
        tcproutes::TcpRoute as TCPRoute,
    },
    apis::standard::backendtlspolicies::BackendTlsPolicy,
    apis::standard::{
        gatewayclasses::GatewayClass, grpcroutes::GrpcRoute as GRPCRoute,
        referencegrants::ReferenceGrant, tlsroutes::TlsRoute as TLSRoute,
    },
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};

use crate::api::{ObjKey, contour_v1, heptio_v1beta1, route_v1alpha1};
use crate::pmap::{DiffItem, OrdMap};

pub mod endpoints;
mod prepared;
mod secret_data;
mod service_index;

pub use endpoints::{Endpoint, Endpoints, EndpointsIter, slice_endpoints};
pub use prepared::{Prepare, Prepared};
pub use secret_data::{CaBundle, ConfigMapCa, SecretData, TlsSecretData};
pub use service_index::{PortEndpoints, ServiceEntry, ServiceIndex};

/// Objects of one kind by namespace/name (cluster-scoped kinds use an empty namespace).
///
/// A persistent sorted map ([`OrdMap`], the one the routing model is made of): cloning a snapshot is cheap and shares every object
/// and most of the map with the original, so each build can keep the snapshot it read, and two
/// snapshots are compared where they differ only.
pub type Objects<T> = OrdMap<ObjKey, Arc<T>>;

/// Whether two object maps hold the same objects; maps that share structure (one derived from the
/// other) are compared where they differ only.
pub fn same_objects<T: PartialEq>(a: &Objects<T>, b: &Objects<T>) -> bool {
    a.ptr_eq(b) || a == b
}

/// Calls `f` with each key whose object was added, removed or changed from `a` to `b`, with the
/// object before and after. Maps that share structure (one derived from the other) are compared
/// where they differ only.
pub fn each_change<T: PartialEq>(
    a: &Objects<T>,
    b: &Objects<T>,
    mut f: impl FnMut(&ObjKey, Option<&T>, Option<&T>),
) {
    each_shared_change(a, b, |k, old, new| {
        f(k, old.map(|o| &**o), new.map(|n| &**n))
    });
}

/// [`each_change`], with the objects as the maps share them.
fn each_shared_change<T: PartialEq>(
    a: &Objects<T>,
    b: &Objects<T>,
    mut f: impl FnMut(&ObjKey, Option<&Arc<T>>, Option<&Arc<T>>),
) {
    if a.ptr_eq(b) {
        return;
    }
    for item in a.diff(b) {
        match item {
            DiffItem::Add(k, v) => f(k, None, Some(v)),
            DiffItem::Remove(k, v) => f(k, Some(v), None),
            DiffItem::Update {
                old: (k, old),
                new: (_, new),
            } => f(k, Some(old), Some(new)),
        }
    }
}

/// Everything routing can depend on, as of one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Ingresses with what routing reads of them, prepared when they arrive (see [`Prepared`]).
    pub ingresses: Objects<Prepared<Ingress>>,
    pub ingress_classes: Objects<IngressClass>,
    /// IngressRoutes with what routing reads of them, prepared when they arrive (see [`Prepared`]).
    pub ingressroutes_v1beta1: Objects<Prepared<heptio_v1beta1::IngressRoute>>,
    pub ingressroutes_v1: Objects<Prepared<contour_v1::IngressRoute>>,
    pub routes_v1alpha1: Objects<route_v1alpha1::Route>,
    /// What routing reads of each Service (see [`ServicePorts`]). Changed only through
    /// [`Snapshot::put_service`], [`Snapshot::remove_service`] and [`Snapshot::set_services`],
    /// which keep `service_index`.
    services: Objects<ServicePorts>,
    /// What routing reads of each EndpointSlice (see [`SliceEndpoints`]), by the slice's key.
    /// Changed only through [`Snapshot::put_endpoint_slice`],
    /// [`Snapshot::remove_endpoint_slice`] and [`Snapshot::set_endpoint_slices`], which keep
    /// `service_index`.
    endpoint_slices: Objects<SliceEndpoints>,
    /// The Services and their EndpointSlices by Service name (see [`ServiceIndex`]).
    service_index: ServiceIndex,
    /// What routing reads of each Secret (see [`SecretData`]); cluster mode watches only
    /// `kubernetes.io/tls` Secrets.
    pub secrets: Objects<SecretData>,
    pub gateway_classes: Objects<GatewayClass>,
    pub gateways: Objects<Gateway>,
    /// HTTPRoutes and GRPCRoutes with their single-object verdicts ([`Prepared`]).
    pub http_routes: Objects<Prepared<HTTPRoute>>,
    pub grpc_routes: Objects<Prepared<GRPCRoute>>,
    pub tls_routes: Objects<TLSRoute>,
    pub tcp_routes: Objects<TCPRoute>,
    /// ListenerSets: listeners attached to a Gateway that allows them (`spec.allowedListeners`).
    pub listener_sets: Objects<ListenerSet>,
    pub reference_grants: Objects<ReferenceGrant>,
    /// The labels of each Namespace (see [`NamespaceLabels`]), by name: what a Gateway
    /// listener's `allowedRoutes.namespaces.selector` is matched against.
    pub namespaces: Objects<NamespaceLabels>,
    /// What routing reads of each ConfigMap: its `ca.crt` (see [`ConfigMapCa`]), the CA
    /// certificates a BackendTLSPolicy names.
    pub config_maps: Objects<ConfigMapCa>,
    pub backend_tls_policies: Objects<BackendTlsPolicy>,
}

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

/// What changed between two snapshots that differ in EndpointSlices only.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointChanges {
    /// Slices added, changed or removed.
    pub slices: Vec<ObjKey>,
    /// The Services (namespace/name) those slices belong or belonged to.
    pub services: std::collections::BTreeSet<ObjKey>,
}

/// One decoded object of any kind the store holds.
#[derive(Clone, Debug)]
pub enum AnyObject {
    Ingress(Arc<Ingress>),
    IngressClass(Arc<IngressClass>),
    IngressRouteV1beta1(Arc<heptio_v1beta1::IngressRoute>),
    IngressRouteV1(Arc<contour_v1::IngressRoute>),
    RouteV1alpha1(Arc<route_v1alpha1::Route>),
    Service(Arc<Service>),
    EndpointSlice(Arc<EndpointSlice>),
    Secret(Arc<Secret>),
    GatewayClass(Arc<GatewayClass>),
    Gateway(Arc<Gateway>),
    HttpRoute(Arc<HTTPRoute>),
    GrpcRoute(Arc<GRPCRoute>),
    TlsRoute(Arc<TLSRoute>),
    TcpRoute(Arc<TCPRoute>),
    ListenerSet(Arc<ListenerSet>),
    ReferenceGrant(Arc<ReferenceGrant>),
    Namespace(Arc<Namespace>),
    ConfigMap(Arc<ConfigMap>),
    BackendTlsPolicy(Arc<BackendTlsPolicy>),
}

macro_rules! each_object {
    ($obj:expr, $o:ident => $body:expr) => {
        match $obj {
            AnyObject::Ingress($o) => $body,
            AnyObject::IngressClass($o) => $body,
            AnyObject::IngressRouteV1beta1($o) => $body,
            AnyObject::IngressRouteV1($o) => $body,
            AnyObject::RouteV1alpha1($o) => $body,
            AnyObject::Service($o) => $body,
            AnyObject::EndpointSlice($o) => $body,
            AnyObject::Secret($o) => $body,
            AnyObject::GatewayClass($o) => $body,
            AnyObject::Gateway($o) => $body,
            AnyObject::HttpRoute($o) => $body,
            AnyObject::GrpcRoute($o) => $body,
            AnyObject::TlsRoute($o) => $body,
            AnyObject::TcpRoute($o) => $body,
            AnyObject::ListenerSet($o) => $body,
            AnyObject::ReferenceGrant($o) => $body,
            AnyObject::Namespace($o) => $body,
            AnyObject::ConfigMap($o) => $body,
            AnyObject::BackendTlsPolicy($o) => $body,
        }
    };
}

impl AnyObject {
    pub fn kind(&self) -> crate::api::Kind {
        use crate::api::Kind;
        match self {
            AnyObject::Ingress(_) => Kind::Ingress,
            AnyObject::IngressClass(_) => Kind::IngressClass,
            AnyObject::IngressRouteV1beta1(_) => Kind::IngressRouteV1beta1,
            AnyObject::IngressRouteV1(_) => Kind::IngressRouteV1,
            AnyObject::RouteV1alpha1(_) => Kind::RouteV1alpha1,
            AnyObject::Service(_) => Kind::Service,
            AnyObject::EndpointSlice(_) => Kind::EndpointSlice,
            AnyObject::Secret(_) => Kind::Secret,
            AnyObject::GatewayClass(_) => Kind::GatewayClass,
            AnyObject::Gateway(_) => Kind::Gateway,
            AnyObject::HttpRoute(_) => Kind::HttpRoute,
            AnyObject::GrpcRoute(_) => Kind::GrpcRoute,
            AnyObject::TlsRoute(_) => Kind::TlsRoute,
            AnyObject::TcpRoute(_) => Kind::TcpRoute,
            AnyObject::ListenerSet(_) => Kind::ListenerSet,
            AnyObject::ReferenceGrant(_) => Kind::ReferenceGrant,
            AnyObject::Namespace(_) => Kind::Namespace,
            AnyObject::ConfigMap(_) => Kind::ConfigMap,
            AnyObject::BackendTlsPolicy(_) => Kind::BackendTlsPolicy,
        }
    }

    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        each_object!(self, o => &o.metadata)
    }

    /// namespace/name; a namespaced object without a namespace is in `default`.
    pub fn key(&self) -> ObjKey {
        let meta = self.metadata();
        let namespace = if self.kind().is_cluster_scoped() {
            String::new()
        } else {
            meta.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string())
        };
        ObjKey::new(namespace, meta.name.clone().unwrap_or_default())
    }

    pub fn object_ref(&self) -> crate::api::ObjectRef {
        crate::api::ObjectRef {
            kind: self.kind(),
            key: self.key(),
        }
    }
}

/// Inserts `value` under `key`, whose namespace shares its text with the keys of that namespace
/// already in `map`. A build hashes and compares the namespace of nearly every key it looks up
/// (Services by a route's namespace, objects by key): a namespace's text held once stays in
/// the CPU's caches, where one copy per object cost a cache miss per comparison (about 4% of
/// a 10k build's misses).
fn put<T>(map: &mut Objects<T>, key: ObjKey, value: Arc<T>) {
    map.insert(shared_key(map, key), value);
}

/// [`put`] of `object` kept with what routing reads of it ([`Prepared`]).
fn put_prepared<T: Prepare>(map: &mut Objects<Prepared<T>>, key: ObjKey, object: Arc<T>) {
    let prepared = Arc::new(Prepared::new(&key, object));
    put(map, key, prepared);
}

/// `key`, with its namespace's text replaced by the one `map`'s keys of that namespace share.
fn shared_key<T>(map: &Objects<T>, key: ObjKey) -> ObjKey {
    let first_of_namespace = ObjKey::new(key.namespace.clone(), "");
    match map.range_from(&first_of_namespace).next() {
        Some((k, _)) if k.namespace == key.namespace => ObjKey {
            namespace: k.namespace.clone(),
            name: key.name,
        },
        _ => key,
    }
}

impl Snapshot {
    /// Adds or replaces an object (keyed by kind, namespace and name). Keys of one kind in one
    /// namespace share the namespace's text (see [`put`]).
    pub fn insert(&mut self, obj: AnyObject) {
        let key = obj.key();
        match obj {
            AnyObject::Ingress(o) => put_prepared(&mut self.ingresses, key, o),
            AnyObject::IngressClass(o) => put(&mut self.ingress_classes, key, o),
            AnyObject::IngressRouteV1beta1(o) => {
                put_prepared(&mut self.ingressroutes_v1beta1, key, o)
            }
            AnyObject::IngressRouteV1(o) => put_prepared(&mut self.ingressroutes_v1, key, o),
            AnyObject::RouteV1alpha1(o) => put(&mut self.routes_v1alpha1, key, o),
            AnyObject::Service(o) => self.put_service(key, Arc::new(ServicePorts::from(&*o))),
            AnyObject::EndpointSlice(o) => {
                self.put_endpoint_slice(key, Arc::new(SliceEndpoints::from(&*o)))
            }
            AnyObject::Secret(o) => put(&mut self.secrets, key, Arc::new(SecretData::from(&*o))),
            AnyObject::GatewayClass(o) => put(&mut self.gateway_classes, key, o),
            AnyObject::Gateway(o) => put(&mut self.gateways, key, o),
            AnyObject::HttpRoute(o) => put_prepared(&mut self.http_routes, key, o),
            AnyObject::GrpcRoute(o) => put_prepared(&mut self.grpc_routes, key, o),
            AnyObject::TlsRoute(o) => put(&mut self.tls_routes, key, o),
            AnyObject::TcpRoute(o) => put(&mut self.tcp_routes, key, o),
            AnyObject::ListenerSet(o) => put(&mut self.listener_sets, key, o),
            AnyObject::ReferenceGrant(o) => put(&mut self.reference_grants, key, o),
            AnyObject::Namespace(o) => put(
                &mut self.namespaces,
                key,
                Arc::new(NamespaceLabels::from(&*o)),
            ),
            AnyObject::ConfigMap(o) => {
                put(&mut self.config_maps, key, Arc::new(ConfigMapCa::from(&*o)))
            }
            AnyObject::BackendTlsPolicy(o) => put(&mut self.backend_tls_policies, key, o),
        }
    }

    /// Removes an object; returns whether it was there.
    pub fn remove(&mut self, kind: crate::api::Kind, key: &ObjKey) -> bool {
        use crate::api::Kind;
        match kind {
            Kind::Ingress => self.ingresses.remove(key).is_some(),
            Kind::IngressClass => self.ingress_classes.remove(key).is_some(),
            Kind::IngressRouteV1beta1 => self.ingressroutes_v1beta1.remove(key).is_some(),
            Kind::IngressRouteV1 => self.ingressroutes_v1.remove(key).is_some(),
            Kind::RouteV1alpha1 => self.routes_v1alpha1.remove(key).is_some(),
            Kind::Service => self.remove_service(key),
            Kind::EndpointSlice => self.remove_endpoint_slice(key),
            Kind::Secret => self.secrets.remove(key).is_some(),
            Kind::GatewayClass => self.gateway_classes.remove(key).is_some(),
            Kind::Gateway => self.gateways.remove(key).is_some(),
            Kind::HttpRoute => self.http_routes.remove(key).is_some(),
            Kind::GrpcRoute => self.grpc_routes.remove(key).is_some(),
            Kind::ReferenceGrant => self.reference_grants.remove(key).is_some(),
            Kind::TlsRoute => self.tls_routes.remove(key).is_some(),
            Kind::TcpRoute => self.tcp_routes.remove(key).is_some(),
            Kind::ListenerSet => self.listener_sets.remove(key).is_some(),
            Kind::Namespace => self.namespaces.remove(key).is_some(),
            Kind::ConfigMap => self.config_maps.remove(key).is_some(),
            Kind::BackendTlsPolicy => self.backend_tls_policies.remove(key).is_some(),
        }
    }

    /// What routing reads of each Service, by key.
    pub fn services(&self) -> &Objects<ServicePorts> {
        &self.services
    }

    /// What routing reads of each EndpointSlice, by the slice's key.
    pub fn endpoint_slices(&self) -> &Objects<SliceEndpoints> {
        &self.endpoint_slices
    }

    /// The Services and the EndpointSlices naming them, by namespace and Service name: what a
    /// build resolves backends in.
    pub fn service_index(&self) -> &ServiceIndex {
        &self.service_index
    }

    /// Adds or replaces a Service (what routing reads of it).
    pub fn put_service(&mut self, key: ObjKey, service: Arc<ServicePorts>) {
        let key = shared_key(&self.services, key);
        self.service_index.set_service(&key, Some(service.clone()));
        self.services.insert(key, service);
    }

    /// Removes a Service; returns whether it was there.
    pub fn remove_service(&mut self, key: &ObjKey) -> bool {
        let had = self.services.remove(key).is_some();
        if had {
            self.service_index.set_service(key, None);
        }
        had
    }

    /// Replaces every Service with those of `services`, usually a version of this snapshot's
    /// map (the index follows what differs).
    pub fn set_services(&mut self, services: Objects<ServicePorts>) {
        let index = &mut self.service_index;
        each_shared_change(&self.services, &services, |k, _, new| {
            index.set_service(k, new.cloned())
        });
        self.services = services;
    }

    /// Adds or replaces an EndpointSlice (what routing reads of it).
    pub fn put_endpoint_slice(&mut self, key: ObjKey, slice: Arc<SliceEndpoints>) {
        let key = shared_key(&self.endpoint_slices, key);
        let old = self.endpoint_slices.insert(key.clone(), slice.clone());
        self.service_index
            .relink_slice(&key, old.as_deref(), Some(&slice));
    }

    /// Removes an EndpointSlice; returns whether it was there.
    pub fn remove_endpoint_slice(&mut self, key: &ObjKey) -> bool {
        let Some(old) = self.endpoint_slices.remove(key) else {
            return false;
        };
        self.service_index.relink_slice(key, Some(&old), None);
        true
    }

    /// Replaces every EndpointSlice with those of `slices`, usually a version of this
    /// snapshot's map (the index follows what differs).
    pub fn set_endpoint_slices(&mut self, slices: Objects<SliceEndpoints>) {
        let index = &mut self.service_index;
        each_shared_change(&self.endpoint_slices, &slices, |k, old, new| {
            index.relink_slice(k, old.map(|o| &**o), new)
        });
        self.endpoint_slices = slices;
    }

    /// Number of routing objects held: Ingresses, IngressRoutes of both versions and Routes (the
    /// objects `dag::build` builds).
    pub fn routing_objects(&self) -> usize {
        self.ingresses.len()
            + self.ingressroutes_v1beta1.len()
            + self.ingressroutes_v1.len()
            + self.routes_v1alpha1.len()
    }

    /// Number of objects held, all kinds together.
    pub fn len(&self) -> usize {
        self.ingresses.len()
            + self.ingress_classes.len()
            + self.ingressroutes_v1beta1.len()
            + self.ingressroutes_v1.len()
            + self.routes_v1alpha1.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
            + self.gateway_classes.len()
            + self.gateways.len()
            + self.http_routes.len()
            + self.grpc_routes.len()
            + self.tls_routes.len()
            + self.tcp_routes.len()
            + self.listener_sets.len()
            + self.reference_grants.len()
            + self.namespaces.len()
            + self.config_maps.len()
            + self.backend_tls_policies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When `next` differs from this snapshot in EndpointSlices only, which slices and Services
    /// changed; None when anything else changed. Objects are compared by value, where the maps do
    /// not share structure (a snapshot derived from this one shares all it did not change). The
    /// endpoint fast path of the pipeline starts here.
    pub fn endpoint_only_changes(&self, next: &Snapshot) -> Option<EndpointChanges> {
        let Snapshot {
            ingresses,
            ingress_classes,
            ingressroutes_v1beta1,
            ingressroutes_v1,
            routes_v1alpha1,
            services,
            endpoint_slices,
            service_index: _,
            secrets,
            gateway_classes,
            gateways,
            http_routes,
            grpc_routes,
            tls_routes,
            tcp_routes,
            listener_sets,
            reference_grants,
            namespaces,
            config_maps,
            backend_tls_policies,
        } = self;
        let unchanged = same_objects(ingresses, &next.ingresses)
            && same_objects(ingress_classes, &next.ingress_classes)
            && same_objects(ingressroutes_v1beta1, &next.ingressroutes_v1beta1)
            && same_objects(ingressroutes_v1, &next.ingressroutes_v1)
            && same_objects(routes_v1alpha1, &next.routes_v1alpha1)
            && same_objects(services, &next.services)
            && same_objects(secrets, &next.secrets)
            && same_objects(gateway_classes, &next.gateway_classes)
            && same_objects(gateways, &next.gateways)
            && same_objects(http_routes, &next.http_routes)
            && same_objects(grpc_routes, &next.grpc_routes)
            && same_objects(tls_routes, &next.tls_routes)
            && same_objects(tcp_routes, &next.tcp_routes)
            && same_objects(listener_sets, &next.listener_sets)
            && same_objects(reference_grants, &next.reference_grants)
            && same_objects(namespaces, &next.namespaces)
            && same_objects(config_maps, &next.config_maps)
            && same_objects(backend_tls_policies, &next.backend_tls_policies);
        if !unchanged {
            return None;
        }
        let mut changes = EndpointChanges::default();
        let mut note = |key: &ObjKey, slice: &SliceEndpoints| {
            if changes.slices.last() != Some(key) {
                changes.slices.push(key.clone());
            }
            if let Some(svc) = &slice.service {
                changes
                    .services
                    .insert(ObjKey::new(key.namespace.clone(), &**svc));
            }
        };
        // Both maps are sorted: walk them side by side.
        each_change(endpoint_slices, &next.endpoint_slices, |key, old, new| {
            for slice in [old, new].into_iter().flatten() {
                note(key, slice);
            }
        });
        Some(changes)
    }

    /// Builds a snapshot from decoded objects; later duplicates replace earlier ones.
    pub fn from_objects(objects: impl IntoIterator<Item = AnyObject>) -> Snapshot {
        let mut s = Snapshot::default();
        for o in objects {
            s.insert(o);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(v: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn keys_of_one_kind_in_one_namespace_share_its_text() {
        let svc = |ns: &str, name: &str| {
            // Each object's namespace a string of its own, as a watch delivers them.
            AnyObject::Service(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}}))
                    .unwrap(),
            ))
        };
        let mut s = Snapshot::default();
        for (ns, name) in [("shop", "b"), ("shop", "a"), ("blog", "a"), ("shop", "c")] {
            s.insert(svc(ns, name));
        }
        // Replaced, then removed and added again: still one text per namespace.
        s.insert(svc("shop", "a"));
        s.remove(crate::api::Kind::Service, &ObjKey::new("shop", "b"));
        s.insert(svc("shop", "b"));
        let keys: Vec<&ObjKey> = s.services.keys().collect();
        let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(names, ["blog/a", "shop/a", "shop/b", "shop/c"]);
        for k in &keys[2..] {
            assert!(Arc::ptr_eq(&k.namespace, &keys[1].namespace), "{k}");
        }
        assert!(!Arc::ptr_eq(&keys[0].namespace, &keys[1].namespace));
        // Lookups by a key made elsewhere find them.
        assert!(s.services.contains_key(&ObjKey::new("shop", "c")));
    }

    #[test]
    fn a_slice_is_kept_as_what_routing_reads() {
        let full = slice(json!({
            "metadata": {"name": "web-x1", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web", "other": "x"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"port": 9090}, {"name": "big", "port": 70000},
                      {"name": "zero", "port": 0}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true},
                 "nodeName": "node-1", "zone": "a",
                 "targetRef": {"kind": "Pod", "name": "web-1", "namespace": "shop"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3", "10.0.0.4"]},
                {"addresses": ["10.0.0.5"], "conditions": {}},
            ],
        }));
        let kept = SliceEndpoints::from(&full);
        assert_eq!(kept.service.as_deref(), Some("web"));
        assert_eq!(kept.port("http"), Some(8080));
        assert_eq!(kept.port(""), Some(9090));
        assert_eq!(kept.port("big"), None, "out of range");
        assert_eq!(kept.port("zero"), None, "port 0");
        assert_eq!(kept.port("missing"), None);
        let ready: Vec<String> = kept.ready.iter().map(|a| a.to_string()).collect();
        assert_eq!(ready, ["10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);

        // What routing does not read makes no difference.
        let mut moved = full.clone();
        moved.endpoints[0].node_name = Some("node-2".into());
        moved.endpoints[0].zone = Some("b".into());
        moved.endpoints[0].conditions.as_mut().unwrap().serving = Some(false);
        moved.metadata.labels.as_mut().unwrap().remove("other");
        assert_eq!(SliceEndpoints::from(&moved), kept);
        // Nor does the order of the endpoints, or an address listed twice.
        let mut reordered = full.clone();
        reordered.endpoints.reverse();
        let twice = reordered.endpoints[0].clone();
        reordered.endpoints.push(twice);
        assert_eq!(SliceEndpoints::from(&reordered), kept);

        let bare = SliceEndpoints::from(&slice(json!({"metadata": {}, "addressType": "IPv4",
                                                       "endpoints": []})));
        assert_eq!(bare, SliceEndpoints::default());
    }

    #[test]
    fn a_ca_bundle_is_kept_once_its_certificates_parse() {
        let secret = |data: serde_json::Value| -> SecretData {
            let s: Secret = serde_json::from_value(json!({
                "metadata": {"name": "ca", "namespace": "web"},
                "stringData": data,
            }))
            .unwrap();
            SecretData::from(&s)
        };
        let a = rcgen::generate_simple_self_signed(vec!["a.example.com".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.example.com".into()]).unwrap();
        let two = format!("{}{}", a.cert.pem(), b.cert.pem());
        let kept = secret(json!({"ca.crt": two}));
        assert_eq!(kept.ca, CaBundle::Usable(two.clone().into()));
        // A CA-only Secret has no certificate to serve, and needs none.
        assert_eq!(kept.tls, TlsSecretData::Unusable("it has no tls.crt"));
        let framed = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
        for (ca, what) in [
            (
                format!("{}{framed}", a.cert.pem()),
                "ca.crt holds a certificate that is not a valid X.509 certificate",
            ),
            ("no PEM here".to_string(), "ca.crt holds no PEM certificate"),
        ] {
            assert_eq!(secret(json!({"ca.crt": ca})).ca, CaBundle::Unusable(what));
        }
        assert_eq!(
            secret(json!({"tls.crt": a.cert.pem()})).ca,
            CaBundle::Unusable("it has no ca.crt")
        );
    }

    #[test]
    fn a_tls_secret_is_kept_once_its_certificate_and_key_are_checked() {
        let secret = |crt: &str, key: &str| -> TlsSecretData {
            let s: Secret = serde_json::from_value(json!({
                "metadata": {"name": "tls", "namespace": "web"},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": crt, "tls.key": key},
            }))
            .unwrap();
            TlsSecretData::from(&s)
        };
        let a = rcgen::generate_simple_self_signed(vec!["a.example.com".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.example.com".into()]).unwrap();
        let (a_crt, a_key) = (a.cert.pem(), a.signing_key.serialize_pem());
        let b_key = b.signing_key.serialize_pem();
        assert_eq!(
            secret(&a_crt, &a_key),
            TlsSecretData::Usable {
                cert_pem: a_crt.clone().into(),
                key_pem: a_key.clone().into()
            }
        );
        assert_eq!(
            secret(&a_crt, &b_key),
            TlsSecretData::Unusable(
                "tls.key is not the private key of the first certificate in tls.crt"
            )
        );
        // PEM framing around bytes that are no certificate.
        let framed = "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n";
        assert_eq!(
            secret(framed, &a_key),
            TlsSecretData::Unusable(
                "the first certificate in tls.crt is not a valid X.509 certificate"
            )
        );
        assert_eq!(
            secret("not a certificate", &a_key),
            TlsSecretData::Unusable("tls.crt holds no PEM certificate")
        );
        assert_eq!(
            secret(&a_crt, &a_crt),
            TlsSecretData::Unusable("tls.key holds no PEM private key")
        );
        let missing: Secret = serde_json::from_value(json!({
            "metadata": {"name": "tls", "namespace": "web"},
            "data": {"tls.key": "a2V5"},
        }))
        .unwrap();
        assert_eq!(
            TlsSecretData::from(&missing),
            TlsSecretData::Unusable("it has no tls.crt")
        );
    }

    #[test]
    fn a_slice_keeps_ip_addresses_only() {
        let ready = |v: serde_json::Value| -> Vec<String> {
            SliceEndpoints::from(&slice(v))
                .ready
                .iter()
                .map(|a| a.to_string())
                .collect()
        };
        let v6 = ready(json!({"metadata": {}, "addressType": "IPv6",
                               "endpoints": [{"addresses": ["fd00::1", "2001:db8::a"]}]}));
        // Kept sorted as numbers, whatever order the slice lists them in.
        assert_eq!(v6, ["2001:db8::a", "fd00::1"]);
        // Hostnames (an FQDN slice) are not endpoints Envoy accepts.
        let fqdn = ready(json!({"metadata": {}, "addressType": "FQDN",
                                 "endpoints": [{"addresses": ["db.example.com"]}]}));
        assert!(fqdn.is_empty(), "{fqdn:?}");
        // Whatever else a slice holds that is not an IP address is left out, the rest kept.
        let mixed = ready(json!({"metadata": {}, "addressType": "IPv4",
                                  "endpoints": [{"addresses": ["10.0.0.1"]},
                                                {"addresses": ["10.0.0.300", " 10.0.0.2", ""]},
                                                {"addresses": ["10.0.0.3"]}]}));
        assert_eq!(mixed, ["10.0.0.1", "10.0.0.3"]);
        // Addresses are kept parsed: a cluster's endpoints are ordered as numbers, and two
        // spellings of one IPv6 address are one endpoint in its canonical form.
        let endpoints = |family: &str, addresses: &[&str]| -> Vec<String> {
            let s = SliceEndpoints::from(&slice(json!({"metadata": {}, "addressType": family,
                "endpoints": [{"addresses": addresses}], "ports": [{"name": "", "port": 80}]})));
            let eps = slice_endpoints([&s], "");
            eps.iter().map(|e| e.address.to_string()).collect()
        };
        let spelled = endpoints("IPv6", &["2001:DB8:0::1", "fd00::1", "2001:db8::1"]);
        assert_eq!(spelled, ["2001:db8::1", "fd00::1"]);
        let numbered = endpoints("IPv4", &["10.0.0.10", "10.0.0.9", "9.0.0.1"]);
        assert_eq!(numbered, ["9.0.0.1", "10.0.0.9", "10.0.0.10"]);
    }

    #[test]
    fn a_service_is_kept_as_what_routing_reads() {
        let svc = |v: serde_json::Value| -> Service { serde_json::from_value(v).unwrap() };
        let full = svc(json!({
            "metadata": {"name": "web", "namespace": "shop", "labels": {"tier": "web"}},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                               {"port": 9000, "protocol": "UDP"}]},
        }));
        let kept = ServicePorts::from(&full);
        assert!(!kept.external_name);
        assert_eq!(
            kept.ports
                .iter()
                .map(|p| (p.slice_port_name(), p.port))
                .collect::<Vec<_>>(),
            [("http", 80), ("", 9000)]
        );
        assert_eq!(kept.ports[1].name, None);
        let mut relabelled = full.clone();
        relabelled.metadata.labels = None;
        relabelled.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.11".into());
        assert_eq!(ServicePorts::from(&relabelled), kept);

        let external = svc(json!({"metadata": {"name": "ext"},
                                  "spec": {"type": "ExternalName", "externalName": "db.example.com"}}));
        assert_eq!(
            ServicePorts::from(&external),
            ServicePorts {
                external_name: true,
                ports: Box::new([]),
            }
        );
        assert_eq!(
            ServicePorts::from(&svc(json!({"metadata": {}}))),
            ServicePorts::default()
        );
    }

    #[test]
    fn the_snapshot_stores_slices_reduced_and_finds_endpoint_only_changes() {
        let mk = |addr: &str, zone: &str| {
            AnyObject::EndpointSlice(Arc::new(slice(json!({
                "metadata": {"name": "web-x1", "namespace": "shop",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [addr], "zone": zone}],
            }))))
        };
        let a = Snapshot::from_objects([mk("10.0.0.1", "a")]);
        let key = ObjKey::new("shop", "web-x1");
        assert_eq!(a.endpoint_slices[&key].ready[0].to_string(), "10.0.0.1");

        let mut b = a.clone();
        b.insert(mk("10.0.0.1", "b"));
        assert_eq!(
            a.endpoint_only_changes(&b),
            Some(EndpointChanges::default())
        );

        b.insert(mk("10.0.0.9", "b"));
        let changes = a.endpoint_only_changes(&b).unwrap();
        assert_eq!(changes.slices, vec![key.clone()]);
        assert_eq!(
            changes.services.into_iter().collect::<Vec<_>>(),
            vec![ObjKey::new("shop", "web")]
        );
        assert!(b.remove(crate::api::Kind::EndpointSlice, &key));
        assert!(b.endpoint_slices.is_empty());
    }
}
