//! Gateways' own addresses (`--gateway-addresses`): the pool each Gateway of sluice's class takes
//! an address from, and how the addresses are dealt.
//!
//! A Gateway keeps its address from build to build: one it asks for in `spec.addresses`, else
//! an address picked by a hash of its namespace and name (the next free one after it when that
//! is taken). The same Gateway gets the same address in every build, after a restart and from
//! every replica, with nothing remembered (sluice reads no status back), and deleting a Gateway
//! moves no other unless it had pushed that one past a collision. Gateways are dealt oldest first, so an older Gateway keeps an address two ask
//! for. docs/gateway-api.md, "Addresses", says what a user sees.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The address type of the Gateway API sluice deals (`spec.addresses[].type`, unset means it).
pub const IP_ADDRESS: &str = "IPAddress";

/// A set of IP addresses Gateways may be given: networks in CIDR notation, or single addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressPool {
    nets: Vec<(IpAddr, u8)>,
}

impl AddressPool {
    /// Whether `ip` is one of the pool's addresses.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.nets
            .iter()
            .any(|&(net, prefix)| same_network(net, ip, prefix) && usable(net, prefix, ip))
    }

    /// The pool's addresses in order: a network's own and (IPv4, up to a /30) broadcast
    /// addresses left out.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.nets.iter().flat_map(|&(net, prefix)| {
            let (start, end) = bounds(net, prefix);
            (start..=end)
                .map(move |n| from_u128(net, n))
                .filter(move |ip| usable(net, prefix, *ip))
        })
    }

    /// How many addresses the pool has.
    pub fn len(&self) -> usize {
        self.nets
            .iter()
            .map(|&(net, prefix)| usable_count(net, prefix))
            .sum()
    }

    /// Whether the pool has no address (a /31 or /32 network's address is usable: never).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`th of [`AddressPool::addresses`], worked out without walking them.
    fn nth(&self, mut i: usize) -> Option<IpAddr> {
        for &(net, prefix) in &self.nets {
            let n = usable_count(net, prefix);
            if i < n {
                let skip = usize::from(net.is_ipv4() && prefix <= 30);
                return Some(from_u128(net, to_u128(net) + (i + skip) as u128));
            }
            i -= n;
        }
        None
    }
}

/// How many addresses of a network may be dealt ([`usable`]).
fn usable_count(net: IpAddr, prefix: u8) -> usize {
    let (start, end) = bounds(net, prefix);
    let all = (end - start + 1) as usize;
    if net.is_ipv4() && prefix <= 30 {
        all - 2
    } else {
        all
    }
}

impl fmt::Display for AddressPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (net, prefix)) in self.nets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{net}/{prefix}")?;
        }
        Ok(())
    }
}

impl FromStr for AddressPool {
    type Err = String;

