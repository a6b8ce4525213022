//! Where Gateways' listeners are served. With addresses of their own (`--gateway-addresses`):
//! each Gateway's address dealt from the pool ([`super::addresses`]), and the ports of its
//! accepted listeners opened at it. On Envoy's shared listeners: the ports of TCP listeners,
//! each given to one listener ([`tcp_ports`]).

use std::collections::BTreeMap;

use super::Builder;
use super::addresses::{AddressPool, Wanted};
use super::gateway_acc::{GatewayAcc, Served};
use super::gateway_common::{cond, oldest_first};
use super::gateway_listeners::not_accepted;
use super::model::EntryProtocol;
use crate::api::{Kind, ObjKey};
use crate::store::Snapshot;

/// Deals each Gateway an address of its own from `pool` ([`super::addresses::deal`]): oldest
/// first, so an older Gateway keeps an address two ask for.
pub(super) fn own_addresses(
    snapshot: &Snapshot,
    pool: &AddressPool,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
) {
    let wanted: Vec<(ObjKey, Wanted)> = oldest_first(&snapshot.gateways, |g| &g.metadata)
        .into_iter()
        .filter(|(key, _)| gateways.contains_key(*key))
        .map(|(key, gw)| {
            let requested = (gw.spec.addresses.iter().flatten())
                .map(|a| (a.r#type.clone(), a.value.clone()))
                .collect();
            (key.clone(), Wanted { requested })
        })
        .collect();
    for (key, dealt) in super::addresses::deal(pool, &wanted) {
        if let Some(gw) = gateways.get_mut(&key) {
            gw.served = match dealt {
                Ok(ip) => Served::At(ip),
                Err(why) => Served::Nowhere(why),
            };
        }
    }
}

/// Opens the ports of the accepted listeners of every Gateway that has an address: Envoy
/// listens there, whether or not a route is attached (a request then gets 404, a TLS client the
/// certificate of the port's first HTTPS listener).
pub(super) fn open_entries(b: &mut Builder<'_>, gateways: &BTreeMap<ObjKey, GatewayAcc>) {
    for gw in gateways.values() {
        let Served::At(address) = gw.served else {
            continue;
        };
        if gw.invalid.is_some() {
            continue;
        }
        for l in gw.listeners.iter().flatten().filter(|l| l.programmed) {
            let Some(Some(key)) = gw.scope(l.port) else {
                continue;
            };
            let protocol = match (l.tcp, l.kinds.first()) {
                (true, _) => EntryProtocol::Tcp,
                (_, Some(Kind::TlsRoute)) => EntryProtocol::Tls,
                _ if l.tls.is_some() => EntryProtocol::Tls,
                _ => EntryProtocol::Http,
            };
            let https = l.tls.is_some()
                && protocol == EntryProtocol::Tls
                && !l.kinds.contains(&Kind::TlsRoute);
            let secret = l.tls.as_deref().filter(|_| https);
            let validation = l.client_validation.as_ref().filter(|_| https);
            b.open_entry(
                &key,
                address,
                protocol,
                secret,
                l.hostname.is_none(),
                validation,
            );
            if https {
                b.add_entry_https_listener(&key, l.hostname.as_deref());
            }
        }
    }
}

/// Gives each port of sluice's Gateways' TCP listeners to one listener: Envoy listens on a
/// TCP listener's port itself, once for all Gateways. The oldest Gateway's listener keeps a port
/// two Gateways name; the other is not accepted (`PortUnavailable`).
pub(super) fn tcp_ports(snapshot: &Snapshot, gateways: &mut BTreeMap<ObjKey, GatewayAcc>) {
    let mut taken: BTreeMap<i32, String> = BTreeMap::new();
    for (key, _) in oldest_first(&snapshot.gateways, |g| &g.metadata) {
        let Some(gw) = gateways.get_mut(key) else {
            continue;
        };
        let listeners = gw.listeners.iter_mut().zip(&mut gw.listener_status);
        for (i, (l, status)) in listeners.enumerate() {
            let Some(listener) = l.as_ref().filter(|l| l.tcp) else {
                continue;
            };
            match taken.get(&listener.port) {
                None => {
                    let by = format!("listener {:?} of Gateway {key}", listener.name);
                    taken.insert(listener.port, by);
                }
                Some(by) => {
                    let message = format!(
                        "spec.listeners[{i}].port: Envoy already listens on port {} for {by}, an older Gateway's TCP listener; choose another port",
                        listener.port
                    );
                    *status = not_accepted(status.clone(), cond::PORT_UNAVAILABLE, message).1;
                    *l = None;
                }
            }
        }
    }
}
