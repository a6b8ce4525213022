//! The same resources as a static Envoy bootstrap, so that `envoy --mode validate` can check them
//! without a control plane: clusters become STATIC with their load assignment inline, listeners get
//! their route configurations inline, and SDS references point at static secrets. The names a
//! route's weights give a Gateway API backend that is not valid ([`INVALID_BACKEND_CLUSTER`],
//! [`UNAVAILABLE_BACKEND_CLUSTER`]), which no cluster has, are declared as clusters with no
//! endpoint: a static route configuration must name known clusters (a dynamic one need not, and
//! Envoy answers a request sent to an unknown one with the route's
//! `cluster_not_found_response_code`), and every other name is still checked.

use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap::StaticResources};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::transport_socket;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::ScopedRouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, ScopedRouteConfigurationsList, http_connection_manager::RouteSpecifier,
    scoped_routes::ConfigSpecifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use super::{Resources, any};
use sluice_core::dag::{INVALID_BACKEND_CLUSTER, UNAVAILABLE_BACKEND_CLUSTER};

/// Why resources could not be made static (only on resources sluice did not produce).
#[derive(Debug, thiserror::Error)]
pub enum StaticConfigError {
    #[error("{what} does not decode: {source}")]
    Decode {
        what: String,
        source: prost::DecodeError,
    },
}

/// Builds a bootstrap holding `resources` as static configuration.
pub fn build_static_bootstrap(resources: &Resources) -> Result<Bootstrap, StaticConfigError> {
    let mut clusters: Vec<_> = resources
        .clusters
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.cluster_discovery_type =
                Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
            c.eds_cluster_config = None;
            c.load_assignment = resources
                .endpoints
                .iter()
                .find(|e| e.cluster_name == c.name)
                .cloned();
            make_upstream_tls_static(&mut c)?;
            Ok(c)
        })
        .collect::<Result<_, StaticConfigError>>()?;
    for name in [INVALID_BACKEND_CLUSTER, UNAVAILABLE_BACKEND_CLUSTER] {
        if routes_name_cluster(&resources.routes, name) {
            clusters.push(Cluster {
                name: name.to_string(),
                cluster_discovery_type: Some(ClusterDiscoveryType::Type(
                    DiscoveryType::Static as i32,
                )),
                ..Default::default()
            });
        }
    }
    let mut listeners = Vec::new();
    for l in &resources.listeners {
        let mut l = l.clone();
        for chain in l
            .filter_chains
            .iter_mut()
            .chain(&mut l.default_filter_chain)
        {
            make_chain_static(chain, &resources.routes, &resources.scoped_routes)?;
        }
        listeners.push(l);
    }
    Ok(Bootstrap {
        static_resources: Some(StaticResources {
            listeners,
            clusters,
            secrets: resources.secrets.clone(),
        }),
        layered_runtime: Some(super::layered_runtime()),
        ..Default::default()
    })
}

/// Whether a route of `routes` sends a share of its requests to the cluster `name`.
fn routes_name_cluster(routes: &[RouteConfiguration], name: &str) -> bool {
    use envoy_types::pb::envoy::config::route::v3::{
        route::Action, route_action::ClusterSpecifier,
    };
    let actions = (routes.iter())
        .flat_map(|rc| &rc.virtual_hosts)
        .flat_map(|v| &v.routes)
        .filter_map(|r| match &r.action {
            Some(Action::Route(a)) => a.cluster_specifier.as_ref(),
            _ => None,
        });
    actions.into_iter().any(|c| match c {
        ClusterSpecifier::WeightedClusters(w) => w.clusters.iter().any(|c| c.name == name),
        ClusterSpecifier::Cluster(c) => c == name,
        _ => false,
    })
}

fn decode<T: Message + Name + Default>(a: &Any, what: &str) -> Result<T, StaticConfigError> {
    T::decode(a.value.as_slice()).map_err(|source| StaticConfigError::Decode {
        what: what.to_string(),
        source,
    })
}

