//! What every part of the Gateway API processor shares: the API group and the route kinds each
//! listener protocol takes, the condition types and reasons ([`cond`]) and how conditions are
//! made, the listeners routes attach to ([`Listener`], [`Namespaces`]), ReferenceGrant checks
//! ([`granted`]) and the order objects are worked out in ([`oldest_first`]).
//!
//! It sits below every module of the processor (the route kinds, ListenerSets, frontend and
//! backend TLS, the Gateways' addresses) and imports none of them: they share these without
//! depending on [`super::gateway`], which calls them all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::model::{ClientValidation, GatewayCondition};
use crate::api::{Kind, ObjKey, ObjectRef, TlsVersion};
use crate::store::Snapshot;
use crate::validate::label_selector::LabelSelector;

/// The API group of the Gateway API.
pub const GROUP: &str = "gateway.networking.k8s.io";
/// The route kinds sluice attaches to HTTP and HTTPS listeners.
pub const ROUTE_KINDS: [Kind; 2] = [Kind::HttpRoute, Kind::GrpcRoute];
/// The route kinds sluice attaches to TCP listeners.
pub const TCP_ROUTE_KINDS: [Kind; 1] = [Kind::TcpRoute];
/// The route kinds sluice attaches to TLS listeners.
pub const TLS_ROUTE_KINDS: [Kind; 1] = [Kind::TlsRoute];

/// The route kind of the Gateway API named by `group` (None: the Gateway API's) and `kind`, as
/// a listener's `allowedRoutes.kinds` names one; None for any other kind. The build compares
/// route kinds as [`Kind`]s, their names only read from objects and written into statuses.
pub(super) fn route_kind(group: Option<&str>, kind: &str) -> Option<Kind> {
    const ALL: [Kind; 4] = [
        Kind::HttpRoute,
        Kind::GrpcRoute,
        Kind::TcpRoute,
        Kind::TlsRoute,
    ];
    if group.unwrap_or(GROUP) != GROUP {
        return None;
    }
    ALL.into_iter().find(|k| k.kind() == kind)
}

/// Minimum TLS version of hosts served from Gateway HTTPS listeners.
pub const GATEWAY_MIN_TLS: TlsVersion = TlsVersion::V1_2;

/// Condition types and reasons of the Gateway API.
pub mod cond {
    pub const ACCEPTED: &str = "Accepted";
    pub const PROGRAMMED: &str = "Programmed";
    pub const RESOLVED_REFS: &str = "ResolvedRefs";

    pub const INVALID_PARAMETERS: &str = "InvalidParameters";
    pub const INVALID: &str = "Invalid";
    pub const LISTENERS_NOT_VALID: &str = "ListenersNotValid";
    pub const UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
    pub const PORT_UNAVAILABLE: &str = "PortUnavailable";
    pub const UNSUPPORTED_VALUE: &str = "UnsupportedValue";
    pub const INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
    pub const INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    pub const NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
    pub const NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
    pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";
    pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
    pub const INVALID_KIND: &str = "InvalidKind";
    /// sluice's own: every hostname the route would serve belongs to another object.
    pub const HOST_CONFLICT: &str = "HostConflict";

    // ListenerSets (GEP-1713) and the listeners they attach to a Gateway.
    pub const CONFLICTED: &str = "Conflicted";
    pub const HOSTNAME_CONFLICT: &str = "HostnameConflict";
    pub const PROTOCOL_CONFLICT: &str = "ProtocolConflict";
    pub const NOT_ALLOWED: &str = "NotAllowed";
    pub const PARENT_NOT_ACCEPTED: &str = "ParentNotAccepted";
    pub const PARENT_NOT_PROGRAMMED: &str = "ParentNotProgrammed";
}

/// A condition of `type_`, true or false (`ok`), for `reason`.
pub(super) fn condition(
    type_: &'static str,
    ok: bool,
    reason: &'static str,
    message: impl Into<String>,
) -> GatewayCondition {
    GatewayCondition {
        type_,
        status: ok,
        reason,
        message: message.into(),
    }
}

/// `ResolvedRefs=True`: every reference of the object resolved.
pub(super) fn refs_resolved() -> GatewayCondition {
    condition(
        cond::RESOLVED_REFS,
        true,
        cond::RESOLVED_REFS,
        "references resolved",
    )
}

