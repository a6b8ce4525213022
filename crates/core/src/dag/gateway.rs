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

use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Builder;
use super::addresses::NoAddress;
use super::frontend_tls::{ForListener, Frontend};
use super::model::{
    ClientValidation, EntryKey, GatewayApiStatus, GatewayCondition, ListenerStatus,
};
use crate::api::{Kind, ObjKey, ObjectRef, TlsVersion};
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::gateway::validate_gateway;
use crate::validate::label_selector::{LabelSelector, listener_selector};

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
        let accepted = match &class.spec.parameters_ref {
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
        };
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
    if classes.is_empty() {
        return;
    }

    b.backend_tls = Some(super::backend_tls::BackendTlsPolicies::new(b, snapshot));
    let mut gateways: BTreeMap<ObjKey, GatewayAcc> = BTreeMap::new();
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
    super::listenerset::attach_listener_sets(b, snapshot, &mut gateways);
    match b.options.gateway_addresses.clone() {
        Some(pool) => {
            super::gateway_addresses::own_addresses(snapshot, &pool, &mut gateways);
            super::gateway_addresses::open_entries(b, &gateways);
        }
        None => super::gateway_addresses::tcp_ports(snapshot, &mut gateways),
    }

    // Routes oldest first: the oldest route keeps a match two routes define on one host.
    // HTTPRoutes, then GRPCRoutes (whose paths are their methods').
    for (key, route) in oldest_first(&snapshot.http_routes, |r| &r.metadata) {
        super::httproute::http_route(b, snapshot, &mut gateways, &controller, key, route);
    }
    for (key, route) in oldest_first(&snapshot.grpc_routes, |r| &r.metadata) {
        super::grpcroute::grpc_route(b, snapshot, &mut gateways, &controller, key, route);
    }
    for (key, route) in oldest_first(&snapshot.tcp_routes, |r| &r.metadata) {
        super::tcproute::tcp_route(b, snapshot, &mut gateways, &controller, key, route);
    }
    // TLS passthrough hosts, each the oldest TLSRoute's that asked for it.
    let mut passthrough = BTreeMap::new();
    for (key, route) in oldest_first(&snapshot.tls_routes, |r| &r.metadata) {
        let gateways = &mut gateways;
        super::tlsroute::tls_route(
            b,
            snapshot,
            gateways,
            &controller,
            key,
            route,
            &mut passthrough,
        );
    }

    if let Some(policies) = b.backend_tls.take() {
        policies.finish(b, &controller);
    }

    for (_, mut gw) in gateways {
        for (l, status) in gw.listeners.iter().zip(&mut gw.listener_status) {
            if let Some(l) = l {
                status.attached_routes = l.attached;
            }
            // No listener of a Gateway that is not accepted is programmed.
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
        // The ListenerSets' statuses, from their listeners'; their listeners leave the Gateway's.
        let sets = super::listenerset::set_statuses(b, &mut gw);
        // Every listener accepted, programmed and resolved.
        let listener_ok = |s: &ListenerStatus| s.conditions.iter().all(|c| c.status);
        let listeners_ok = gw.listener_status.iter().all(listener_ok);
        let no_address = match &gw.served {
            Served::Nowhere(why) => Some(why),
            _ => None,
        };
        let mut conditions = match (&gw.invalid, no_address) {
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
            (invalid, _) => match invalid {
                Some(why) => vec![
                    condition(cond::ACCEPTED, false, gw.invalid_reason, why.clone()),
                    condition(cond::PROGRAMMED, false, cond::INVALID, why.clone()),
                ],
                None if listeners_ok => vec![
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
                None => {
                    let bad: Vec<&str> = (gw.listener_status.iter())
                        .filter(|s| !listener_ok(s))
                        .map(|s| s.name.as_str())
                        .collect();
                    let why = format!(
                        "listeners {} are not accepted, programmed or resolved (see status.listeners)",
                        bad.join(", ")
                    );
                    // Not one listener accepted: the Gateway is not either. Listeners accepted
                    // but not programmed (a certificate that does not resolve) leave it
                    // accepted and programmed with the rest, as the Gateway API asks.
                    let rejected = |s: &ListenerStatus| {
                        (s.conditions.iter()).any(|c| c.type_ == cond::ACCEPTED && !c.status)
                    };
                    if gw.listener_status.iter().all(rejected) {
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
            },
        };
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

/// The port and hostname of each accepted listener that takes HTTP routes
/// ([`GatewayAcc::http_hostnames`]).
pub(super) fn http_hostnames(listeners: &[Option<Listener>]) -> Vec<(i32, Option<String>)> {
    (listeners.iter().flatten())
        .filter(|l| l.programmed && l.kinds.iter().any(|k| ROUTE_KINDS.contains(k)))
        .map(|l| (l.port, l.hostname.clone()))
        .collect()
}

/// How sluice serves a listener, by its protocol (and TLS mode).
#[derive(Clone, Copy)]
struct Serving {
    /// TLS terminated on sluice's HTTPS listener.
    https: bool,
    /// A port of its own, TCP forwarded.
    tcp: bool,
    /// TLS passed through on sluice's HTTPS listener.
    passthrough: bool,
    /// TLS terminated on sluice's HTTPS listener, the stream inside forwarded (TLSRoutes).
    tls_terminate: bool,
}

impl Serving {
    /// The route kinds a listener so served takes.
    fn kinds(self) -> &'static [&'static str] {
        match (self.tcp, self.passthrough || self.tls_terminate) {
            (true, _) => &TCP_ROUTE_KINDS,
            (_, true) => &TLS_ROUTE_KINDS,
            _ => &ROUTE_KINDS,
        }
    }
}

/// How sluice serves listener `l` (`field` names it), or why it does not: a protocol it does not
/// serve (`UnsupportedProtocol`), a TLS mode the protocol does not take (`UnsupportedValue`).
fn serving(field: &str, l: &GatewayListeners) -> Result<Serving, FieldError> {
    let passthrough_mode = matches!(
        l.tls.as_ref().and_then(|t| t.mode.as_ref()),
        Some(GatewayListenersTlsMode::Passthrough)
    );
    let mode_error = |message: &str| {
        let path = format!("{field}.tls.mode");
        Err(FieldError::new(path, cond::UNSUPPORTED_VALUE, message))
    };
    let (https, tcp, passthrough, tls_terminate) = match l.protocol.as_str() {
        "HTTP" => (false, false, false, false),
        "HTTPS" if passthrough_mode => {
            return mode_error(
                "an HTTPS listener terminates TLS (mode Terminate); to pass connections through, use a listener of protocol TLS with TLSRoutes",
            );
        }
        "HTTPS" => (true, false, false, false),
        "TCP" => (false, true, false, false),
        "TLS" => (false, false, passthrough_mode, !passthrough_mode),
        other => {
            return Err(FieldError::new(
                format!("{field}.protocol"),
                cond::UNSUPPORTED_PROTOCOL,
                format!("sluice serves HTTP, HTTPS, TLS and TCP listeners, not {other:?}"),
            ));
        }
    };
    Ok(Serving {
        https,
        tcp,
        passthrough,
        tls_terminate,
    })
}

/// The route kinds of `offered` that `allowedRoutes.kinds` of listener `l` (`field`) allows (all
/// of them without it), or the error when it allows none (`InvalidRouteKinds`).
fn allowed_kinds(
    field: &str,
    l: &GatewayListeners,
    offered: &'static [&'static str],
) -> Result<Vec<&'static str>, FieldError> {
    let Some(kinds) = l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()) else {
        return Ok(offered.to_vec());
    };
    let allowed: Vec<&'static str> = (offered.iter().copied())
        .filter(|sluices| {
            (kinds.iter())
                .any(|k| k.group.as_deref().unwrap_or(GROUP) == GROUP && k.kind == *sluices)
        })
        .collect();
    if allowed.is_empty() {
        let asked: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
        return Err(kinds_error(field, l, offered, &asked));
    }
    Ok(allowed)
}

/// What sluice does not serve in a Gateway of its class, one error per field: a listener's
/// protocol or TLS mode, route kinds none of which its protocol takes, the mistakes of
/// `spec.tls.frontend` ([`crate::validate::frontend_tls`]). The webhook refuses these (a Gateway
/// that got in anyway has those listeners not accepted, naming the same; see the frontend
/// module for its mistakes).
pub fn unsupported(gw: &Gateway) -> Vec<FieldError> {
    let mut out = crate::validate::frontend_tls::frontend_mistakes(gw);
    for (i, l) in gw.spec.listeners.iter().enumerate() {
        out.extend(unsupported_listener(i, l));
    }
    out
}

/// What sluice does not serve in a ListenerSet attached to a Gateway of its class: as in a
/// Gateway's listeners ([`unsupported`]).
pub fn unsupported_in_listener_set(
    ls: &gateway_api::apis::experimental::listenersets::ListenerSet,
) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (i, l) in ls.spec.listeners.iter().enumerate() {
        let field = format!("spec.listeners[{i}]");
        // A listener that does not read as a Gateway's is the single-object rules' to report.
        if let Ok(l) = crate::validate::listenerset::as_gateway_listener(&field, l) {
            out.extend(unsupported_listener(i, &l));
        }
    }
    out
}

