//! Which shard of the HTTP route configuration holds a host (docs/xds.md, "Route shards"): the
//! shards' names, the hash of a host that picks its shard, and the Lua filter that computes the
//! same hash of each request's host in Envoy.

/// Name of the route configuration of the plain HTTP listener.
pub const HTTP_ROUTE_CONFIG: &str = "ingress_http";

/// The most route configurations [`Options::route_shards`](super::Options) may spread the
/// plain-HTTP hosts over.
pub const MAX_HTTP_ROUTE_SHARDS: u16 = 256;

/// The request header that names a request's route shard ([`shard_of`] of its host): Envoy's
/// scoped routes pick the shard's route configuration by it. Set on every request by the
/// listener's first filter, whatever the client sent, and removed before the request goes
/// upstream.
pub const ROUTE_SHARD_HEADER: &str = "x-sluice-route-shard";

/// The name of shard `k` of the HTTP route configuration: [`HTTP_ROUTE_CONFIG`] when there is
/// one shard, else `ingress_http/<k>`.
pub fn http_route_config_name(k: usize, shards: u16) -> String {
    if shards <= 1 {
        HTTP_ROUTE_CONFIG.to_string()
    } else {
        format!("{HTTP_ROUTE_CONFIG}/{k}")
    }
}

/// The shard of a request whose host is `host`, of `shards`: a polynomial hash of the host in
/// lower case, without a port, modulo a prime, modulo `shards`. The listener's Lua filter
/// ([`shard_lua`]) computes the same for each request, byte for byte; Envoy's virtual host
/// match ignores case, so the hash does too.
pub fn shard_of(host: &str, shards: u16) -> usize {
    if shards <= 1 {
        return 0;
    }
    let host = host.as_bytes();
    let host = match host.first() {
        // An IPv6 literal: up to its `]`.
        Some(b'[') => match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        },
        _ => match host.iter().rposition(|&b| b == b':') {
            Some(colon) => &host[..colon],
            None => host,
        },
    };
    // The same value as reducing at every step, as the Lua does (it must stay below 2^53):
    // `x` is reduced only when the next step could overflow, about once in six bytes.
    let mut x: u64 = 0;
    for &b in host {
        if x > (u64::MAX - 255) / 31 {
            x %= SHARD_HASH_MODULUS;
        }
        x = x * 31 + u64::from(b.to_ascii_lowercase());
    }
    (x % SHARD_HASH_MODULUS % u64::from(shards)) as usize
}

/// The modulus of [`shard_of`]'s hash: a prime below 2^30, so that every step is exact in the
/// double-precision numbers of Envoy's Lua.
const SHARD_HASH_MODULUS: u64 = 1_000_000_007;

/// The shards whose route configuration holds `host`: its own shard for an exact host; every
/// shard for a wildcard host (`*.suffix`) and for the catch-all host `*`, which requests of any
/// shard may match.
pub fn shards_of(host: &str, shards: u16) -> std::ops::Range<usize> {
    if host.starts_with('*') {
        0..usize::from(shards.max(1))
    } else {
        let k = shard_of(host, shards);
        k..k + 1
    }
}

/// The Lua source of the HTTP listener's shard filter when there are `shards` shards: it sets
/// [`ROUTE_SHARD_HEADER`] to [`shard_of`] the request's `:authority` (replacing one a client
/// sent) and clears the route cache, so that the connection manager picks the route from that
/// shard's configuration.
pub fn shard_lua(shards: u16) -> String {
    format!(
        r#"function envoy_on_request(handle)
  local headers = handle:headers()
  local host = headers:get(":authority") or ""
  if string.byte(host, 1) == 91 then
    local close = string.find(host, "]", 1, true)
    if close then host = string.sub(host, 1, close) end
  else
    local colon = string.find(host, ":[^:]*$")
    if colon then host = string.sub(host, 1, colon - 1) end
  end
  host = string.lower(host)
  local x = 0
  for i = 1, #host do
    x = (x * 31 + string.byte(host, i)) % {SHARD_HASH_MODULUS}
  end
  headers:replace("{ROUTE_SHARD_HEADER}", tostring(x % {shards}))
  handle:clearRouteCache()
end
"#
    )
}

/// What each shard's route configuration removes from requests: [`ROUTE_SHARD_HEADER`] when
/// there are shards.
pub fn shard_headers_to_remove(shards: u16) -> Vec<String> {
    if shards > 1 {
        vec![ROUTE_SHARD_HEADER.to_string()]
    } else {
        Vec::new()
    }
}
