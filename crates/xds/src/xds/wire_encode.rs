//! Envoy messages written field by field with prost's primitives, where building the generated
//! envoy-types message only to encode and drop it is most of the work: the routes nearly every
//! host has, a virtual host's head, a TLS host's route configuration, a cluster's name before
//! its shared settings, load assignments' endpoints, and an HTTPS filter chain's connection
//! manager. This is the only module that assembles protobuf bytes by hand; each function's doc
//! names the generated message whose prost encoding it writes, and the property tests
//! (`translate/wire_encode_tests.rs`) hold it to that encoding byte for byte over generated inputs.
//!
//! prost writes a message's fields in the order of their numbers (a oneof at its member's), and
//! leaves out a proto3 scalar or string field at its default unless it is a member of a oneof
//! or an entry of a list: what each function here writes follows those two rules.

use envoy_types::pb::envoy::config::route::v3::{Route, route::Action};
use prost::Message;
use prost::bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

/// A string field as prost writes it in proto3: nothing when empty.
pub(crate) fn put_string(tag: u32, value: &str, buf: &mut impl BufMut) {
    put_bytes(tag, value.as_bytes(), buf);
}

/// The length of [`put_string`]'s field.
pub(crate) fn string_len(tag: u32, value: &str) -> usize {
    bytes_len(tag, value.as_bytes())
}

/// A bytes field (or an embedded message's encoding) as prost writes it in proto3: nothing when
/// empty.
pub(crate) fn put_bytes(tag: u32, value: &[u8], buf: &mut impl BufMut) {
    if !value.is_empty() {
        put_always(tag, value, buf);
    }
}

/// The length of [`put_bytes`]'s field.
pub(crate) fn bytes_len(tag: u32, value: &[u8]) -> usize {
    if value.is_empty() {
        0
    } else {
        field_len(tag, value.len())
    }
}

/// A length-delimited field written even when empty: an entry of a list, a oneof's member.
pub(crate) fn put_always(tag: u32, value: &[u8], buf: &mut impl BufMut) {
    put_head(tag, value.len(), buf);
    buf.put_slice(value);
}

/// The key and length of a length-delimited field of `len` bytes, its value to follow.
pub(crate) fn put_head(tag: u32, len: usize, buf: &mut impl BufMut) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

/// The length of a length-delimited field whose value is `len` bytes: key, length and value.
pub(crate) fn field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

// Field numbers of envoy.config.route.v3.RouteConfiguration, .VirtualHost, .Route,
// .RouteMatch and .RouteAction.
/// `RouteConfiguration.name`.
const CONFIG_NAME: u32 = 1;
/// `RouteConfiguration.virtual_hosts`.
pub(crate) const VIRTUAL_HOSTS: u32 = 2;
const VHOST_NAME: u32 = 1;
const VHOST_DOMAINS: u32 = 2;
/// `VirtualHost.routes`.
pub(crate) const VHOST_ROUTES: u32 = 3;
const ROUTE_MATCH: u32 = 1;
const ROUTE_ROUTE: u32 = 2;
const ROUTE_ACTION_CLUSTER: u32 = 1;

/// The start of a `VirtualHost` of one domain, `host`: its name (field 1) and the domain (field
/// 2, an entry of a list, written even when empty), with room for `routes` routes to follow
/// ([`put_route`], [`put_plain_route`]).
pub(crate) fn vhost_head(host: &str, routes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * string_len(VHOST_NAME, host) + 2 + 96 * routes);
    put_string(VHOST_NAME, host, &mut out);
    put_always(VHOST_DOMAINS, host.as_bytes(), &mut out);
    out
}

/// Appends `route` as an entry of `VirtualHost.routes` (field 3), encoded by prost.
pub(crate) fn put_route(route: &Route, out: &mut Vec<u8>) {
    prost::encoding::message::encode(VHOST_ROUTES, route, out);
}

/// A `RouteConfiguration` of a name and one encoded `VirtualHost`: the name (field 1), then the
/// virtual host (field 2, an entry of a list, written even when empty).
pub(crate) fn route_config_of_one(name: &str, vhost: &[u8]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(string_len(CONFIG_NAME, name) + field_len(VIRTUAL_HOSTS, vhost.len()));
    put_string(CONFIG_NAME, name, &mut out);
    put_always(VIRTUAL_HOSTS, vhost, &mut out);
    out
}

/// Which member of `RouteMatch.path_specifier` holds a plain route's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathField {
    /// `prefix` (field 1).
    Prefix,
    /// `path` (field 2).
    Path,
    /// `path_separated_prefix` (field 14).
    PathSeparatedPrefix,
}

impl PathField {
    fn tag(self) -> u32 {
        match self {
            PathField::Prefix => 1,
            PathField::Path => 2,
            PathField::PathSeparatedPrefix => 14,
        }
    }
}

