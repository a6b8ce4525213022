//! ListenerSets (`gateway.networking.k8s.io/v1`, GEP-1713): listeners attached to a Gateway of
//! sluice's from other objects, possibly in other namespaces.
//!
//! - A Gateway takes ListenerSets from the namespaces its `spec.allowedListeners.namespaces`
//!   names: `None` (the default: no ListenerSet), `Same`, `All` or `Selector` (namespaces whose
//!   labels match). A ListenerSet it does not take is `Accepted=False/NotAllowed`; one whose
//!   Gateway is not accepted `ParentNotAccepted`; one that breaks a single-object rule
//!   (`crate::validate::listenerset`) `Invalid`.
//! - An attached ListenerSet's listeners join the Gateway's, after its own, ListenerSets oldest
//!   first (creationTimestamp, then namespace/name). A listener sharing a port with an earlier
//!   accepted listener of the Gateway's or of an earlier ListenerSet is not accepted when the
//!   two cannot share it: `ProtocolConflict` (different protocols, or two TCP listeners),
//!   `HostnameConflict` (same protocol, same hostname). The earlier listener keeps the port.
//! - Each listener is worked out as a Gateway's ([`super::gateway`]); a certificate in another
//!   namespace needs a ReferenceGrant to ListenerSets of the set's namespace, and `Same` in its
//!   `allowedRoutes` is the ListenerSet's namespace.
//! - Routes attach to a ListenerSet's listeners through a parentRef of kind `ListenerSet`
//!   ([`super::gwroute`]'s `Tally::takes`); a parentRef naming the Gateway selects only its own
//!   listeners.
//! - A ListenerSet is `Accepted=True` when some listener is accepted with its references
//!   resolved (reason `ListenersNotValid` when others are not), else `Accepted=False` and
//!   `Programmed=False` with `ListenersNotValid`. The Gateway's `status.attachedListenerSets`
//!   counts the accepted ones.

use std::collections::BTreeMap;

use gateway_api::apis::experimental::gateways::{Gateway, GatewayAllowedListenersNamespacesFrom};
use gateway_api::apis::experimental::listenersets::ListenerSet;

use super::Builder;
use super::gateway_acc::{GatewayAcc, Served, SetAcc};
use super::gateway_common::{
    GROUP, Listener, Namespaces, cond, condition, oldest_first, refs_resolved,
};
use super::gateway_listeners::{http_hostnames, listener, not_accepted};
use super::model::{GatewayApiStatus, GatewayCondition, ListenerStatus};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::{PortGroup, port_group};
use crate::validate::label_selector::listener_selector;
use crate::validate::listenerset::{as_gateway_listener, validate_listener_set};

/// Which namespaces' ListenerSets a Gateway takes (`spec.allowedListeners.namespaces`); None
/// when it takes none (`from: None`, the default, or a selector that does not read).
pub(super) fn allowed_listeners(gw: &Gateway) -> Option<Namespaces> {
    let n = gw.spec.allowed_listeners.as_ref()?.namespaces.as_ref()?;
    match n.from.as_ref()? {
        GatewayAllowedListenersNamespacesFrom::None => None,
        GatewayAllowedListenersNamespacesFrom::Same => Some(Namespaces::Same),
        GatewayAllowedListenersNamespacesFrom::All => Some(Namespaces::All),
        GatewayAllowedListenersNamespacesFrom::Selector => {
            // The two selectors are one Kubernetes LabelSelector, generated twice.
            let selector = serde_json::to_value(n.selector.as_ref()?)
                .and_then(serde_json::from_value)
                .ok()?;
            let at = "spec.allowedListeners.namespaces.selector";
            listener_selector(at, Some(&selector))
                .ok()
                .map(Namespaces::Selector)
        }
    }
}

