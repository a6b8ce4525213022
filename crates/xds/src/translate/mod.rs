//! `translate`: the routing model ([`Dag`]) → Envoy xDS resources (envoy-types protos).
//!
//! Pure and deterministic: the same Dag gives byte-identical encoded resources (every collection is
//! walked in BTreeMap order, no timestamps, no HashMap with more than one entry), and resource names
//! are stable:
//!
//! | resource | name |
//! |---|---|
//! | HTTP listener | `ingress_http` (route config `ingress_http`, or `ingress_http/<k>` per shard) |
//! | HTTPS listener | `ingress_https`, one filter chain per TLS host, route config `https/<host>` |
//! | Gateway TCP listener | `ingress_tcp_<port>`, a TCP proxy to a TCPRoute's clusters |
//! | a port of a Gateway's own address | `gateway/<namespace>/<name>/<port>` ([`entry`]) |
//! | cluster, load assignment | the Dag cluster name (`namespace/service/port[/hash]`) |
//! | secret | the Dag secret name (`namespace/secret`) |
//!
//! See docs/xds.md for the choices made here.

pub mod access_log;
mod cluster;
mod entry;
mod http_shards;
pub mod incremental;
mod listener;
mod route;
mod route_shards;
pub mod static_config;
pub mod trace;
pub(crate) use crate::xds::wire_encode;

use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration as PbDuration, UInt32Value};
use prost::{Message, Name};

use sluice_core::dag::Dag;

pub use crate::xds::resources::{ResourceType, Resources};
pub use cluster::{
    ClusterBytes, LoadAssignmentBytes, build_cluster, build_load_assignment, build_secret,
};
pub use listener::{HTTP_LISTENER, HTTPS_LISTENER};
pub use route::{
    HTTP_ROUTE_CONFIG, MAX_HTTP_ROUTE_SHARDS, ROUTE_SHARD_HEADER, http_route_config_name,
    https_route_config_name, merge_slashes, shard_of,
};
pub use route_shards::{AutoRouteShards, RouteShards};

/// The largest RE2 program Envoy compiles for a regular expression of sluice's configuration
/// (Envoy's runtime key `re2.max_program_size.error_level`; Envoy's own default is 100). Envoy
/// refuses a route configuration holding a larger one. Envoy's default is below what ordinary
/// expressions need (`^/api/v[0-9]+/users/[a-z0-9-]{1,64}$` compiles to 268 instructions; the
/// single-label check of a long wildcard host to over 250), so every bootstrap sluice writes
/// raises it. The limit that counts is the webhook's ([`sluice_core::validate::common::validate_regex`]):
/// 1024 bytes, 64 KiB compiled by Rust's `regex`, and RE2's own repetition rules. The largest
/// RE2 programs found for expressions within it were ~7,300 instructions (docs/xds.md, "Regular
/// expressions"); this leaves four times that.
pub const RE2_MAX_PROGRAM_SIZE: u32 = 32_768;

/// The runtime values every Envoy bootstrap sluice writes sets (a static runtime layer), in
/// front of Envoy's admin layer.
pub const ENVOY_RUNTIME: &[(&str, u32)] =
    &[("re2.max_program_size.error_level", RE2_MAX_PROGRAM_SIZE)];

/// [`ENVOY_RUNTIME`] as a bootstrap's `layered_runtime`: the static layer, then the admin layer
/// (`/runtime_modify`), which Envoy has when a bootstrap names no layers.
pub fn layered_runtime() -> envoy_types::pb::envoy::config::bootstrap::v3::LayeredRuntime {
    use envoy_types::pb::envoy::config::bootstrap::v3::{
        LayeredRuntime, RuntimeLayer, runtime_layer,
    };
    use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
    let fields = ENVOY_RUNTIME
        .iter()
        .map(|(key, value)| {
            (
                key.to_string(),
                Value {
                    kind: Some(Kind::NumberValue(f64::from(*value))),
                },
            )
        })
        .collect();
    LayeredRuntime {
        layers: vec![
            RuntimeLayer {
                name: "sluice".to_string(),
                layer_specifier: Some(runtime_layer::LayerSpecifier::StaticLayer(Struct {
                    fields,
                })),
            },
            RuntimeLayer {
                name: "admin".to_string(),
                layer_specifier: Some(runtime_layer::LayerSpecifier::AdminLayer(
                    runtime_layer::AdminLayer {},
                )),
            },
        ],
    }
}