/// The action of a plain route ([`put_plain_route`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum PlainAction<'a> {
    /// A fixed action's encoding, as [`action_bytes`] made it.
    Fixed(&'a [u8]),
    /// `Route.route` (field 2) holding only `RouteAction.cluster` (field 1).
    Cluster(&'a str),
}

/// Appends, as an entry of `VirtualHost.routes` (field 3), a `Route` holding only a match of
/// the path `path` in `field` (a oneof member, so written even when empty) and `action`.
pub(crate) fn put_plain_route(
    field: PathField,
    path: &str,
    action: PlainAction<'_>,
    out: &mut Vec<u8>,
) {
    let path_len = field_len(field.tag(), path.len());
    let action_len = match action {
        PlainAction::Fixed(fixed) => fixed.len(),
        PlainAction::Cluster(cluster) => {
            field_len(ROUTE_ROUTE, field_len(ROUTE_ACTION_CLUSTER, cluster.len()))
        }
    };
    let route_len = field_len(ROUTE_MATCH, path_len) + action_len;
    out.reserve(field_len(VHOST_ROUTES, route_len));
    put_head(VHOST_ROUTES, route_len, out);
    put_head(ROUTE_MATCH, path_len, out);
    put_always(field.tag(), path.as_bytes(), out);
    match action {
        PlainAction::Fixed(fixed) => out.extend_from_slice(fixed),
        PlainAction::Cluster(cluster) => {
            put_head(
                ROUTE_ROUTE,
                field_len(ROUTE_ACTION_CLUSTER, cluster.len()),
                out,
            );
            put_always(ROUTE_ACTION_CLUSTER, cluster.as_bytes(), out);
        }
    }
}

/// How prost encodes a `Route` holding only `action`: the action's field, which
/// [`put_plain_route`] writes after the match.
pub(crate) fn action_bytes(action: Action) -> Vec<u8> {
    Route {
        action: Some(action),
        ..Default::default()
    }
    .encode_to_vec()
}

/// `Cluster.name`: a cluster's encoding is this field followed by the encoding of the same
/// cluster without a name (`rest`).
const CLUSTER_NAME: u32 = 1;

/// A `Cluster` of the name `name` and the other fields encoded in `rest` (the same cluster's
/// encoding without a name).
pub(crate) fn named_cluster(name: &str, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(string_len(CLUSTER_NAME, name) + rest.len());
    put_string(CLUSTER_NAME, name, &mut out);
    out.extend_from_slice(rest);
    out
}

/// `ClusterLoadAssignment.cluster_name`.
const ASSIGNMENT_CLUSTER_NAME: u32 = 1;
/// `ClusterLoadAssignment.endpoints`.
const ASSIGNMENT_ENDPOINTS: u32 = 2;

/// A `ClusterLoadAssignment` of the cluster `name` (field 1) with one `LocalityLbEndpoints`
/// (field 2) whose encoding is `locality` ([`put_lb_endpoint`]'s entries), none when empty.
pub(crate) fn load_assignment(name: &str, locality: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        string_len(ASSIGNMENT_CLUSTER_NAME, name) + bytes_len(ASSIGNMENT_ENDPOINTS, locality),
    );
    put_string(ASSIGNMENT_CLUSTER_NAME, name, &mut out);
    put_bytes(ASSIGNMENT_ENDPOINTS, locality, &mut out);
    out
}

/// Appends `LocalityLbEndpoints.lb_endpoints` (field 2) holding the endpoint `ip`:`port`:
/// `LbEndpoint.endpoint` (field 1, of a oneof) → `Endpoint.address` (field 1) →
/// `Address.socket_address` (field 1, of a oneof) → `SocketAddress.address` (field 2, a string,
/// left out when empty) and `.port_value` (field 3, of a oneof, so written even when 0).
pub(crate) fn put_lb_endpoint(ip: &[u8], port: u16, out: &mut Vec<u8>) {
    let nested = |len: usize| field_len(1, len);
    let socket = bytes_len(2, ip) + key_len(3) + encoded_len_varint(u64::from(port));
    let address = nested(socket);
    let endpoint = nested(address);
    let lb_endpoint = nested(endpoint);
    out.reserve(field_len(2, lb_endpoint));
    if lb_endpoint < 0x80 && !ip.is_empty() {
        // Every length takes one byte (always so: an IPv6 address has at most 39 characters),
        // and so does each key (`tag << 3 | wire type`, below 128): the ten bytes before the
        // address's text at once, not a varint call each (a tenth of a 10k translation).
        const LD: u8 = WireType::LengthDelimited as u8;
        out.extend_from_slice(&[
            2 << 3 | LD,
            lb_endpoint as u8,
            1 << 3 | LD,
            endpoint as u8,
            1 << 3 | LD,
            address as u8,
            1 << 3 | LD,
            socket as u8,
            2 << 3 | LD,
            ip.len() as u8,
        ]);
        out.extend_from_slice(ip);
        out.push(3 << 3 | WireType::Varint as u8);
        encode_varint(u64::from(port), out);
        return;
    }
    put_head(2, lb_endpoint, out);
    for len in [endpoint, address, socket] {
        put_head(1, len, out);
    }
    put_bytes(2, ip, out);
    encode_key(3, WireType::Varint, out);
    encode_varint(u64::from(port), out);
}

/// Field number of `HttpConnectionManager.rds`.
const HCM_RDS: u32 = 3;
/// Field number of `Rds.route_config_name`.
const RDS_ROUTE_CONFIG_NAME: u32 = 2;

/// An `HttpConnectionManager` whose `rds` (field 3) names the route configuration
/// `route_config`: `before` and `after` are the encodings of its fields before and after
/// `rds`, `config_source` the encoding of an `Rds` holding only its `config_source` (field 1).
pub(crate) fn hcm_with_rds(
    before: &[u8],
    config_source: &[u8],
    route_config: &str,
    after: &[u8],
) -> Vec<u8> {
    let rds_len = config_source.len() + string_len(RDS_ROUTE_CONFIG_NAME, route_config);
    let mut value = Vec::with_capacity(before.len() + field_len(HCM_RDS, rds_len) + after.len());
    value.extend_from_slice(before);
    put_head(HCM_RDS, rds_len, &mut value);
    value.extend_from_slice(config_source);
    put_string(RDS_ROUTE_CONFIG_NAME, route_config, &mut value);
    value.extend_from_slice(after);
    value
}