/// What sluice does not serve in listener `i`: its protocol or TLS mode, route kinds none of
/// which its protocol takes.
fn unsupported_listener(i: usize, l: &GatewayListeners) -> Option<FieldError> {
    let field = format!("spec.listeners[{i}]");
    match serving(&field, l) {
        Err(e) => Some(e),
        Ok(s) => allowed_kinds(&field, l, s.kinds()).err(),
    }
}

/// A listener not accepted for `reason` (its references are not the problem).
pub(super) fn not_accepted(
    mut status: ListenerStatus,
    reason: &'static str,
    message: String,
) -> (Option<Listener>, ListenerStatus) {
    status.conditions = vec![
        condition(cond::ACCEPTED, false, reason, message.clone()),
        condition(cond::PROGRAMMED, false, cond::INVALID, message),
        refs_resolved(),
    ];
    (None, status)
}

/// The route kinds of `offered` that `allowedRoutes.kinds` of listener `l` (`field`) allows (all
/// of them without it), and the error when it names a kind the listener does not take
/// (`InvalidRouteKinds`): the listener then takes the others.
fn route_kinds(
    field: &str,
    l: &GatewayListeners,
    offered: &'static [&'static str],
) -> (Vec<&'static str>, Option<FieldError>) {
    let Some(kinds) = l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()) else {
        return (offered.to_vec(), None);
    };
    let allowed = match allowed_kinds(field, l, offered) {
        Ok(allowed) => allowed,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let others: Vec<&str> = (kinds.iter())
        .filter(|k| {
            k.group.as_deref().unwrap_or(GROUP) != GROUP || !allowed.contains(&k.kind.as_str())
        })
        .map(|k| k.kind.as_str())
        .collect();
    let problem = (!others.is_empty()).then(|| kinds_error(field, l, offered, &others));
    (allowed, problem)
}