/// Settings that come from the command line, not from objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Address Envoy's listeners bind.
    pub listen_address: String,
    /// Port of the plain HTTP listener.
    pub http_port: u16,
    /// Port of the TLS listener.
    pub https_port: u16,
    /// The access log every listener writes.
    pub access_log: access_log::AccessLog,
    /// Request tracing on every HTTP connection manager, when set.
    pub tracing: Option<trace::Tracing>,
    /// Every connection starts with a PROXY protocol header (v1 or v2) naming the client: a
    /// load balancer in front of Envoy that sends one.
    pub proxy_protocol: bool,
    /// How many proxies in front of Envoy append to `X-Forwarded-For` and are trusted to: the
    /// client address is the one that many places from the right of the header (0: the
    /// connection's address).
    pub num_trusted_hops: u32,
    /// How many route configurations the plain HTTP listener's hosts are spread over
    /// ([`route::shard_of`]): 1 is one configuration, `ingress_http`. With more, an update of one
    /// host makes Envoy rebuild the route table of its shard only, for a cost on every request
    /// (docs/xds.md, "Route shards"). The default, `auto`, uses shards when the model has
    /// thousands of hosts ([`RouteShards::count`]).
    pub route_shards: RouteShards,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen_address: "0.0.0.0".to_string(),
            http_port: 8080,
            https_port: 8443,
            access_log: access_log::AccessLog::default(),
            tracing: None,
            proxy_protocol: false,
            num_trusted_hops: 0,
            route_shards: RouteShards::default(),
        }
    }
}

/// Translates the routing model into Envoy resources.
pub fn build(dag: &Dag, options: &Options) -> Resources {
    build_with_shards(
        dag,
        options,
        options.route_shards.count(dag.vhosts.len(), None),
    )
}

/// [`build`] with the HTTP hosts spread over `shards` route configurations, whatever
/// [`Options::route_shards`] says (an encoder whose earlier models decided the count).
pub fn build_with_shards(dag: &Dag, options: &Options, shards: u16) -> Resources {
    let mut routes = route::build_http_route_configs(dag, shards);
    for vhost in dag.vhosts.values() {
        if vhost.tls.is_some() && vhost.tcp_proxy.is_none() {
            routes.push(route::build_https_route_config(vhost));
        }
    }
    let mut listeners = vec![listener::build_http_listener(options, shards)];
    if let Some(l) = listener::build_https_listener(dag, options) {
        listeners.push(l);
    }
    let tcp = dag.tcp_listeners.values();
    listeners.extend(tcp.filter_map(|l| listener::build_tcp_listener(l, options)));
    for (key, e) in dag.entries.iter() {
        listeners.extend(entry::build_entry_listener(key, e, dag, options));
        routes.extend(entry::build_entry_route_configs(key, e));
    }
    routes.sort_by(|a, b| a.name.cmp(&b.name));
    listeners.sort_by(|a, b| a.name.cmp(&b.name));
    Resources {
        listeners,
        scoped_routes: listener::build_scoped_routes(shards),
        routes,
        clusters: collect_sized(
            dag.clusters.len(),
            dag.clusters.values().map(|c| build_cluster(c)),
        ),
        endpoints: collect_sized(
            dag.clusters.len(),
            dag.clusters.values().map(|c| build_load_assignment(c)),
        ),
        secrets: collect_sized(dag.secrets.len(), dag.secrets.values().map(build_secret)),
    }
}

/// Collects into a vector allocated once for `len` items. The model's persistent maps give their
/// iterators no exact length, so `collect` would grow the vector by doubling: at 10k objects that
/// copies tens of megabytes of Envoy structs (a `Cluster` is over 3 KB) into freshly faulted
/// pages, several times per full build.
pub(crate) fn collect_sized<T>(len: usize, items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::with_capacity(len);
    out.extend(items);
    out
}

// ---- small proto helpers shared by the submodules ----

/// Config source "over the ADS stream", xDS v3.
pub(crate) fn ads_config_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

pub(crate) fn any<T: Message + Name>(m: &T) -> Any {
    Any {
        type_url: T::type_url(),
        value: m.encode_to_vec(),
    }
}

pub(crate) fn duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

pub(crate) fn u32v(v: u32) -> UInt32Value {
    UInt32Value { value: v }
}

pub(crate) fn boolv(v: bool) -> BoolValue {
    BoolValue { value: v }
}

#[cfg(test)]
mod auto_shard_tests;
#[cfg(test)]
mod secure_backends_tests;
#[cfg(test)]
mod shard_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_encode_tests;
