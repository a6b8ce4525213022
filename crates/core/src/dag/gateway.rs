//! Gateway API processor (`gateway.networking.k8s.io/v1`): GatewayClasses of sluice's controller,
//! their Gateways' HTTP and HTTPS listeners, and the HTTPRoutes attached to them.
//!
//! - A GatewayClass is sluice's when its `controllerName` is [`super::Options`]'s
//!   `gateway_controller_name`; others are left to their controller (state `ignored`).
//! - A Gateway of such a class is served on sluice's listeners: its `HTTP` listeners on sluice's
//!   plain HTTP listener, its `HTTPS` listeners (TLS `Terminate`, one certificate) on sluice's
//!   HTTPS listener, whatever port numbers they name (the Gateway's Service maps its ports to
//!   sluice's). Its `TLS` listeners are served on sluice's HTTPS listener too, passing
//!   connections through by SNI to TLSRoutes' backends (mode `Passthrough`) or terminating TLS
//!   and forwarding the stream to them (mode `Terminate`; [`super::tlsroute`]). Its
//!   `TCP` listeners are ports Envoy listens on, each forwarding its connections to one
//!   TCPRoute's backends ([`super::tcproute`]). Other protocols are not accepted.
//! - An HTTPRoute's parent that is one of those Gateways attaches the route to the listeners it
//!   selects (`sectionName`, `port`) that allow it (`allowedRoutes`) and share a hostname with it.
//!   Its rules become routes on every such hostname. An HTTPRoute using what sluice does not
//!   route yet (filters, query parameter matches, regular expression paths) is not accepted, and
//!   its status names the field: no rule is served in part.
//!
//! HTTPRoutes are [`super::httproute`]'s. The rules are written down in `docs/gateway-api.md`. Statuses are the Gateway API's own
//! ([`GatewayApiStatus`]); the status writer adds timestamps and generations.

use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Builder;
use super::addresses::NoAddress;
use super::frontend_tls::Frontend;
use super::gwroute::{Connections, RouteIn, attach_route, connection_route};
use super::model::{
    ClientValidation, EntryKey, GatewayApiStatus, GatewayCondition, ListenerStatus,
};
use crate::api::{Kind, ObjKey, ObjectRef, TlsVersion};
use crate::store::Snapshot;
use crate::validate::gateway::validate_gateway;
use crate::validate::label_selector::LabelSelector;

// Listeners: how sluice serves each, what it takes, its status; what sluice does not serve.
#[path = "gateway_listeners.rs"]
mod listeners;
pub(super) use listeners::{http_hostnames, listener, not_accepted};
pub use listeners::{unsupported, unsupported_in_listener_set};
// The Gateways' statuses once the routes have attached.
#[path = "gateway_status.rs"]
mod status;

/// The API group of the Gateway API.
pub const GROUP: &str = "gateway.networking.k8s.io";
/// The route kinds sluice attaches to HTTP and HTTPS listeners.
pub const ROUTE_KINDS: [&str; 2] = ["HTTPRoute", "GRPCRoute"];
/// The route kinds sluice attaches to TCP listeners.
pub const TCP_ROUTE_KINDS: [&str; 1] = ["TCPRoute"];
/// The route kinds sluice attaches to TLS (passthrough) listeners.
pub const TLS_ROUTE_KINDS: [&str; 1] = ["TLSRoute"];
pub use super::features::{OWN_ADDRESS_FEATURES, SUPPORTED_FEATURES, supported_features};

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
    /// Which route kinds it takes (of [`ROUTE_KINDS`], or of [`TCP_ROUTE_KINDS`] for a TCP
    /// listener).
    pub(super) kinds: Vec<&'static str>,
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

/// One of sluice's Gateways, as the routes see it.
pub(super) struct GatewayAcc {
    pub(super) obj: ObjectRef,
    pub(super) generation: Option<i64>,
    /// Its listeners in order, None for those not accepted (their status is in `listener_status`):
    /// the Gateway's own (the first `own_listeners`), then those of each ListenerSet attached to
    /// it (oldest first, [`super::listenerset`]).
    pub(super) listeners: Vec<Option<Listener>>,
    pub(super) listener_status: Vec<ListenerStatus>,
    /// How many of `listeners` are the Gateway's own.
    pub(super) own_listeners: usize,
    /// Which namespaces' ListenerSets it takes (`spec.allowedListeners`); None: none.
    pub(super) allowed_listeners: Option<Namespaces>,
    /// Every ListenerSet of sluice's naming this Gateway as its parent, attached or not.
    pub(super) listener_sets: BTreeMap<ObjKey, super::listenerset::SetAcc>,
    /// The Gateway's own problems (None: accepted).
    pub(super) invalid: Option<String>,
    /// The reason of `invalid`'s `Accepted=False`: `Invalid`, or `InvalidParameters` for a
    /// `spec.infrastructure.parametersRef`.
    pub(super) invalid_reason: &'static str,
    /// The port and hostname of each accepted listener that takes HTTP routes, as listener
    /// isolation reads them ([`super::gwroute::taken_by_narrower_listener`]).
    pub(super) http_hostnames: Vec<(i32, Option<String>)>,
    /// Where the Gateway is served: its own address (`--gateway-addresses`), why it has none, or
    /// on Envoy's shared listeners.
    pub(super) served: Served,
    /// The client certificate Envoy presents to TLS backends (`spec.tls.backend`): the
    /// Gateway's `ResolvedRefs` condition and, when it resolves, its key among the secrets.
    /// None when the Gateway names none.
    pub(super) backend_client: Option<(GatewayCondition, Option<String>)>,
    /// `InsecureFrontendValidationMode=True` while `spec.tls.frontend` lets clients without a
    /// valid certificate in ([`super::frontend_tls`]).
    pub(super) insecure_frontend: Option<GatewayCondition>,
    /// `spec.tls.frontend`, resolved: the client certificate validation of its ports, which
    /// the HTTPS listeners of its ListenerSets on those ports get too.
    pub(super) frontend: Frontend,
}

