//! ListenerSet rules (`gateway.networking.k8s.io/v1`, GEP-1713): what one ListenerSet must get
//! right whatever Gateway it attaches to. Its parent is a Gateway; its listeners follow the
//! rules of a Gateway's listeners (names unique within the set, ports, hostnames, TLS settings,
//! namespace selectors; [`super::gateway`]).
//!
//! Listeners of one ListenerSet that share a port with conflicting protocols or hostnames are not
//! refused here: which listener wins is decided across the Gateway and all its ListenerSets
//! (the Gateway's own listeners first, then older ListenerSets), and the loser is reported in
//! status (`Conflicted`), as the Gateway API asks.

use std::collections::HashMap;

use gateway_api::apis::experimental::gateways::GatewayListeners;
use gateway_api::apis::experimental::listenersets::{ListenerSet, ListenerSetListeners};

use super::gateway::{
    unique_name, validate_listener_host_and_tls, validate_namespace_selector, validate_port,
};
use super::{FieldError, Verdict, quote};

/// The API group of the Gateway API, the only group a ListenerSet's parent can be of.
const GROUP: &str = "gateway.networking.k8s.io";

/// A ListenerSet's listener as a Gateway's: the Gateway API defines a ListenerSet's listener
/// (`ListenerEntry`) as a copy of a Gateway's (`Listener`), so one decodes as the other, and the
/// Gateway's rules and listener processing apply unchanged. `path` names the listener in the
/// error of a listener that does not convert (none the CRD admits).
pub fn as_gateway_listener(
    path: &str,
    l: &ListenerSetListeners,
) -> Result<GatewayListeners, FieldError> {
    serde_json::to_value(l)
        .and_then(serde_json::from_value)
        .map_err(|e| FieldError::spec(path, format!("does not read as a Gateway listener: {e}")))
}

/// The single-object rules of a ListenerSet: its parentRef names a Gateway, it holds listeners,
/// and each listener is one a Gateway could hold, named uniquely within the set.
pub fn validate_listener_set(ls: &ListenerSet) -> Verdict {
    let mut v = Verdict::default();
    let parent = &ls.spec.parent_ref;
    let group = parent.group.as_deref().unwrap_or(GROUP);
    if group != GROUP {
        v.error(FieldError::invalid(
            "spec.parentRef.group",
            group,
            format!("is not the group of Gateways; a ListenerSet attaches to a Gateway (group {GROUP:?})"),
        ));
    }
    let kind = parent.kind.as_deref().unwrap_or("Gateway");
    if kind != "Gateway" {
        v.error(FieldError::invalid(
            "spec.parentRef.kind",
            kind,
            "is not a kind a ListenerSet attaches to; set it to \"Gateway\" (or leave it out)",
        ));
    }
    if parent.name.is_empty() {
        v.error(FieldError::required(
            "spec.parentRef.name",
            "name the Gateway this ListenerSet attaches to",
        ));
    }
    if ls.spec.listeners.is_empty() {
        v.error(FieldError::spec(
            "spec.listeners",
            "must hold at least one listener",
        ));
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, l) in ls.spec.listeners.iter().enumerate() {
        let base = format!("spec.listeners[{i}]");
        unique_name(
            &mut v,
            &mut names,
            ("spec.listeners", i),
            &l.name,
            "a ListenerSet",
        );
        validate_port(&mut v, &format!("{base}.port"), l.port);
        match as_gateway_listener(&base, l) {
            Ok(g) => {
                validate_listener_host_and_tls(&mut v, &base, &g);
                validate_namespace_selector(&mut v, &base, &g);
            }
            Err(e) => v.error(e),
        }
    }
    v
}

/// What a ListenerSet's parentRef names, as messages show it.
pub fn parent_text(ls: &ListenerSet, ls_namespace: &str) -> String {
    let p = &ls.spec.parent_ref;
    let ns = p.namespace.as_deref().unwrap_or(ls_namespace);
    format!("Gateway {}", quote(&format!("{ns}/{}", p.name)))
}
