//! HTTPRoutes and GRPCRoutes attached to the HTTP and HTTPS listeners of sluice's Gateways: the
//! hosts each parent's listeners serve the route on, its rules as routes on every one of them,
//! and its statuses.

use std::collections::BTreeMap;

use super::super::Builder;
use super::super::gateway_acc::GatewayAcc;
use super::super::gateway_common::{
    GATEWAY_MIN_TLS, Listener, attached_to_gateway, cond, condition, refs_resolved,
};
use super::super::model::{EntryKey, GatewayCondition, Route, RouteAction, RouteExtras, VhostTls};
use super::backends::{BuiltRule, build_rule};
use super::hosts::{listener_route_hosts, taken_by_narrower_listener};
use super::shape::{ParentIn, RuleMatch};
use super::{
    RouteIn, Tally, describe, record_status, route_backend_tls, settle_accepted, sluices_parents,
};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Snapshot;

/// How a route serves one host: the TLS Secret id (HTTPS listeners), whether over plain HTTP,
/// whether a listener's hostname takes it ([`super::super::model::VirtualHost::isolated`] for a
/// wildcard).
#[derive(Default)]
struct HostAttachment {
    tls: Option<String>,
    insecure: bool,
    isolated: bool,
}

/// The hosts a route attaches to through every parent: (where it is served, host) → how.
type Attachment = BTreeMap<(Option<EntryKey>, String), HostAttachment>;

/// How the listeners one parent selects served the route.
#[derive(Default)]
struct ParentHosts {
    /// Listeners that serve some host of the route.
    hosted: u32,
    /// An HTTPS listener of Envoy's shared listener would have served the catch-all host only.
    https_without_host: bool,
    /// Listeners whose hosts for the route all belong to more specific listeners.
    narrowed: bool,
}

/// Attaches a route (`r`) to the listeners of sluice's Gateways it names and adds the routes of
/// its rules to every hostname it serves there (only when it serves any); records its status.
pub(in crate::dag) fn attach_route(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    gateways: &mut BTreeMap<ObjKey, GatewayAcc>,
    controller: &str,
    r: RouteIn<'_>,
) {
    let head = r.ready.shape.head();
    let obj = r.obj();
    let Some(parents) = sluices_parents(b, &obj, &head.parents, head.generation, gateways) else {
        return;
    };
    let refused = (!r.ready.refused.is_empty()).then(|| r.ready.refused.join("; "));
    let mut attachment = Attachment::default();
    let mut statuses = Vec::new();
    for (i, p, gw_key) in &parents {
        let Some(gw) = gateways.get_mut(gw_key) else {
            continue;
        };
        let at = (b.snapshot, *p, gw_key, (r.kind(), r.key));
        let hosts = attach_parent(at, gw, head.hostnames, refused.is_some(), &mut attachment);
        let field = format!("spec.parentRefs[{i}]");
        let accepted = match &refused {
            Some(why) => condition(cond::ACCEPTED, false, cond::UNSUPPORTED_VALUE, why.clone()),
            None => parent_accepted(&field, gw_key, &r, hosts),
        };
        statuses.push((*p, accepted));
    }

    // The rules' references are resolved (for ResolvedRefs) even where the route serves no
    // host: its listener's certificate may not resolve, say.
    let mut resolved = refs_resolved();
    b.route_backend = route_backend_tls(gateways, &parents);
    let built: Vec<BuiltRule> = match refused {
        None => (r.ready.shape.rules().into_iter().enumerate())
            .map(|(i, rule)| build_rule(b, snapshot, r.from(), i, rule, &mut resolved))
            .collect(),
        Some(_) => Vec::new(),
    };
    b.route_backend = Default::default();
    let (host_conflicts, route_conflicts) = serve_hosts(b, &obj, &attachment, &built);
    let all_hosts_taken = !attachment.is_empty() && host_conflicts.len() == attachment.len();
    let notes: Vec<&str> = (host_conflicts.iter().chain(&route_conflicts))
        .map(String::as_str)
        .collect();
    let taken = all_hosts_taken.then(|| host_conflicts.join("; "));
    settle_accepted(&mut statuses, taken, "routed", &notes);
    let route_ns = &r.key.namespace;
    record_status(
        b,
        &obj,
        controller,
        route_ns,
        statuses,
        resolved,
        route_conflicts,
    );
}

