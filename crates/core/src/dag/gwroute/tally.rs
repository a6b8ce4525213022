//! How the listeners of a route's parent Gateway met the route ([`Tally`]): which select it,
//! allow its namespace and take its kind, and the `Accepted=False` condition naming the setting
//! to change when none takes it.

use super::super::gateway_common::{Listener, Namespaces, cond, condition};
use super::super::model::GatewayCondition;
use super::ParentIn;
use crate::api::{Kind, ObjKey};
use crate::store::Snapshot;

/// How the listeners of one parent Gateway met a route: how many the parent selects, allow the
/// route's namespace and take its kind.
#[derive(Default)]
pub(super) struct Tally {
    /// The ListenerSet the parent names, whose listeners it selects (None: the Gateway's own).
    set: Option<ObjKey>,
    selected: u32,
    by_selector: bool,
    namespace_allowed: u32,
    allowed: u32,
}

impl Tally {
    /// Whether listener `l` of Gateway `gw_key` is selected by parent `p` and takes a route of
    /// `kind` in the namespace of `route`; counted either way.
    pub(super) fn takes(
        &mut self,
        snapshot: &Snapshot,
        p: &ParentIn<'_>,
        gw_key: &ObjKey,
        l: &Listener,
        route: &ObjKey,
        kind: Kind,
    ) -> bool {
        // A parentRef naming the Gateway selects its own listeners, one naming a ListenerSet
        // that set's listeners only.
        self.set = p.listener_set(&route.namespace);
        if self.set.as_ref() != l.origin.as_ref() {
            return false;
        }
        if p.section_name.is_some_and(|s| s != l.name) || p.port.is_some_and(|port| port != l.port)
        {
            return false;
        }
        self.selected += 1;
        // `Same` is the namespace of the object that holds the listener.
        let home = l
            .origin
            .as_ref()
            .map_or(&gw_key.namespace, |set| &set.namespace);
        if !(l.from).allow(snapshot, home, &route.namespace) {
            self.by_selector |= matches!(l.from, Namespaces::Selector(_));
            return false;
        }
        self.namespace_allowed += 1;
        if !l.kinds.contains(&kind) {
            return false;
        }
        self.allowed += 1;
        true
    }

    /// The `Accepted=False` condition of a parent (`field`) no listener of which takes the
    /// route, naming the setting to change; None when some listener takes it.
    pub(super) fn refusal(
        &self,
        field: &str,
        gw_key: &ObjKey,
        route_ns: &str,
        kind: Kind,
    ) -> Option<GatewayCondition> {
        // What holds the listeners the parent selects, and the namespace `Same` means there.
        let (holder, home) = match &self.set {
            Some(set) => (format!("ListenerSet {set}"), &*set.namespace),
            None => (format!("Gateway {gw_key}"), &*gw_key.namespace),
        };
        let (reason, message) = if self.selected == 0 {
            (
                cond::NO_MATCHING_PARENT,
                format!(
                    "{field}: {holder} has no accepted listener with this sectionName and port"
                ),
            )
        } else if self.namespace_allowed == 0 && self.by_selector {
            (
                cond::NOT_ALLOWED_BY_LISTENERS,
                format!(
                    "{field}: the listeners of {holder} take routes of the namespaces their allowedRoutes.namespaces.selector matches, and the labels of namespace {route_ns:?} do not match it; label the namespace or widen the selector to take this route"
                ),
            )
        } else if self.namespace_allowed == 0 {
            (
                cond::NOT_ALLOWED_BY_LISTENERS,
                format!(
                    "{field}: the listeners of {holder} take routes of namespace {home:?} only (allowedRoutes.namespaces.from: Same); set it to All to take this route"
                ),
            )
        } else if self.allowed == 0 {
            let name = kind.kind();
            let which = match kind {
                Kind::TcpRoute => "a listener of protocol TCP takes them".to_string(),
                _ => format!("add {name} there to take this route"),
            };
            (
                cond::NOT_ALLOWED_BY_LISTENERS,
                format!(
                    "{field}: no accepted listener of {holder} takes {name}s (allowedRoutes.kinds; a listener not accepted says why in the Gateway's status); {which}"
                ),
            )
        } else {
            return None;
        };
        Some(condition(cond::ACCEPTED, false, reason, message))
    }
}
