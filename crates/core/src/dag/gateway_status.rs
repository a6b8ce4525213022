//! The statuses of sluice's Gateways once every route has attached: each listener's attached
//! routes and `Programmed` condition, the ListenerSets' statuses, and the Gateway's own
//! conditions (`Accepted`, `Programmed`, and those of its TLS settings).

use crate::dag::Builder;
use crate::dag::gateway_acc::{GatewayAcc, Served};
use crate::dag::gateway_common::{cond, condition};
use crate::dag::model::{GatewayApiStatus, GatewayCondition, ListenerStatus};

/// Writes the status of Gateway `gw` and of its ListenerSets.
pub(super) fn finish_gateway(b: &mut Builder<'_>, mut gw: GatewayAcc) {
    finish_listeners(&mut gw);
    // The ListenerSets' statuses, from their listeners'; their listeners leave the Gateway's.
    let sets = crate::dag::listenerset::set_statuses(b, &mut gw);
    let mut conditions = gateway_conditions(&gw);
    // The client certificate for TLS backends: its own condition; the Gateway stays
    // accepted without it.
    if let Some((resolved, _)) = gw.backend_client.take() {
        conditions.push(resolved);
    }
    if let Some(insecure) = gw.insecure_frontend.take() {
        conditions.push(insecure);
    }
    b.track_generation_of(&gw.obj, gw.generation);
    match &gw.invalid {
        Some(why) => b.set_invalid(
            &gw.obj,
            crate::api::status::reason::INVALID_SPEC,
            why.clone(),
        ),
        None => b.set_valid(&gw.obj, "programmed Gateway"),
    }
    let addresses = match &gw.served {
        Served::At(ip) => vec![*ip],
        _ => Vec::new(),
    };
    b.set_gateway_status(
        &gw.obj,
        GatewayApiStatus {
            conditions,
            listeners: gw.listener_status,
            addresses,
            attached_listener_sets: sets,
            ..Default::default()
        },
    );
}

/// Each listener's count of attached routes; no listener of a Gateway that is not accepted is
/// programmed; a listener served at the Gateway's own address says where.
fn finish_listeners(gw: &mut GatewayAcc) {
    for (l, status) in gw.listeners.iter().zip(&mut gw.listener_status) {
        if let Some(l) = l {
            status.attached_routes = l.attached;
        }
        if let Some(why) = &gw.invalid {
            for c in status.conditions.iter_mut() {
                if c.type_ == cond::PROGRAMMED {
                    *c = condition(
                        cond::PROGRAMMED,
                        false,
                        cond::INVALID,
                        format!("the Gateway is not accepted: {why}"),
                    );
                }
            }
        }
    }
    if let Served::At(ip) = &gw.served {
        for (l, status) in gw.listeners.iter().zip(&mut gw.listener_status) {
            let Some(l) = l else { continue };
            for c in status.conditions.iter_mut() {
                if c.type_ == cond::PROGRAMMED && c.status {
                    c.message = format!(
                        "Envoy listens on {} for it",
                        std::net::SocketAddr::new(*ip, l.port as u16)
                    );
                }
            }
        }
    }
}

/// Every condition of a listener holds: accepted, programmed and resolved.
fn listener_ok(s: &ListenerStatus) -> bool {
    s.conditions.iter().all(|c| c.status)
}

/// The Gateway's `Accepted` and `Programmed`: from its own problems, its address, and its
/// listeners'.
fn gateway_conditions(gw: &GatewayAcc) -> Vec<GatewayCondition> {
    let no_address = match &gw.served {
        Served::Nowhere(why) => Some(why),
        _ => None,
    };
    match (&gw.invalid, no_address) {
        (None, Some(why)) if why.condition == cond::ACCEPTED => vec![
            condition(cond::ACCEPTED, false, why.reason, why.message.clone()),
            condition(cond::PROGRAMMED, false, cond::INVALID, why.message.clone()),
        ],
        (None, Some(why)) => vec![
            condition(
                cond::ACCEPTED,
                true,
                cond::ACCEPTED,
                "sluice serves this Gateway",
            ),
            condition(cond::PROGRAMMED, false, why.reason, why.message.clone()),
        ],
        (Some(why), _) => vec![
            condition(cond::ACCEPTED, false, gw.invalid_reason, why.clone()),
            condition(cond::PROGRAMMED, false, cond::INVALID, why.clone()),
        ],
        (None, None) if gw.listener_status.iter().all(listener_ok) => vec![
            condition(
                cond::ACCEPTED,
                true,
                cond::ACCEPTED,
                "sluice serves this Gateway",
            ),
            condition(
                cond::PROGRAMMED,
                true,
                cond::PROGRAMMED,
                "its listeners are programmed into Envoy",
            ),
        ],
        (None, None) => listeners_not_valid(&gw.listener_status),
    }
}

/// The conditions of a Gateway some of whose listeners are not accepted, programmed or resolved:
/// not accepted when not one listener is; listeners accepted but not programmed (a certificate
/// that does not resolve) leave it accepted and programmed with the rest, as the Gateway API
/// asks.
fn listeners_not_valid(listeners: &[ListenerStatus]) -> Vec<GatewayCondition> {
    let bad: Vec<&str> = (listeners.iter())
        .filter(|s| !listener_ok(s))
        .map(|s| s.name.as_str())
        .collect();
    let why = format!(
        "listeners {} are not accepted, programmed or resolved (see status.listeners)",
        bad.join(", ")
    );
    let rejected =
        |s: &ListenerStatus| (s.conditions.iter()).any(|c| c.type_ == cond::ACCEPTED && !c.status);
    if listeners.iter().all(rejected) {
        vec![
            condition(
                cond::ACCEPTED,
                false,
                cond::LISTENERS_NOT_VALID,
                why.clone(),
            ),
            condition(cond::PROGRAMMED, false, cond::INVALID, why),
        ]
    } else {
        vec![
            condition(cond::ACCEPTED, true, cond::LISTENERS_NOT_VALID, why.clone()),
            condition(cond::PROGRAMMED, true, cond::PROGRAMMED, why),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(name: &str, accepted: bool, programmed: bool) -> ListenerStatus {
        ListenerStatus {
            name: name.to_string(),
            supported_kinds: Vec::new(),
            attached_routes: 0,
            conditions: vec![
                condition(cond::ACCEPTED, accepted, cond::ACCEPTED, ""),
                condition(cond::PROGRAMMED, programmed, cond::PROGRAMMED, ""),
            ],
        }
    }

    fn summary(cs: &[GatewayCondition]) -> Vec<String> {
        (cs.iter())
            .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
            .collect()
    }

    #[test]
    fn a_gateway_none_of_whose_listeners_is_accepted_is_not_accepted() {
        let cs = listeners_not_valid(&[listener("a", false, false), listener("b", false, false)]);
        let why = "listeners a, b are not accepted, programmed or resolved (see status.listeners)";
        assert_eq!(
            summary(&cs),
            [
                format!("Accepted=false/ListenersNotValid: {why}"),
                format!("Programmed=false/Invalid: {why}"),
            ]
        );
    }

    #[test]
    fn a_gateway_with_some_listener_accepted_stays_accepted_and_programmed() {
        let cs = listeners_not_valid(&[listener("a", true, true), listener("b", true, false)]);
        let why = "listeners b are not accepted, programmed or resolved (see status.listeners)";
        assert_eq!(
            summary(&cs),
            [
                format!("Accepted=true/ListenersNotValid: {why}"),
                format!("Programmed=true/Programmed: {why}"),
            ]
        );
    }
}
