//! The same resources as a static Envoy bootstrap, so that `envoy --mode validate` can check them
//! without a control plane: clusters become STATIC with their load assignment inline, listeners get
//! their route configurations inline, and SDS references point at static secrets.

use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap::StaticResources};
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType};
use envoy_types::pb::envoy::config::core::v3::transport_socket;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use super::{Resources, any};

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
    let clusters = resources
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
            c
        })
        .collect();
    let mut listeners = Vec::new();
    for l in &resources.listeners {
        let mut l = l.clone();
        for chain in &mut l.filter_chains {
            make_chain_static(chain, &resources.routes)?;
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

fn decode<T: Message + Name + Default>(a: &Any, what: &str) -> Result<T, StaticConfigError> {
    T::decode(a.value.as_slice()).map_err(|source| StaticConfigError::Decode {
        what: what.to_string(),
        source,
    })
}

fn make_chain_static(
    chain: &mut FilterChain,
    routes: &[RouteConfiguration],
) -> Result<(), StaticConfigError> {
    for f in &mut chain.filters {
        let Some(filter::ConfigType::TypedConfig(a)) = &mut f.config_type else {
            continue;
        };
        if a.type_url != HttpConnectionManager::type_url() {
            continue;
        }
        let mut hcm: HttpConnectionManager = decode(a, &f.name)?;
        if let Some(RouteSpecifier::Rds(rds)) = &hcm.route_specifier {
            let rc = routes
                .iter()
                .find(|r| r.name == rds.route_config_name)
                .cloned()
                .unwrap_or_else(|| RouteConfiguration {
                    name: rds.route_config_name.clone(),
                    ..Default::default()
                });
            hcm.route_specifier = Some(RouteSpecifier::RouteConfig(rc));
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
        }
        *a = any(&tls);
    }
    Ok(())
}