/// `allowedRoutes.kinds` of listener `l` (`field`) names `refused`, kinds it does not take
/// (`InvalidRouteKinds`).
fn kinds_error(
    field: &str,
    l: &GatewayListeners,
    offered: &[&str],
    refused: &[&str],
) -> FieldError {
    FieldError::new(
        format!("{field}.allowedRoutes.kinds"),
        cond::INVALID_ROUTE_KINDS,
        format!(
            "sluice attaches {} to {} listeners, not {}",
            offered.join(" and "),
            l.protocol,
            refused.join(", ")
        ),
    )
}

/// Works out listener `i` of a Gateway or ListenerSet (`owner`: the kind and namespace of the
/// object that holds it, which a certificate in another namespace must be granted to).
pub(super) fn listener(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    owner: (&str, &str),
    i: usize,
    l: &GatewayListeners,
    frontend: &Frontend,
) -> (Option<Listener>, ListenerStatus) {
    let field = format!("spec.listeners[{i}]");
    let mut status = ListenerStatus {
        name: l.name.clone(),
        supported_kinds: Vec::new(),
        attached_routes: 0,
        conditions: Vec::new(),
    };
    let how = match serving(&field, l) {
        Ok(how) => how,
        Err(e) => return not_accepted(status, e.reason, e.to_string()),
    };
    let Serving {
        https,
        tcp,
        passthrough,
        tls_terminate,
    } = how;
    let port = u16::try_from(l.port).ok().filter(|p| *p > 0);
    // Envoy listens on a TCP listener's port itself, and on every listener's port when Gateways
    // have addresses of their own.
    let own_port = tcp || b.options.gateway_addresses.is_some();
    if own_port && port.is_none_or(|p| b.options.reserved_ports.contains(&p)) {
        let message = format!(
            "{field}.port: Envoy's own listeners use port {} (Envoy listens on this listener's port itself); choose another port",
            l.port
        );
        return not_accepted(status, cond::PORT_UNAVAILABLE, message);
    }
    // Route kinds: a kind the listener does not take is a reference that does not resolve.
    let (kinds, kinds_problem) = route_kinds(&field, l, how.kinds());
    status.supported_kinds = kinds;
    let mut unresolved: Option<(&'static str, String)> =
        kinds_problem.map(|e| (e.reason, e.to_string()));
    let from = match l
        .allowed_routes
        .as_ref()
        .and_then(|a| a.namespaces.as_ref())
        .and_then(|n| n.from.as_ref())
    {
        None | Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) => Namespaces::Same,
        Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => Namespaces::All,
        Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
            let at = format!("{field}.allowedRoutes.namespaces.selector");
            let selector = (l.allowed_routes.as_ref())
                .and_then(|a| a.namespaces.as_ref())
                .and_then(|n| n.selector.as_ref());
            match listener_selector(&at, selector) {
                Ok(s) => Namespaces::Selector(s),
                Err(e) => return not_accepted(status, cond::INVALID, e.to_string()),
            }
        }
    };
    let mut tls = None;
    if https || tls_terminate {
        match certificate(b, snapshot, owner, &field, l) {
            Ok(id) => tls = Some(id),
            Err(problem) => unresolved = Some(problem),
        }
    }
    // The client certificate validation of an HTTPS listener's port.
    let mut client_validation = None;
    if https {
        let own_address = b.options.gateway_addresses.is_some();
        match frontend.for_listener(l.port, own_address) {
            ForListener::Unconfigured => {}
            ForListener::Validated(validation, problem) => {
                client_validation = Some(validation);
                if unresolved.is_none() {
                    unresolved = problem;
                }
            }
            ForListener::Refused(conditions) => {
                status.conditions = conditions;
                return (None, status);
            }
        }
    }
    // Served when its certificate (if it needs one) resolved and it takes some route kind.
    let programmed =
        !status.supported_kinds.is_empty() && (tls.is_some() || !(https || tls_terminate));
    let serving = match (https, tcp, passthrough, tls_terminate) {
        (true, ..) => "served on sluice's HTTPS listener".to_string(),
        (_, true, ..) => format!("Envoy listens on port {} for it", l.port),
        (_, _, true, _) => {
            "served on sluice's HTTPS listener, its connections passed through by SNI".to_string()
        }
        (.., true) => {
            "served on sluice's HTTPS listener, TLS terminated and each connection's stream forwarded by SNI"
                .to_string()
        }
        _ => "served on sluice's HTTP listener".to_string(),
    };
    let programmed_condition = match (&unresolved, programmed) {
        (_, true) => condition(cond::PROGRAMMED, true, cond::PROGRAMMED, serving),
        (Some((_, why)), false) => condition(cond::PROGRAMMED, false, cond::INVALID, why.clone()),
        (None, false) => condition(
            cond::PROGRAMMED,
            false,
            cond::INVALID,
            "it takes no route kind sluice attaches",
        ),
    };
    let resolved = match &unresolved {
        Some((reason, why)) => condition(cond::RESOLVED_REFS, false, reason, why.clone()),
        None => refs_resolved(),
    };
    status.conditions = vec![
        condition(cond::ACCEPTED, true, cond::ACCEPTED, "listener accepted"),
        programmed_condition,
        resolved,
    ];
    let listener = Listener {
        name: l.name.clone(),
        origin: None,
        protocol: l.protocol.clone(),
        port: l.port,
        hostname: l
            .hostname
            .as_deref()
            .filter(|h| !h.is_empty())
            .map(str::to_ascii_lowercase),
        tls,
        from,
        kinds: status.supported_kinds.clone(),
        attached: 0,
        tcp,
        tcp_route: None,
        programmed,
        client_validation,
    };
    (Some(listener), status)
}

