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
//! HTTPRoutes are [`super::httproute`]'s. The rules are written down in `docs/gateway-api.md`.
//! Statuses are the Gateway API's own ([`GatewayApiStatus`]); the status writer adds timestamps
//! and generations.
//!
//! This module runs the processor: it calls every other part (ListenerSets, frontend and
//! backend TLS, the Gateways' addresses, each route kind) in turn, and none of them calls it.
//! What they share sits below them all: the constants, conditions, listeners and grant checks
//! in [`super::gateway_common`], the Gateways' working state in [`super::gateway_acc`], the
//! working out of one listener in [`super::gateway_listeners`].

use std::collections::{BTreeMap, BTreeSet};

use gateway_api::apis::experimental::gateways::Gateway;
use gateway_api::apis::standard::gatewayclasses::GatewayClass;

use super::Builder;
use super::gateway_acc::{GatewayAcc, Served};
use super::gateway_common::{condition, oldest_first};
use super::gateway_listeners::{http_hostnames, listener};
use super::gwroute::{Connections, RouteIn, attach_route, connection_route};
use super::model::{GatewayApiStatus, GatewayCondition};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;
use crate::validate::gateway::validate_gateway;

// For other crates (the modules of `dag` import these from where they are defined): what the
// webhook refuses, the Gateway API's constants and the features sluice serves.
pub use super::features::{OWN_ADDRESS_FEATURES, SUPPORTED_FEATURES, supported_features};
pub use super::gateway_common::{
    GATEWAY_MIN_TLS, GROUP, ROUTE_KINDS, TCP_ROUTE_KINDS, TLS_ROUTE_KINDS, cond,
};
pub use super::gateway_listeners::{unsupported, unsupported_in_listener_set};

// The Gateways' statuses once the routes have attached.
#[path = "gateway_status.rs"]
mod status;

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
    b.backend_tls = Some(super::backend_tls_state::BackendTlsPolicies::new(
        b, snapshot,
    ));
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