/// Where a Gateway's listeners are served.
pub(super) enum Served {
    /// On Envoy's shared listeners (no `--gateway-addresses`).
    Shared,
    /// At an address of its own, Envoy listening on each listener's port there.
    At(std::net::IpAddr),
    /// Nowhere: it has no address ([`NoAddress`] says why).
    Nowhere(NoAddress),
}

impl GatewayAcc {
    /// Where routes attached to a listener of this Gateway on `port` are served: None when
    /// nowhere (the Gateway has no address), Some(None) on Envoy's shared listeners, else at
    /// that port of the Gateway's address.
    pub(super) fn scope(&self, port: i32) -> Option<Option<EntryKey>> {
        match &self.served {
            Served::Shared => Some(None),
            Served::At(_) => Some(Some(EntryKey {
                gateway: self.obj.key.clone(),
                port: u16::try_from(port).ok()?,
            })),
            Served::Nowhere(_) => None,
        }
    }
}

/// Builds the GatewayClasses, Gateways and HTTPRoutes of sluice's controller.
pub fn build_gateway_api(b: &mut Builder<'_>) {
    let snapshot = b.snapshot;
    if snapshot.gateway_classes.is_empty() || !b.builds_gateway_api() {
        return;
    }
    let controller = b.options.gateway_controller_name.clone();
    let classes = gateway_classes(b, snapshot, &controller);
    if classes.is_empty() {
        return;
    }
    b.backend_tls = Some(super::backend_tls::BackendTlsPolicies::new(b, snapshot));
    let mut gateways = sluices_gateways(b, snapshot, &classes);
    super::listenerset::attach_listener_sets(b, snapshot, &mut gateways);
    match b.options.gateway_addresses.clone() {
        Some(pool) => {
            super::gateway_addresses::own_addresses(snapshot, &pool, &mut gateways);
            super::gateway_addresses::open_entries(b, &gateways);
        }
        None => super::gateway_addresses::tcp_ports(snapshot, &mut gateways),
    }
    attach_routes(b, snapshot, &mut gateways, &controller);
    if let Some(policies) = b.backend_tls.take() {
        policies.finish(b, &controller);
    }
    for (_, gw) in gateways {
        status::finish_gateway(b, gw);
    }
}

/// Works out every GatewayClass: sluice's (its `controllerName` is `controller`) are accepted
/// unless they name parameters, others are ignored. The names of sluice's.
fn gateway_classes(b: &mut Builder<'_>, snapshot: &Snapshot, controller: &str) -> BTreeSet<String> {
    let mut classes = BTreeSet::new();
    for (key, class) in &snapshot.gateway_classes {
        let obj = ObjectRef {
            kind: Kind::GatewayClass,
            key: key.clone(),
        };
        // Tracked also when not sluice's: see `sluices_parents`.
        b.track_generation_of(&obj, class.metadata.generation);
        if class.spec.controller_name != controller {
            b.set_ignored(
                &obj,
                format!(
                    "controllerName {:?} is not {controller:?}",
                    class.spec.controller_name
                ),
            );
            continue;
        }
        classes.insert(key.name.to_string());
        let accepted = class_accepted(class);
        if accepted.status {
            b.set_valid(&obj, "accepted GatewayClass");
        } else {
            b.set_invalid(
                &obj,
                crate::api::status::reason::INVALID_SPEC,
                accepted.message.clone(),
            );
        }
        let supported_features = match accepted.status {
            true => supported_features(b.options),
            false => Vec::new(),
        };
        b.set_gateway_status(
            &obj,
            GatewayApiStatus {
                conditions: vec![accepted],
                supported_features,
                ..Default::default()
            },
        );
    }
    classes
}

