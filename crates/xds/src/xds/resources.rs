//! The xDS resource types sluice serves and a whole set of resources of one routing model (what
//! the translation produces and the cache versions).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, ScopedRouteConfiguration};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

/// Every xDS resource for one Dag, sorted by name within each type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resources {
    pub listeners: Vec<Listener>,
    /// Sorted by name.
    pub scoped_routes: Vec<ScopedRouteConfiguration>,
    pub routes: Vec<RouteConfiguration>,
    pub clusters: Vec<Cluster>,
    pub endpoints: Vec<ClusterLoadAssignment>,
    pub secrets: Vec<Secret>,
}

/// The xDS resource types sluice serves, in the order updates are sent (clusters and their
/// endpoints before the listeners and routes that use them; secrets before listeners).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Secret,
    Listener,
    /// The scopes of the HTTP listener's route shards (SRDS); none without shards.
    ScopedRoute,
    Route,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Secret,
        ResourceType::Listener,
        ResourceType::ScopedRoute,
        ResourceType::Route,
    ];

    /// The type URL of the type's resources (what `prost::Name::type_url` gives for its message,
    /// without an allocation per call; a test checks they agree).
    pub fn type_url(self) -> &'static str {
        match self {
            ResourceType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ResourceType::Endpoint => {
                "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
            }
            ResourceType::Secret => {
                "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
            }
            ResourceType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            ResourceType::ScopedRoute => {
                "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
            }
            ResourceType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    pub fn from_type_url(url: &str) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.type_url() == url)
    }

    /// Short name for logs and metrics.
    pub fn short(self) -> &'static str {
        match self {
            ResourceType::Cluster => "cds",
            ResourceType::Endpoint => "eds",
            ResourceType::Secret => "sds",
            ResourceType::Listener => "lds",
            ResourceType::ScopedRoute => "srds",
            ResourceType::Route => "rds",
        }
    }

    /// Whether an empty subscription means "everything" (listeners, clusters, scopes: Envoy
    /// asks for every scope of its scoped routes) rather than nothing.
    pub fn wildcard_by_default(self) -> bool {
        matches!(
            self,
            ResourceType::Cluster | ResourceType::Listener | ResourceType::ScopedRoute
        )
    }

    /// Whether the type says how requests are routed (listeners, scopes, route configurations):
    /// such updates wait until the clusters they name are settled, and the clusters, endpoints
    /// and secrets they stopped naming are removed only after them.
    pub fn is_routing(self) -> bool {
        matches!(
            self,
            ResourceType::Listener | ResourceType::ScopedRoute | ResourceType::Route
        )
    }

    /// Whether a state-of-the-world response of this type carries every resource the client
    /// holds (listeners, clusters: one left out is deleted), rather than only the ones that
    /// changed (routes, endpoints, secrets: one left out is kept as it was). The xDS protocol's
    /// "Grouping Resources into Responses".
    pub fn sotw_sends_every_resource(self) -> bool {
        matches!(
            self,
            ResourceType::Cluster | ResourceType::Listener | ResourceType::ScopedRoute
        )
    }
}

impl Resources {
    /// Encodes every resource as `Any`, keyed by type then name.
    pub fn encode(&self) -> BTreeMap<ResourceType, BTreeMap<String, Any>> {
        fn pack<T: Message + Name>(
            items: &[T],
            name: impl Fn(&T) -> &str,
        ) -> BTreeMap<String, Any> {
            let type_url = T::type_url();
            items
                .iter()
                .map(|r| {
                    (
                        name(r).to_string(),
                        Any {
                            type_url: type_url.clone(),
                            value: r.encode_to_vec(),
                        },
                    )
                })
                .collect()
        }
        let mut out = BTreeMap::new();
        out.insert(ResourceType::Listener, pack(&self.listeners, |l| &l.name));
        out.insert(
            ResourceType::ScopedRoute,
            pack(&self.scoped_routes, |s| &s.name),
        );
        out.insert(ResourceType::Route, pack(&self.routes, |r| &r.name));
        out.insert(ResourceType::Cluster, pack(&self.clusters, |c| &c.name));
        out.insert(
            ResourceType::Endpoint,
            pack(&self.endpoints, |e| &e.cluster_name),
        );
        out.insert(ResourceType::Secret, pack(&self.secrets, |s| &s.name));
        out
    }
}
