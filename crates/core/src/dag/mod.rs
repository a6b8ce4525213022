//! `dag::build`: a pure function from a [`Snapshot`] to the routing model and a status for every
//! routing object, computed in one pass so status and Envoy config can never disagree.
//!
//! One processor per source kind writes into the shared [`Builder`]:
//! - [`ingressroute`]: IngressRoute `contour.heptio.com/v1beta1` and `projectcontour.io/v1`
//!   (roots, delegation, orphans, cycles);
//! - [`route`]: Route `contour.heptio.com/v1alpha1`;
//! - [`ingress`]: Ingress `networking.k8s.io/v1` (pathType, wildcard hosts, class selection);
//! - [`gateway`]: the Gateway API (GatewayClass, Gateway, HTTPRoute of sluice's controller).
//!
//! No async, no kube client, no Envoy types. Work is linear in the number of objects: objects are
//! looked up through maps built once per build, never by scanning all objects per object.

pub mod addresses;
pub mod backend_tls;
mod backend_tls_state;
mod builder;
mod clusters;
mod delegation;
mod features;
pub mod frontend_tls;
pub mod gateway;
mod gateway_acc;
mod gateway_addresses;
mod gateway_common;
mod gateway_listeners;
pub mod grpcroute;
mod gwroute;
mod halves;
mod hosts;
pub mod httproute;
pub mod incremental;
pub mod ingress;
pub mod ingressroute;
mod links;
mod listenerset;
pub mod lookup;
pub mod model;
mod parallel;
pub mod route;
mod slots;
mod sort;
mod status;
pub mod table;
pub mod tcproute;
pub mod tlsroute;

pub use crate::store::slice_endpoints;
pub use builder::{
    BackendRef, Builder, DEFAULT_HEALTH_CHECK_HOST, PortRef, SERVICE_NAME_LABEL, cluster_endpoints,
    clusters_of_service, effective_weights, health_check_policy, route_precedence,
};
pub use model::*;

use crate::store::Snapshot;

/// The ingress class sluice serves unless told otherwise.
pub const DEFAULT_INGRESS_CLASS: &str = "sluice";
/// The Gateway API `controllerName` that is sluice's unless told otherwise.
pub const DEFAULT_GATEWAY_CONTROLLER_NAME: &str = "sluice.dev/gateway-controller";

/// Build options shared by `sluice serve`, `sluice validate` and the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Namespaces where root IngressRoutes (and Routes) may live; empty means everywhere.
    pub root_namespaces: Vec<String>,
    /// The ingress class this sluice serves.
    pub ingress_class_name: String,
    /// The GatewayClass `controllerName` this sluice serves.
    pub gateway_controller_name: String,
    /// The ports Envoy's own listeners bind (HTTP and HTTPS): a Gateway `TCP` listener cannot
    /// take them.
    pub reserved_ports: Vec<u16>,
    /// The addresses Gateways of sluice's class are given, each its own (`--gateway-addresses`):
    /// Envoy listens on every listener's port at its Gateway's address. None: every Gateway's
    /// HTTP and HTTPS listeners are served on Envoy's shared listeners.
    pub gateway_addresses: Option<addresses::AddressPool>,
    /// Whether the leader keeps a Service per Gateway carrying its `spec.infrastructure`
    /// metadata (`--gateway-services`, cluster mode): the GatewayClass then lists
    /// `GatewayInfrastructurePropagation`.
    pub gateway_services: bool,
}

/// The ports of Envoy's HTTP and HTTPS listeners unless flags say otherwise.
pub const DEFAULT_RESERVED_PORTS: [u16; 2] = [8080, 8443];

impl Default for Options {
    fn default() -> Self {
        Options {
            root_namespaces: Vec::new(),
            ingress_class_name: DEFAULT_INGRESS_CLASS.to_string(),
            gateway_controller_name: DEFAULT_GATEWAY_CONTROLLER_NAME.to_string(),
            reserved_ports: DEFAULT_RESERVED_PORTS.to_vec(),
            gateway_addresses: None,
            gateway_services: false,
        }
    }
}

impl Options {
    /// Whether a root may live in this namespace.
    pub fn root_allowed_in(&self, namespace: &str) -> bool {
        self.root_namespaces.is_empty() || self.root_namespaces.iter().any(|n| n == namespace)
    }
}

/// Builds the routing model and all statuses from one snapshot.
pub fn build(snapshot: &Snapshot, options: &Options) -> Dag {
    // The halves of a parallel build are dealt by the links of IngressRoutes, Routes and
    // Ingresses, and the Gateway API objects go into one of them together.
    if snapshot.routing_objects() >= parallel::PARALLEL_OBJECTS
        && let Some(dag) = parallel::build(snapshot, options)
    {
        return dag;
    }
    build_on_one_thread(snapshot, options)
}

/// [`build`] on the calling thread.
pub fn build_on_one_thread(snapshot: &Snapshot, options: &Options) -> Dag {
    let mut b = Builder::new(snapshot, options);
    run(&mut b);
    b.finish()
}

/// `v` with no spare capacity, in a fresh allocation when it had some. For vectors the model and
/// its indexes keep for as long as a build lives: pushing one element at a time leaves room for
/// four, and `shrink_to_fit` may keep the block (an allocator may keep a block reallocated to
/// half its size or more in place).
pub(crate) fn exact_vec<T>(v: Vec<T>) -> Vec<T> {
    if v.capacity() == v.len() {
        return v;
    }
    let mut exact = Vec::with_capacity(v.len());
    exact.extend(v);
    exact
}

/// Runs every processor over the builder's routing objects.
fn run(b: &mut Builder<'_>) {
    ingressroute::claim_hosts(b);
    route::claim_hosts(b);
    b.settle_host_claims();
    ingressroute::build_v1beta1(b);
    ingressroute::build_v1(b);
    route::build_routes(b);
    ingress::build_ingresses(b);
    gateway::build_gateway_api(b);
}

#[cfg(test)]
mod exact_vec_tests {
    #[test]
    fn exact_vec_keeps_the_elements_and_drops_spare_room() {
        let mut v = Vec::with_capacity(8);
        v.extend(["a", "b", "c"].map(String::from));
        let e = super::exact_vec(v);
        assert_eq!(e, ["a", "b", "c"]);
        assert_eq!(e.capacity(), 3);
        let empty: Vec<u8> = super::exact_vec(Vec::with_capacity(8));
        assert_eq!(empty.capacity(), 0);
    }
}

#[cfg(test)]
mod gateway_tests;