/// Attaches every ListenerSet whose parent is one of `gateways` to it, oldest first: its
/// listeners join the Gateway's, those that conflict with an earlier listener not accepted.
/// Run before the Gateways' addresses and ports are dealt and before routes attach.
pub(super) fn attach_listener_sets(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
) {
    for (key, ls) in oldest_first(&snapshot.listener_sets, |l| &l.metadata) {
        let obj = ObjectRef {
            kind: Kind::ListenerSet,
            key: key.clone(),
        };
        // Tracked also when not sluice's: the status writer releases what it wrote.
        b.track_generation_of(&obj, ls.metadata.generation);
        let p = &ls.spec.parent_ref;
        let names_gateway = p.group.as_deref().unwrap_or(GROUP) == GROUP
            && p.kind.as_deref().unwrap_or("Gateway") == "Gateway";
        let gw_key = ObjKey::new(
            p.namespace.as_deref().unwrap_or(&key.namespace),
            p.name.as_str(),
        );
        let Some(gw) = gateways.get_mut(&gw_key).filter(|_| names_gateway) else {
            b.set_ignored(&obj, "its parentRef is not a Gateway of sluice's");
            continue;
        };
        let refused = refusal(snapshot, gw, key, ls);
        let start = gw.listeners.len();
        if refused.is_none() {
            for (i, l) in ls.spec.listeners.iter().enumerate() {
                let field = format!("spec.listeners[{i}]");
                let (listener, status) = match as_gateway_listener(&field, l) {
                    Ok(l) => {
                        let owner = ("ListenerSet", &*key.namespace);
                        let (listener, status) = listener(b, snapshot, owner, i, &l, &gw.frontend);
                        conflicts(gw, key, &field, listener, status)
                    }
                    Err(e) => {
                        let status = ListenerStatus {
                            name: l.name.clone(),
                            supported_kinds: Vec::new(),
                            attached_routes: 0,
                            conditions: Vec::new(),
                        };
                        not_accepted(status, cond::INVALID, e.to_string())
                    }
                };
                gw.listeners.push(listener);
                gw.listener_status.push(status);
            }
            gw.http_hostnames = http_hostnames(&gw.listeners);
        }
        let set = SetAcc {
            obj,
            range: start..gw.listeners.len(),
            refused,
        };
        gw.listener_sets.insert(key.clone(), set);
    }
}

/// Why Gateway `gw` does not take ListenerSet `ls` (`key`): the problem its `Accepted=False`
/// reports, None when it does.
fn refusal(
    snapshot: &Snapshot,
    gw: &GatewayAcc,
    key: &ObjKey,
    ls: &ListenerSet,
) -> Option<FieldError> {
    let verdict = validate_listener_set(ls);
    if let Some(all) = FieldError::joined(&verdict.errors) {
        return Some(FieldError {
            reason: cond::INVALID,
            ..all
        });
    }
    let gw_key = &gw.obj.key;
    if let Some(why) = &gw.invalid {
        return Some(FieldError::new(
            "",
            cond::PARENT_NOT_ACCEPTED,
            format!("Gateway {gw_key} is not accepted: {why}"),
        ));
    }
    let ns = &*key.namespace;
    let why = match &gw.allowed_listeners {
        None => format!(
            "Gateway {gw_key} takes no ListenerSets (spec.allowedListeners.namespaces.from is None, the default); set it to Same, All or Selector to take this one"
        ),
        Some(allowed) if !allowed.allow(snapshot, &gw_key.namespace, ns) => match allowed {
            Namespaces::Same => format!(
                "Gateway {gw_key} takes ListenerSets of namespace {:?} only (spec.allowedListeners.namespaces.from: Same); set it to All or Selector to take this one",
                &*gw_key.namespace
            ),
            _ => format!(
                "Gateway {gw_key} takes ListenerSets of the namespaces its spec.allowedListeners.namespaces.selector matches, and the labels of namespace {ns:?} do not match it; label the namespace or widen the selector"
            ),
        },
        Some(_) => return None,
    };
    Some(FieldError::new("", cond::NOT_ALLOWED, why))
}

/// Listener `field` of ListenerSet `key`, worked out as `listener` and `status`, checked against
/// the accepted listeners already on Gateway `gw` (its own, earlier ListenerSets', earlier ones
/// of this set): one it cannot share its port with keeps it, and this one is not accepted
/// (`Conflicted`).
fn conflicts(
    gw: &GatewayAcc,
    key: &ObjKey,
    field: &str,
    listener: Option<Listener>,
    status: ListenerStatus,
) -> (Option<Listener>, ListenerStatus) {
    let Some(mut l) = listener else {
        return (None, status);
    };
    let earlier = (gw.listeners.iter().flatten()).find_map(|o| conflict(&l, o).map(|r| (o, r)));
    let Some((o, reason)) = earlier else {
        l.origin = Some(key.clone());
        return (Some(l), status);
    };
    let holder = match &o.origin {
        None => format!("listener {:?} of Gateway {}", o.name, gw.obj.key),
        Some(set) => format!("listener {:?} of ListenerSet {set}", o.name),
    };
    let message = match reason {
        cond::PROTOCOL_CONFLICT => format!(
            "{field}.protocol: port {} is taken by {holder} (protocol {}), which precedes this listener, and {} cannot share it; choose another port",
            l.port, o.protocol, l.protocol
        ),
        _ => format!(
            "{field}.hostname: port {}, protocol {} and {} are taken by {holder}, which precedes this listener; choose another hostname or port",
            l.port,
            l.protocol,
            match &l.hostname {
                Some(h) => format!("hostname {h:?}"),
                None => "no hostname".to_string(),
            }
        ),
    };
    let mut status = status;
    status.conditions = vec![
        condition(cond::ACCEPTED, false, reason, message.clone()),
        condition(cond::PROGRAMMED, false, reason, message.clone()),
        condition(cond::CONFLICTED, true, reason, message),
        refs_resolved(),
    ];
    (None, status)
}