/// Points the SDS references of a cluster's CA certificates (a TLS backend verified) and of its
/// client certificate at the static secrets.
fn make_upstream_tls_static(c: &mut Cluster) -> Result<(), StaticConfigError> {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        UpstreamTlsContext, common_tls_context::ValidationContextType,
    };
    if let Some(ts) = &mut c.transport_socket
        && let Some(transport_socket::ConfigType::TypedConfig(a)) = &mut ts.config_type
        && a.type_url == UpstreamTlsContext::type_url()
    {
        let mut tls: UpstreamTlsContext = decode(a, &ts.name)?;
        let mut changed = false;
        if let Some(ValidationContextType::CombinedValidationContext(v)) = (tls.common_tls_context)
            .as_mut()
            .and_then(|common| common.validation_context_type.as_mut())
            && let Some(sds) = &mut v.validation_context_sds_secret_config
        {
            sds.sds_config = None;
            changed = true;
        }
        // The client certificate presented to the backend (a Gateway's backend TLS).
        if let Some(common) = tls.common_tls_context.as_mut() {
            for sds in &mut common.tls_certificate_sds_secret_configs {
                sds.sds_config = None;
                changed = true;
            }
        }
        if changed {
            *a = any(&tls);
        }
    }
    Ok(())
}

fn make_chain_static(
    chain: &mut FilterChain,
    routes: &[RouteConfiguration],
    scopes: &[ScopedRouteConfiguration],
) -> Result<(), StaticConfigError> {
    for f in &mut chain.filters {
        let Some(filter::ConfigType::TypedConfig(a)) = &mut f.config_type else {
            continue;
        };
        if a.type_url != HttpConnectionManager::type_url() {
            continue;
        }
        let mut hcm: HttpConnectionManager = decode(a, &f.name)?;
        let named = |name: &str| {
            routes
                .iter()
                .find(|r| r.name == name)
                .cloned()
                .unwrap_or_else(|| RouteConfiguration {
                    name: name.to_string(),
                    ..Default::default()
                })
        };
        match &mut hcm.route_specifier {
            Some(RouteSpecifier::Rds(rds)) => {
                let rc = named(&rds.route_config_name);
                hcm.route_specifier = Some(RouteSpecifier::RouteConfig(rc));
            }
            // Route shards: the scopes inline, each with its configuration inline.
            Some(RouteSpecifier::ScopedRoutes(scoped)) => {
                if let Some(ConfigSpecifier::ScopedRds(_)) = &scoped.config_specifier {
                    let scopes = (scopes.iter().cloned())
                        .map(|mut scope| {
                            let name = std::mem::take(&mut scope.route_configuration_name);
                            scope.route_configuration = Some(named(&name));
                            scope
                        })
                        .collect();
                    scoped.config_specifier = Some(ConfigSpecifier::ScopedRouteConfigurationsList(
                        ScopedRouteConfigurationsList {
                            scoped_route_configurations: scopes,
                        },
                    ));
                }
            }
            _ => {}
        }
        *a = any(&hcm);
    }
    if let Some(ts) = &mut chain.transport_socket
        && let Some(transport_socket::ConfigType::TypedConfig(a)) = &mut ts.config_type
        && a.type_url == DownstreamTlsContext::type_url()
    {
        let mut tls: DownstreamTlsContext = decode(a, &ts.name)?;
        if let Some(common) = &mut tls.common_tls_context {
            for sds in &mut common.tls_certificate_sds_secret_configs {
                sds.sds_config = None;
            }
            // The CA certificates clients' certificates are verified with (a Gateway's
            // frontend validation).
            use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType;
            if let Some(ValidationContextType::CombinedValidationContext(v)) =
                common.validation_context_type.as_mut()
                && let Some(sds) = &mut v.validation_context_sds_secret_config
            {
                sds.sds_config = None;
            }
        }
        *a = any(&tls);
    }
    Ok(())
}
