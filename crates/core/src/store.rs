//! The store: an immutable snapshot of every object sluice reads, filled by the sources (kube watches
//! in cluster mode, the manifest directory in standalone mode, the files given to the CLI) and read by
//! `dag::build`, which never sees anything else.

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
mod reads;
mod secret_data;
mod service_index;

pub use endpoints::{Endpoint, Endpoints, EndpointsIter, slice_endpoints};
pub use prepared::{Prepare, Prepared};
pub use reads::{
    APP_PROTOCOL_H2C, APP_PROTOCOL_WSS, AppProtocol, NamespaceLabels, SERVICE_NAME_LABEL,
    ServicePortRef, ServicePorts, SliceEndpoints,
};
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
    pub tls_routes: Objects<Prepared<TLSRoute>>,
    pub tcp_routes: Objects<Prepared<TCPRoute>>,
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
            AnyObject::TlsRoute(o) => put_prepared(&mut self.tls_routes, key, o),
            AnyObject::TcpRoute(o) => put_prepared(&mut self.tcp_routes, key, o),
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
#[path = "store/snapshot_tests.rs"]
mod tests;