/// Where one parent attaches a route: the snapshot, the parentRef, its Gateway's key, and the
/// route's kind and key.
type At<'a> = (
    &'a Snapshot,
    &'a ParentIn<'a>,
    &'a ObjKey,
    (Kind, &'a ObjKey),
);

/// A parent's listeners (of Gateway `gw`) the route attaches to, counted on them, and the hosts
/// it serves through each, added to `attachment` (none for a route `refused`).
fn attach_parent(
    (snapshot, p, gw_key, (kind, key)): At<'_>,
    gw: &mut GatewayAcc,
    hostnames: &[String],
    refused: bool,
    attachment: &mut Attachment,
) -> (Tally, ParentHosts) {
    let mut tally = Tally::default();
    let mut out = ParentHosts::default();
    let isolation = &gw.http_hostnames;
    let scopes: Vec<Option<Option<EntryKey>>> = (gw.listeners.iter())
        .map(|l| l.as_ref().and_then(|l| gw.scope(l.port)))
        .collect();
    for (l, scope) in gw.listeners.iter_mut().zip(scopes) {
        let Some(l) = l else { continue };
        if !tally.takes(snapshot, p, gw_key, l, key, kind) {
            continue;
        }
        let hosts = listener_hosts(l, &scope, isolation, hostnames, &mut out);
        if hosts.is_empty() {
            continue;
        }
        out.hosted += 1;
        if refused {
            continue;
        }
        l.attached += 1;
        // A Gateway without an address, or a listener whose certificate does not resolve,
        // serves its routes nowhere (their statuses say why).
        let Some(scope) = scope.filter(|_| l.programmed) else {
            continue;
        };
        for h in hosts {
            let e = attachment.entry((scope.clone(), h)).or_default();
            e.isolated |= l.hostname.is_some();
            match &l.tls {
                Some(secret) => {
                    e.tls.get_or_insert_with(|| secret.clone());
                }
                None => e.insecure = true,
            }
        }
    }
    (tally, out)
}

/// The hosts of the route (`hostnames`) listener `l` (served in `scope`) serves: where their
/// hostnames meet, less what a more specific listener takes (`isolation`) and, on Envoy's shared
/// HTTPS listener, the catch-all; what was left out is noted in `out`.
fn listener_hosts(
    l: &Listener,
    scope: &Option<Option<EntryKey>>,
    isolation: &[(i32, Option<String>)],
    hostnames: &[String],
    out: &mut ParentHosts,
) -> Vec<String> {
    let mut hosts = listener_route_hosts(l.hostname.as_deref(), hostnames);
    let this = (l.port, l.hostname.as_deref());
    let before = hosts.len();
    hosts.retain(|h| !taken_by_narrower_listener(isolation, this, h));
    out.narrowed |= before > 0 && hosts.is_empty();
    let shared = matches!(scope, Some(None));
    if shared && l.tls.is_some() && hosts.iter().any(|h| h == "*") {
        // On Envoy's shared HTTPS listener TLS is chosen by the SNI host name: every host of an
        // HTTPS listener is named. A Gateway's own TLS port has a default filter chain, which
        // serves the catch-all host.
        hosts.retain(|h| h != "*");
        out.https_without_host = true;
    }
    hosts
}

/// The `Accepted` condition of a parent (`field`, of Gateway `gw_key`) of a route that is not
/// refused, from how its listeners met the route.
fn parent_accepted(
    field: &str,
    gw_key: &ObjKey,
    r: &RouteIn<'_>,
    (tally, hosts): (Tally, ParentHosts),
) -> GatewayCondition {
    let no_host = |message: String| {
        condition(
            cond::ACCEPTED,
            false,
            cond::NO_MATCHING_LISTENER_HOSTNAME,
            message,
        )
    };
    if let Some(no) = tally.refusal(field, gw_key, &r.key.namespace, r.kind()) {
        no
    } else if hosts.hosted == 0 && hosts.https_without_host {
        no_host(format!(
            "{field}: an HTTPS listener of Gateway {gw_key} serves named hosts only; set spec.hostnames or the listener's hostname"
        ))
    } else if hosts.hosted == 0 && hosts.narrowed {
        no_host(format!(
            "{field}: the hostnames this route shares with the listeners it names belong to more specific listeners of Gateway {gw_key}, which alone route their requests; attach the route to those"
        ))
    } else if hosts.hosted == 0 {
        no_host(format!(
            "{field}: no hostname of this route matches a listener hostname of Gateway {gw_key}"
        ))
    } else {
        attached_to_gateway()
    }
}