/// The `Accepted` condition of one of sluice's GatewayClasses: false when it names parameters,
/// which sluice takes none of.
fn class_accepted(class: &GatewayClass) -> GatewayCondition {
    match &class.spec.parameters_ref {
        Some(p) => condition(
            cond::ACCEPTED,
            false,
            cond::INVALID_PARAMETERS,
            format!(
                "spec.parametersRef: sluice takes no parameters ({} {:?}); remove it",
                p.kind, p.name
            ),
        ),
        None => condition(
            cond::ACCEPTED,
            true,
            cond::ACCEPTED,
            "sluice serves this class",
        ),
    }
}

/// The Gateways of sluice's `classes`, each worked out ([`gateway`]); the others are ignored.
fn sluices_gateways(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    classes: &BTreeSet<String>,
) -> BTreeMap<ObjKey, GatewayAcc> {
    let mut gateways = BTreeMap::new();
    for (key, gw) in &snapshot.gateways {
        let obj = ObjectRef {
            kind: Kind::Gateway,
            key: key.clone(),
        };
        if !classes.contains(&gw.spec.gateway_class_name) {
            b.track_generation_of(&obj, gw.metadata.generation);
            b.set_ignored(
                &obj,
                format!(
                    "GatewayClass {:?} is not one of sluice's",
                    gw.spec.gateway_class_name
                ),
            );
            continue;
        }
        gateways.insert(key.clone(), gateway(b, snapshot, obj, gw));
    }
    gateways
}

/// Attaches every route to the `gateways`, each kind oldest first: the oldest route keeps a
/// match two routes define on one host. HTTPRoutes, then GRPCRoutes (whose paths are their
/// methods'), TCPRoutes, and TLSRoutes (a passthrough host being the oldest TLSRoute's that
/// asked for it).
fn attach_routes(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
) {
    let mut attach = |key, ready| {
        let r = RouteIn { key, ready };
        attach_route(b, snapshot, gateways, controller, r);
    };
    for (key, route) in oldest_first(&snapshot.http_routes, |r| &r.metadata) {
        attach(key, route.ready());
    }
    for (key, route) in oldest_first(&snapshot.grpc_routes, |r| &r.metadata) {
        attach(key, route.ready());
    }
    for (key, route) in oldest_first(&snapshot.tcp_routes, |r| &r.metadata) {
        let r = RouteIn {
            key,
            ready: route.ready(),
        };
        connection_route(b, snapshot, gateways, controller, r, Connections::Tcp);
    }
    let mut passthrough = BTreeMap::new();
    for (key, route) in oldest_first(&snapshot.tls_routes, |r| &r.metadata) {
        let r = RouteIn {
            key,
            ready: route.ready(),
        };
        let mode = Connections::Tls {
            passthrough: &mut passthrough,
        };
        connection_route(b, snapshot, gateways, controller, r, mode);
    }
}

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

/// Works out one Gateway of sluice's class: its listeners and their certificates.
fn gateway(b: &mut Builder<'_>, snapshot: &Snapshot, obj: ObjectRef, gw: &Gateway) -> GatewayAcc {
    let ns = obj.key.namespace.to_string();
    let obj_key = obj.key.clone();
    let verdict = validate_gateway(gw);
    let mut invalid = (!verdict.errors.is_empty()).then(|| {
        let all: Vec<String> = verdict.errors.iter().map(ToString::to_string).collect();
        all.join("; ")
    });
    let mut invalid_reason = cond::INVALID;
    let parameters = (gw.spec.infrastructure.as_ref()).and_then(|i| i.parameters_ref.as_ref());
    if let (None, Some(p)) = (&invalid, parameters) {
        invalid = Some(format!(
            "spec.infrastructure.parametersRef: sluice takes no parameters ({} {:?} of group {:?}); remove it",
            p.kind, p.name, p.group
        ));
        invalid_reason = cond::INVALID_PARAMETERS;
    }
    let frontend = super::frontend_tls::frontend_validation(b, snapshot, &obj_key, gw);
    let mut listeners = Vec::new();
    let mut listener_status = Vec::new();
    for (i, l) in gw.spec.listeners.iter().enumerate() {
        let (listener, status) = listener(b, snapshot, ("Gateway", &ns), i, l, &frontend);
        listeners.push(if invalid.is_some() { None } else { listener });
        listener_status.push(status);
    }
    let http_hostnames = http_hostnames(&listeners);
    let allowed_listeners = super::listenerset::allowed_listeners(gw);
    GatewayAcc {
        obj,
        generation: gw.metadata.generation,
        own_listeners: listeners.len(),
        listeners,
        listener_status,
        allowed_listeners,
        listener_sets: BTreeMap::new(),
        invalid,
        invalid_reason,
        http_hostnames,
        served: Served::Shared,
        backend_client: super::backend_tls::gateway_client_certificate(b, snapshot, &obj_key, gw),
        insecure_frontend: frontend.insecure_condition(),
        frontend,
    }
}