/// The Secret id of the certificate of a listener that terminates TLS (`field` names it), or why
/// it does not resolve (the reason and message of its `ResolvedRefs=False`).
fn certificate(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    (kind, ns): (&str, &str),
    field: &str,
    l: &GatewayListeners,
) -> Result<String, (&'static str, String)> {
    let t = l.tls.as_ref();
    let refs = t.and_then(|t| t.certificate_refs.as_deref()).unwrap_or(&[]);
    let Some(cert) = refs.first() else {
        return Err((
            cond::INVALID_CERTIFICATE_REF,
            format!(
                "{field}.tls.certificateRefs: a listener that terminates TLS needs a certificate (a kubernetes.io/tls Secret)"
            ),
        ));
    };
    let cert_field = format!("{field}.tls.certificateRefs[0]");
    if !cert.group.as_deref().unwrap_or("").is_empty()
        || cert.kind.as_deref().unwrap_or("Secret") != "Secret"
    {
        return Err((
            cond::INVALID_CERTIFICATE_REF,
            format!(
                "{cert_field}: sluice reads certificates from Secrets (group \"\", kind Secret)"
            ),
        ));
    }
    let cert_ns = cert.namespace.as_deref().unwrap_or(ns);
    if cert_ns != ns && !granted(snapshot, kind, ns, "Secret", cert_ns, &cert.name) {
        return Err((
            cond::REF_NOT_PERMITTED,
            format!(
                "{cert_field}: Secret \"{cert_ns}/{}\" is in another namespace and no ReferenceGrant there lets {kind}s of {ns:?} use it",
                cert.name
            ),
        ));
    }
    b.tls_secret(cert_ns, &cert.name).map_err(|m| {
        (
            cond::INVALID_CERTIFICATE_REF,
            format!("{cert_field}: {}", m.message),
        )
    })
}