/// Serves the built rules of route `obj` on every host of `attachment`, unless another object
/// owns it: the host's TLS Secret, its routes. Returns the hosts other objects own and the
/// conflicts on the others (a TLS Secret, a match another route defined first).
fn serve_hosts(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    attachment: &Attachment,
    built: &[BuiltRule<'_>],
) -> (Vec<String>, Vec<String>) {
    let mut host_conflicts = Vec::new();
    let mut route_conflicts = Vec::new();
    for ((scope, host), how) in attachment {
        let scope = scope.as_ref();
        if let Some(owner) = b.host_owner_in(scope, host) {
            host_conflicts.push(format!("{host:?} is owned by {owner}"));
            continue;
        }
        if how.isolated && host.starts_with("*.") {
            b.vhost_in(scope, host).isolated = true;
        }
        if let Some(secret) = &how.tls {
            let v = b.vhost_in(scope, host);
            match &v.tls {
                Some(t) if t.secret != *secret => {
                    route_conflicts.push(format!(
                        "host {host:?} already uses TLS Secret {:?}; the listener's Secret {secret:?} is not used",
                        t.secret
                    ));
                }
                Some(_) => {}
                None => {
                    v.tls = Some(VhostTls {
                        secret: secret.clone(),
                        min_version: GATEWAY_MIN_TLS,
                    })
                }
            }
        }
        for rule in built {
            add_rule(b, obj, (scope, host), how, rule, &mut route_conflicts);
        }
    }
    (host_conflicts, route_conflicts)
}

/// Adds a route of `rule` for each of its matches on `host` (in `scope`), served as `how` says;
/// a match another route defined first is noted in `conflicts`.
fn add_rule(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    (scope, host): (Option<&EntryKey>, &str),
    how: &HostAttachment,
    rule: &BuiltRule<'_>,
    conflicts: &mut Vec<String>,
) {
    let action = listener_port_redirect(&rule.action, scope, how.tls.is_some());
    let f = &rule.filters;
    for m in rule.matches {
        let r = Route {
            path: m.path.clone(),
            headers: m.headers.clone(),
            action: action.clone(),
            permit_insecure: how.insecure,
            timeout: f.timeout,
            retry: f.retry.clone(),
            extras: RouteExtras {
                query: m.query.clone(),
                headers_edit: f.edits.clone(),
                rewrite: f.rewrite.clone(),
                mirrors: rule.mirrors.clone(),
                cors: f.cors.clone(),
                backend_edits: rule.backend_edits.clone(),
            }
            .boxed(),
            source: obj.clone(),
        };
        if let Err(conflict) = b.add_route_in(scope, host, r)
            && conflict.0 != *obj
        {
            conflicts.push(conflict_note(m, host, &conflict.0));
        }
    }
}

/// A match on `host` another route (`owner`) defined first, as a status message names it.
fn conflict_note(m: &RuleMatch, host: &str, owner: &ObjectRef) -> String {
    format!(
        "{} on host {host:?} is already defined by {owner}",
        describe(m)
    )
}

/// A redirect naming neither scheme nor port keeps the port of the listener the request came in
/// on, as the Gateway API says: at a Gateway's own address that is the port Envoy listens on
/// (written when it is not the scheme's own port, which a URL leaves out). On Envoy's shared
/// listeners the port the client used is not known, and the redirect names none.
fn listener_port_redirect(
    action: &RouteAction,
    scope: Option<&EntryKey>,
    tls: bool,
) -> RouteAction {
    match (action, scope) {
        (RouteAction::Redirect(r), Some(key)) if r.scheme.is_none() && r.port.is_none() => {
            let default = if tls { 443 } else { 80 };
            if key.port == default {
                return action.clone();
            }
            let mut r = r.clone();
            r.port = Some(u32::from(key.port));
            RouteAction::Redirect(r)
        }
        _ => action.clone(),
    }
}