/// A route's `Accepted=True` for a parent Gateway.
pub(super) fn attached_to_gateway() -> GatewayCondition {
    condition(cond::ACCEPTED, true, cond::ACCEPTED, "attached to Gateway")
}

/// A listener of one of sluice's Gateways that routes can attach to.
pub(super) struct Listener {
    pub(super) name: String,
    /// The ListenerSet that holds it; None for one of the Gateway's own listeners.
    pub(super) origin: Option<ObjKey>,
    /// Its protocol as written (`HTTP`, `HTTPS`, `TLS`, `TCP`): what listeners sharing a port
    /// are compared by ([`super::listenerset`]).
    pub(super) protocol: String,
    pub(super) port: i32,
    pub(super) hostname: Option<String>,
    /// The TLS Secret's id (`namespace/name`) of an HTTPS listener; None for HTTP.
    pub(super) tls: Option<String>,
    /// Which namespaces' routes it takes.
    pub(super) from: Namespaces,
    /// Which route kinds it takes (of [`ROUTE_KINDS`], of [`TCP_ROUTE_KINDS`] for a TCP
    /// listener, of [`TLS_ROUTE_KINDS`] for a TLS listener).
    pub(super) kinds: Vec<Kind>,
    /// Routes attached to it.
    pub(super) attached: u32,
    /// A `TCP` listener: Envoy listens on its port and forwards every connection to the
    /// backends of the one TCPRoute attached to it.
    pub(super) tcp: bool,
    /// The TCPRoute attached to a TCP listener (the oldest that asked).
    pub(super) tcp_route: Option<ObjectRef>,
    /// Whether Envoy serves it: false for a listener whose certificate does not resolve, which
    /// routes still attach to (and are counted on) while it serves nothing.
    pub(super) programmed: bool,
    /// An HTTPS listener's client certificate validation (its port's, of `spec.tls.frontend`).
    pub(super) client_validation: Option<ClientValidation>,
}

pub(super) enum Namespaces {
    Same,
    All,
    /// Namespaces whose labels the selector matches.
    Selector(LabelSelector),
}

impl Namespaces {
    /// Whether a listener of a Gateway in `gateway` takes routes of namespace `route`.
    /// Every namespace carries the label `kubernetes.io/metadata.name` with its name, as the
    /// apiserver sets it, also one the snapshot holds no Namespace object of (a manifest
    /// directory often has none).
    pub(super) fn allow(&self, snapshot: &Snapshot, gateway: &str, route: &str) -> bool {
        match self {
            Namespaces::Same => gateway == route,
            Namespaces::All => true,
            Namespaces::Selector(s) => {
                let namespace = snapshot.namespaces.get(&ObjKey::new("", route));
                s.matches(|k| match k {
                    NAMESPACE_NAME_LABEL => Some(route),
                    _ => namespace?.labels.get(k).map(String::as_str),
                })
            }
        }
    }
}

/// The label the apiserver gives every namespace, its name as its value.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The objects by creationTimestamp (missing: newest), then namespace and name.
pub(super) fn oldest_first<T>(
    objects: &crate::store::Objects<T>,
    meta: impl Fn(&T) -> &ObjectMeta,
) -> Vec<(&ObjKey, &T)> {
    let mut all: Vec<(&ObjKey, &T)> = objects.iter().map(|(k, o)| (k, &**o)).collect();
    all.sort_by(|(ka, a), (kb, b)| {
        let ta = meta(a).creation_timestamp.as_ref();
        let tb = meta(b).creation_timestamp.as_ref();
        (ta.is_none(), ta, ka).cmp(&(tb.is_none(), tb, kb))
    });
    all
}

/// Whether a ReferenceGrant in `to_ns` lets objects of `from_kind` in `from_ns` refer to the
/// object `name` of `to_kind` (core group).
pub(super) fn granted(
    snapshot: &Snapshot,
    from_kind: &str,
    from_ns: &str,
    to_kind: &str,
    to_ns: &str,
    name: &str,
) -> bool {
    snapshot
        .reference_grants
        .iter()
        .filter(|(k, _)| &*k.namespace == to_ns)
        .any(|(_, g)| {
            g.spec
                .from
                .iter()
                .any(|f| f.group == GROUP && f.kind == from_kind && f.namespace == from_ns)
                && g.spec.to.iter().any(|t| {
                    t.group.is_empty()
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|n| n == name)
                })
        })
}
