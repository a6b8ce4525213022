//! The listeners of sluice's Gateways and ListenerSets: how sluice serves each (by protocol and
//! TLS mode), the route kinds and namespaces it takes, its certificate and client certificate
//! validation, and the conditions of its status; and what sluice does not serve in a listener,
//! which the webhook refuses ([`unsupported`]).
//!
//! Below [`super::gateway`] and [`super::listenerset`], which both work out their listeners
//! here; it imports neither.

use gateway_api::apis::experimental::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom, GatewayListenersTlsMode,
};

use super::Builder;
use super::frontend_tls::{ForListener, Frontend};
use super::gateway_common::{
    Listener, Namespaces, ROUTE_KINDS, TCP_ROUTE_KINDS, TLS_ROUTE_KINDS, cond, condition, granted,
    refs_resolved, route_kind,
};
use super::model::{ClientValidation, GatewayCondition, ListenerStatus};
use crate::api::Kind;
use crate::store::Snapshot;
use crate::validate::FieldError;
use crate::validate::label_selector::listener_selector;

/// The port and hostname of each accepted listener that takes HTTP routes
/// ([`super::gateway_acc::GatewayAcc::http_hostnames`]).
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
    /// Where a listener so served on `port` is served, as its `Programmed` condition says.
    fn description(self, port: i32) -> String {
        match (self.https, self.tcp, self.passthrough, self.tls_terminate) {
            (true, ..) => "served on sluice's HTTPS listener".to_string(),
            (_, true, ..) => format!("Envoy listens on port {port} for it"),
            (_, _, true, _) => {
                "served on sluice's HTTPS listener, its connections passed through by SNI"
                    .to_string()
            }
            (.., true) => {
                "served on sluice's HTTPS listener, TLS terminated and each connection's stream forwarded by SNI"
                    .to_string()
            }
            _ => "served on sluice's HTTP listener".to_string(),
        }
    }

    /// The route kinds a listener so served takes.
    fn kinds(self) -> &'static [Kind] {
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
    offered: &'static [Kind],
) -> Result<Vec<Kind>, FieldError> {
    let Some(kinds) = l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()) else {
        return Ok(offered.to_vec());
    };
    let allowed: Vec<Kind> = (offered.iter().copied())
        .filter(|sluices| {
            (kinds.iter()).any(|k| route_kind(k.group.as_deref(), &k.kind) == Some(*sluices))
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
    offered: &'static [Kind],
) -> (Vec<Kind>, Option<FieldError>) {
    let Some(kinds) = l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()) else {
        return (offered.to_vec(), None);
    };
    let allowed = match allowed_kinds(field, l, offered) {
        Ok(allowed) => allowed,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let others: Vec<&str> = (kinds.iter())
        .filter(|k| {
            route_kind(k.group.as_deref(), &k.kind).is_none_or(|kind| !allowed.contains(&kind))
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
    offered: &[Kind],
    refused: &[&str],
) -> FieldError {
    let offered: Vec<&str> = offered.iter().map(|k| k.kind()).collect();
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
    if let Some(message) = port_unavailable(b, &field, l, how) {
        return not_accepted(status, cond::PORT_UNAVAILABLE, message);
    }
    // Route kinds: a kind the listener does not take is a reference that does not resolve.
    let (kinds, kinds_problem) = route_kinds(&field, l, how.kinds());
    // The status names the kinds as the Gateway API writes them.
    status.supported_kinds = kinds.iter().map(|k| k.kind()).collect();
    let mut unresolved: Option<FieldError> = kinds_problem;
    let from = match route_namespaces(&field, l) {
        Ok(from) => from,
        Err(e) => return not_accepted(status, cond::INVALID, e.to_string()),
    };
    let mut tls = None;
    if how.https || how.tls_terminate {
        match certificate(b, snapshot, owner, &field, l) {
            Ok(id) => tls = Some(id),
            Err(problem) => unresolved = Some(problem),
        }
    }
    let client_validation = match client_validation(b, how, l, frontend, &mut unresolved) {
        Ok(validation) => validation,
        Err(conditions) => {
            status.conditions = conditions;
            return (None, status);
        }
    };
    // Served when its certificate (if it needs one) resolved and it takes some route kind.
    let programmed = !kinds.is_empty() && (tls.is_some() || !(how.https || how.tls_terminate));
    status.conditions = listener_conditions(how, l.port, unresolved, programmed);
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
        kinds,
        attached: 0,
        tcp: how.tcp,
        tcp_route: None,
        programmed,
        client_validation,
    };
    (Some(listener), status)
}

/// Why listener `l` (`field`) cannot have its port, when Envoy listens on it itself (a TCP
/// listener's, and every listener's when Gateways have addresses of their own) and the port is
/// not a port number or is one of Envoy's own listeners'.
fn port_unavailable(
    b: &Builder<'_>,
    field: &str,
    l: &GatewayListeners,
    how: Serving,
) -> Option<String> {
    let port = u16::try_from(l.port).ok().filter(|p| *p > 0);
    let own_port = how.tcp || b.options.gateway_addresses.is_some();
    (own_port && port.is_none_or(|p| b.options.reserved_ports.contains(&p))).then(|| {
        format!(
            "{field}.port: Envoy's own listeners use port {} (Envoy listens on this listener's port itself); choose another port",
            l.port
        )
    })
}

/// Which namespaces' routes listener `l` (`field`) takes (`allowedRoutes.namespaces`), or the
/// error of a selector that does not read.
fn route_namespaces(field: &str, l: &GatewayListeners) -> Result<Namespaces, FieldError> {
    let namespaces = (l.allowed_routes.as_ref()).and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_ref()) {
        None | Some(GatewayListenersAllowedRoutesNamespacesFrom::Same) => Ok(Namespaces::Same),
        Some(GatewayListenersAllowedRoutesNamespacesFrom::All) => Ok(Namespaces::All),
        Some(GatewayListenersAllowedRoutesNamespacesFrom::Selector) => {
            let at = format!("{field}.allowedRoutes.namespaces.selector");
            let selector = namespaces.and_then(|n| n.selector.as_ref());
            listener_selector(&at, selector).map(Namespaces::Selector)
        }
    }
}

/// The client certificate validation of an HTTPS listener's port (None for other listeners and
/// ports without one); a problem with it joins `unresolved` when that holds none yet. Err: the
/// conditions of a listener whose port's validation is refused, which is not accepted.
fn client_validation(
    b: &Builder<'_>,
    how: Serving,
    l: &GatewayListeners,
    frontend: &Frontend,
    unresolved: &mut Option<FieldError>,
) -> Result<Option<ClientValidation>, Vec<GatewayCondition>> {
    if !how.https {
        return Ok(None);
    }
    let own_address = b.options.gateway_addresses.is_some();
    match frontend.for_listener(l.port, own_address) {
        ForListener::Unconfigured => Ok(None),
        ForListener::Validated(validation, problem) => {
            if unresolved.is_none() {
                *unresolved = problem;
            }
            Ok(Some(validation))
        }
        ForListener::Refused(conditions) => Err(conditions),
    }
}

/// The conditions of an accepted listener served `how` on `port`: `Programmed` (false, naming
/// why, unless `programmed`) and `ResolvedRefs` (false with the first reference that does not
/// resolve, `unresolved`).
fn listener_conditions(
    how: Serving,
    port: i32,
    unresolved: Option<FieldError>,
    programmed: bool,
) -> Vec<GatewayCondition> {
    let programmed_condition = match (&unresolved, programmed) {
        (_, true) => condition(
            cond::PROGRAMMED,
            true,
            cond::PROGRAMMED,
            how.description(port),
        ),
        (Some(why), false) => condition(cond::PROGRAMMED, false, cond::INVALID, why.to_string()),
        (None, false) => condition(
            cond::PROGRAMMED,
            false,
            cond::INVALID,
            "it takes no route kind sluice attaches",
        ),
    };
    let resolved = match unresolved {
        Some(why) => condition(cond::RESOLVED_REFS, false, why.reason, why.to_string()),
        None => refs_resolved(),
    };
    vec![
        condition(cond::ACCEPTED, true, cond::ACCEPTED, "listener accepted"),
        programmed_condition,
        resolved,
    ]
}

/// The Secret id of the certificate of a listener that terminates TLS (`field` names it), or why
/// it does not resolve (the reason and the text of its `ResolvedRefs=False`).
fn certificate(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    (kind, ns): (&str, &str),
    field: &str,
    l: &GatewayListeners,
) -> Result<String, FieldError> {
    let t = l.tls.as_ref();
    let refs = t.and_then(|t| t.certificate_refs.as_deref()).unwrap_or(&[]);
    let Some(cert) = refs.first() else {
        return Err(FieldError::new(
            format!("{field}.tls.certificateRefs"),
            cond::INVALID_CERTIFICATE_REF,
            "a listener that terminates TLS needs a certificate (a kubernetes.io/tls Secret)",
        ));
    };
    let cert_field = format!("{field}.tls.certificateRefs[0]");
    if !cert.group.as_deref().unwrap_or("").is_empty()
        || cert.kind.as_deref().unwrap_or("Secret") != "Secret"
    {
        return Err(FieldError::new(
            cert_field,
            cond::INVALID_CERTIFICATE_REF,
            "sluice reads certificates from Secrets (group \"\", kind Secret)",
        ));
    }
    let cert_ns = cert.namespace.as_deref().unwrap_or(ns);
    if cert_ns != ns && !granted(snapshot, kind, ns, "Secret", cert_ns, &cert.name) {
        return Err(FieldError::new(
            cert_field,
            cond::REF_NOT_PERMITTED,
            format!(
                "Secret \"{cert_ns}/{}\" is in another namespace and no ReferenceGrant there lets {kind}s of {ns:?} use it",
                cert.name
            ),
        ));
    }
    (b.tls_secret(cert_ns, &cert.name))
        .map_err(|m| FieldError::new(cert_field, cond::INVALID_CERTIFICATE_REF, m.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(json: serde_json::Value) -> GatewayListeners {
        serde_json::from_value(json).expect("a listener")
    }

    #[test]
    fn a_listener_takes_its_own_namespace_unless_it_names_others() {
        let same = listener(serde_json::json!({"name": "a", "port": 80, "protocol": "HTTP"}));
        assert!(matches!(route_namespaces("l", &same), Ok(Namespaces::Same)));
        let all = listener(
            serde_json::json!({"name": "a", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}}}),
        );
        assert!(matches!(route_namespaces("l", &all), Ok(Namespaces::All)));
        let no_selector = listener(
            serde_json::json!({"name": "a", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "Selector"}}}),
        );
        let Err(e) = route_namespaces("l", &no_selector) else {
            panic!("a Selector without a selector reads")
        };
        assert!(
            e.to_string()
                .starts_with("l.allowedRoutes.namespaces.selector: "),
            "{e}"
        );
    }

    #[test]
    fn each_way_of_serving_says_where_and_takes_its_route_kinds() {
        let served = |protocol: &str, mode: Option<&str>| {
            let mut l = serde_json::json!({"name": "a", "port": 9000, "protocol": protocol});
            if let Some(mode) = mode {
                l["tls"] = serde_json::json!({"mode": mode});
            }
            serving("l", &listener(l)).map_err(|e| e.to_string())
        };
        let http = served("HTTP", None).expect("HTTP is served");
        assert_eq!(http.description(9000), "served on sluice's HTTP listener");
        assert_eq!(http.kinds(), ROUTE_KINDS);
        let tcp = served("TCP", None).expect("TCP is served");
        assert_eq!(tcp.description(9000), "Envoy listens on port 9000 for it");
        assert_eq!(tcp.kinds(), TCP_ROUTE_KINDS);
        let passthrough = served("TLS", Some("Passthrough")).expect("TLS is served");
        assert_eq!(passthrough.kinds(), TLS_ROUTE_KINDS);
        assert!(served("HTTPS", Some("Passthrough")).is_err());
        assert_eq!(
            served("UDP", None).err().as_deref(),
            Some("l.protocol: sluice serves HTTP, HTTPS, TLS and TCP listeners, not \"UDP\"")
        );
    }
}