    /// `127.0.1.0/24`, `192.0.2.7`, several of them separated by commas.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (ip, prefix) = match part.split_once('/') {
                Some((ip, prefix)) => (ip, Some(prefix)),
                None => (part, None),
            };
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| format!("{part:?} is not an IP address or a network (CIDR)"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                None => max,
                Some(p) => match p.parse::<u8>() {
                    Ok(p) if p <= max => p,
                    _ => return Err(format!("{part:?}: the prefix length must be 0 to {max}")),
                },
            };
            if prefix + 16 < max {
                return Err(format!(
                    "{part:?}: a pool of more than 65,536 addresses is not needed; give a longer prefix"
                ));
            }
            nets.push((from_u128(ip, to_u128(ip) & mask(ip, prefix)), prefix));
        }
        if nets.is_empty() {
            return Err("no address or network given".to_string());
        }
        Ok(AddressPool { nets })
    }
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of `like`'s family numbered `n`.
fn from_u128(like: IpAddr, n: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4((n as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(n.into()),
    }
}

fn mask(ip: IpAddr, prefix: u8) -> u128 {
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    let host_bits = u32::from(bits - prefix);
    let all = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    match host_bits {
        0 => all,
        h if h >= 128 => 0,
        h => all & !((1u128 << h) - 1),
    }
}

fn same_network(net: IpAddr, ip: IpAddr, prefix: u8) -> bool {
    net.is_ipv4() == ip.is_ipv4() && to_u128(ip) & mask(net, prefix) == to_u128(net)
}

/// The first and last address of a network.
fn bounds(net: IpAddr, prefix: u8) -> (u128, u128) {
    let start = to_u128(net);
    let all = if net.is_ipv4() {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    (start, start | (all & !mask(net, prefix)))
}

/// Whether `ip` of the network may be dealt: not an IPv4 network's own or broadcast address
/// (networks of four addresses or more).
fn usable(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    let (start, end) = bounds(net, prefix);
    let n = to_u128(ip);
    !(net.is_ipv4() && prefix <= 30 && (n == start || n == end))
}

/// What a Gateway asks of the pool.
#[derive(Clone, Debug)]
pub struct Wanted {
    /// `spec.addresses`: (type, value) of each.
    pub requested: Vec<(Option<String>, Option<String>)>,
}

/// Why a Gateway has no address: the Gateway API's condition and reason, and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoAddress {
    /// `Accepted` (an address of a type sluice does not deal) or `Programmed`.
    pub condition: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Deals addresses to Gateways (in the order given: oldest first), each its own.
pub fn deal<K: Ord + Clone + fmt::Display>(
    pool: &AddressPool,
    gateways: &[(K, Wanted)],
) -> BTreeMap<K, Result<IpAddr, NoAddress>> {
    let mut taken: BTreeMap<IpAddr, K> = BTreeMap::new();
    let mut out = BTreeMap::new();
    // Asked for in spec.addresses first: an address named there is the Gateway's own choice.
    for (key, w) in gateways.iter().filter(|(_, w)| !w.requested.is_empty()) {
        out.insert(key.clone(), requested(pool, &mut taken, key, &w.requested));
    }
    for (key, _) in gateways.iter().filter(|(_, w)| w.requested.is_empty()) {
        let dealt = hashed(pool, &taken, &key.to_string()).ok_or_else(|| NoAddress {
            condition: "Programmed",
            reason: "AddressNotAssigned",
            message: format!(
                "every address of sluice's Gateway address pool ({pool}) is taken by another Gateway; delete one, or widen --gateway-addresses"
            ),
        });
        if let Ok(ip) = dealt {
            taken.insert(ip, key.clone());
        }
        out.insert(key.clone(), dealt);
    }
    out
}

/// The address a hash of `name` picks in the pool, or the next free one after it (wrapping);
/// None when every address is taken.
fn hashed<K>(pool: &AddressPool, taken: &BTreeMap<IpAddr, K>, name: &str) -> Option<IpAddr> {
    use sha2::{Digest, Sha256};
    let n = pool.len();
    if n == 0 || taken.len() >= n {
        return None;
    }
    let digest = Sha256::digest(name.as_bytes());
    let start = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes")) % n as u64;
    (0..n)
        .filter_map(|i| pool.nth((start as usize + i) % n))
        .find(|ip| !taken.contains_key(ip))
}

/// The address of a Gateway that names some in `spec.addresses`: the first, which must be of
/// type `IPAddress`, in the pool and free (sluice gives a Gateway one address).
fn requested<K: Ord + Clone + fmt::Display>(
    pool: &AddressPool,
    taken: &mut BTreeMap<IpAddr, K>,
    key: &K,
    requested: &[(Option<String>, Option<String>)],
) -> Result<IpAddr, NoAddress> {
    let not_usable = |message: String| NoAddress {
        condition: "Programmed",
        reason: "AddressNotUsable",
        message,
    };
    for (i, (kind, _)) in requested.iter().enumerate() {
        let kind = kind.as_deref().unwrap_or(IP_ADDRESS);
        if kind != IP_ADDRESS {
            return Err(NoAddress {
                condition: "Accepted",
                reason: "UnsupportedAddress",
                message: format!(
                    "spec.addresses[{i}].type: sluice gives Gateways addresses of type {IP_ADDRESS}, not {kind:?}"
                ),
            });
        }
    }
    let (_, value) = &requested[0];
    let Some(value) = value.as_deref().filter(|v| !v.is_empty()) else {
        // No value: any address of the pool.
        let ip = hashed(pool, taken, &key.to_string());
        return match ip {
            Some(ip) => {
                taken.insert(ip, key.clone());
                Ok(ip)
            }
            None => Err(NoAddress {
                condition: "Programmed",
                reason: "AddressNotAssigned",
                message: format!(
                    "every address of sluice's Gateway address pool ({pool}) is taken"
                ),
            }),
        };
    };
    let Ok(ip) = value.parse::<IpAddr>() else {
        return Err(not_usable(format!(
            "spec.addresses[0].value: {value:?} is not an IP address"
        )));
    };
    if !pool.contains(ip) {
        return Err(not_usable(format!(
            "spec.addresses[0].value: {ip} is not in sluice's Gateway address pool ({pool}); name one of it or leave spec.addresses out"
        )));
    }
    if let Some(other) = taken.get(&ip) {
        return Err(not_usable(format!(
            "spec.addresses[0].value: {ip} is already Gateway {other}'s address; name another"
        )));
    }
    taken.insert(ip, key.clone());
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn wanted(requested: &[(&str, &str)]) -> Wanted {
        Wanted {
            requested: (requested.iter())
                .map(|(t, v)| (Some(t.to_string()), Some(v.to_string())))
                .collect(),
        }
    }

    #[test]
    fn parses_networks_and_addresses_and_refuses_the_rest() {
        let pool: AddressPool = "127.0.1.0/24, 192.0.2.7".parse().unwrap();
        assert_eq!(pool.to_string(), "127.0.1.0/24,192.0.2.7/32");
        let all: Vec<IpAddr> = pool.addresses().collect();
        assert_eq!(all.len(), 255);
        assert_eq!(all[0], ip("127.0.1.1"));
        assert_eq!(all[253], ip("127.0.1.254"));
        assert_eq!(all[254], ip("192.0.2.7"));
        assert!(pool.contains(ip("127.0.1.9")) && !pool.contains(ip("127.0.1.0")));
        assert_eq!(pool.len(), 255);
        assert_eq!(pool.nth(0), Some(ip("127.0.1.1")));
        assert_eq!(pool.nth(254), Some(ip("192.0.2.7")));
        assert_eq!(pool.nth(255), None);
        assert!(!pool.contains(ip("127.0.2.1")) && !pool.contains(ip("::1")));
        let v6: AddressPool = "fd00::/126".parse().unwrap();
        assert_eq!(v6.addresses().count(), 4);
        for bad in ["", "127.0.1.0/33", "nope", "10.0.0.0/8", "127.0.1.0/x"] {
            assert!(bad.parse::<AddressPool>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn deals_requested_then_hashed_addresses_each_its_own() {
        let pool: AddressPool = "127.0.1.0/29".parse().unwrap();
        let gws = vec![
            ("a", wanted(&[])),
            ("b", wanted(&[])),
            ("c", wanted(&[("IPAddress", "127.0.1.5")])),
            ("d", wanted(&[])),
        ];
        let got = deal(&pool, &gws);
        assert_eq!(got["c"], Ok(ip("127.0.1.5")), "c asked for it");
        for k in ["a", "b", "d"] {
            let dealt = got[k].clone().unwrap();
            assert!(
                pool.contains(dealt) && dealt != ip("127.0.1.5"),
                "{k}: {dealt}"
            );
        }
        let all: std::collections::BTreeSet<_> = got.values().map(|r| r.clone().unwrap()).collect();
        assert_eq!(all.len(), 4, "each its own: {got:?}");
    }

    #[test]
    fn a_hashed_address_does_not_move_when_another_gateway_goes() {
        let pool: AddressPool = "127.0.1.0/24".parse().unwrap();
        let names: Vec<String> = (0..40).map(|i| format!("ns/gw-{i}")).collect();
        let all: Vec<(String, Wanted)> = names.iter().map(|n| (n.clone(), wanted(&[]))).collect();
        let before = deal(&pool, &all);
        // Every other Gateway deleted: those left keep their addresses, with no status to say
        // what they were (standalone mode).
        let half: Vec<(String, Wanted)> = all.iter().step_by(2).cloned().collect();
        let after = deal(&pool, &half);
        let moved: Vec<&String> = (after.iter())
            .filter(|(k, ip)| before[*k] != **ip)
            .map(|(k, _)| k)
            .collect();
        // Only a Gateway that had to step past a collision can move; with 40 of 254 that is
        // a few at most.
        assert!(moved.len() <= 4, "{moved:?}");
        assert_eq!(deal(&pool, &all), before, "the same in every build");
    }

    #[test]
    fn refuses_addresses_outside_the_pool_taken_or_of_other_types_and_runs_out() {
        let pool: AddressPool = "127.0.1.1".parse().unwrap();
        let gws = vec![
            ("a", wanted(&[("IPAddress", "127.0.1.1")])),
            ("b", wanted(&[("IPAddress", "127.0.1.1")])),
            ("c", wanted(&[("IPAddress", "198.51.100.1")])),
            ("d", wanted(&[("test/fake-invalid-type", "x")])),
            ("e", wanted(&[])),
        ];
        let got = deal(&pool, &gws);
        assert_eq!(got["a"], Ok(ip("127.0.1.1")));
        let reason = |k: &str| got[k].as_ref().unwrap_err().reason;
        assert_eq!(reason("b"), "AddressNotUsable");
        assert_eq!(reason("c"), "AddressNotUsable");
        assert_eq!(reason("d"), "UnsupportedAddress");
        assert_eq!(got["d"].as_ref().unwrap_err().condition, "Accepted");
        assert_eq!(reason("e"), "AddressNotAssigned");
    }
}