/// Why listener `l` cannot share its port with the earlier listener `o`: `ProtocolConflict`
/// (protocols that cannot share a port), `HostnameConflict` (listeners sharing it that requests
/// cannot be told apart by: the same hostname, or none); None when they can share it.
fn conflict(l: &Listener, o: &Listener) -> Option<&'static str> {
    if l.port != o.port {
        return None;
    }
    let (a, b) = (port_group(&l.protocol), port_group(&o.protocol));
    if a != b || a == PortGroup::Tcp {
        return Some(cond::PROTOCOL_CONFLICT);
    }
    (l.hostname == o.hostname).then_some(cond::HOSTNAME_CONFLICT)
}

/// Records the status of every ListenerSet naming Gateway `gw` and takes their listeners out of
/// the Gateway's (whose status lists its own only); the number of ListenerSets attached
/// (`status.attachedListenerSets`), None for a Gateway that takes none and has none.
pub(super) fn set_statuses(b: &mut Builder<'_>, gw: &mut GatewayAcc) -> Option<u32> {
    let own = gw.own_listeners;
    let statuses = gw.listener_status.split_off(own);
    gw.listeners.truncate(own);
    let mut attached = 0;
    for (_, set) in std::mem::take(&mut gw.listener_sets) {
        let listeners = statuses
            .get(set.range.start - own..set.range.end - own)
            .map(<[ListenerStatus]>::to_vec)
            .unwrap_or_default();
        let conditions = match &set.refused {
            Some(problem) => vec![
                GatewayCondition::failed(cond::ACCEPTED, problem),
                GatewayCondition::failed(cond::PROGRAMMED, problem),
            ],
            None => set_conditions(gw, &listeners),
        };
        let accepted = conditions
            .iter()
            .any(|c| c.type_ == cond::ACCEPTED && c.status);
        if accepted {
            attached += 1;
            b.set_valid(&set.obj, format!("attached to Gateway {}", gw.obj.key));
        } else {
            let why = conditions.first().map(|c| c.message.clone());
            b.set_invalid(
                &set.obj,
                crate::api::status::reason::INVALID_SPEC,
                why.unwrap_or_default(),
            );
        }
        b.set_gateway_status(
            &set.obj,
            GatewayApiStatus {
                conditions,
                listeners,
                ..Default::default()
            },
        );
    }
    (gw.allowed_listeners.is_some() || attached > 0).then_some(attached)
}

/// The `Accepted` and `Programmed` conditions of a ListenerSet attached to Gateway `gw`, from its
/// listeners' statuses.
fn set_conditions(gw: &GatewayAcc, listeners: &[ListenerStatus]) -> Vec<GatewayCondition> {
    let holds = |s: &ListenerStatus, type_: &str| {
        (s.conditions.iter()).any(|c| c.type_ == type_ && c.status)
    };
    let valid = |s: &&ListenerStatus| holds(s, cond::ACCEPTED) && holds(s, cond::RESOLVED_REFS);
    let bad: Vec<&str> = (listeners.iter())
        .filter(|s| !(valid(s) && holds(s, cond::PROGRAMMED)))
        .map(|s| s.name.as_str())
        .collect();
    let why = format!(
        "listeners {} are not accepted, programmed or resolved (see status.listeners)",
        bad.join(", ")
    );
    if let Served::Nowhere(no) = &gw.served
        && no.condition == cond::ACCEPTED
    {
        // A Gateway without an address it may have is not accepted.
        let why = format!("Gateway {} is not accepted: {}", gw.obj.key, no.message);
        return vec![
            condition(
                cond::ACCEPTED,
                false,
                cond::PARENT_NOT_ACCEPTED,
                why.clone(),
            ),
            condition(cond::PROGRAMMED, false, cond::PARENT_NOT_ACCEPTED, why),
        ];
    }
    if !listeners.iter().any(|s| valid(&s)) {
        return vec![
            condition(
                cond::ACCEPTED,
                false,
                cond::LISTENERS_NOT_VALID,
                why.clone(),
            ),
            condition(cond::PROGRAMMED, false, cond::LISTENERS_NOT_VALID, why),
        ];
    }
    let accepted = match bad.is_empty() {
        true => condition(
            cond::ACCEPTED,
            true,
            cond::ACCEPTED,
            format!("attached to Gateway {}", gw.obj.key),
        ),
        false => condition(cond::ACCEPTED, true, cond::LISTENERS_NOT_VALID, why),
    };
    let programmed = match &gw.served {
        Served::Nowhere(no) => condition(
            cond::PROGRAMMED,
            false,
            cond::PARENT_NOT_PROGRAMMED,
            format!("Gateway {} is not programmed: {}", gw.obj.key, no.message),
        ),
        _ => condition(
            cond::PROGRAMMED,
            true,
            cond::PROGRAMMED,
            "its listeners are programmed into Envoy",
        ),
    };
    vec![accepted, programmed]
}
