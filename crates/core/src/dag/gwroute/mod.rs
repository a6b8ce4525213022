//! Routes of the Gateway API (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute) attached to sluice's
//! Gateways ([`super::gateway`]). Each kind is lowered into one shape ([`shape`]: parents,
//! hostnames, rules with matches, filters and backends); over it, written once for all four:
//! which listeners a route's parents select and allow it on, the hostnames it serves there
//! ([`hosts`]), its backends ([`backends`]), and its statuses. HTTPRoutes and GRPCRoutes are
//! served on hosts of HTTP and HTTPS listeners ([`attach`]), TCPRoutes and TLSRoutes forward
//! connections ([`connection`]). What each kind's rules mean is its own file's
//! ([`super::httproute`], [`super::grpcroute`], [`super::tcproute`], [`super::tlsroute`]). The
//! rules are written down in `docs/gateway-api.md`.

mod attach;
mod backends;
mod connection;
mod hosts;
mod shape;
mod tally;

use std::collections::BTreeMap;

use super::Builder;
use super::builder::RouteBackendTls;
use super::gateway_acc::GatewayAcc;
use super::gateway_common::{GROUP, cond, condition};
use super::model::{GatewayApiStatus, GatewayCondition, ParentStatus, PathMatch};
use crate::api::{Kind, ObjKey, ObjectRef};
use crate::store::Prepare;
use crate::validate::Verdict;
use crate::validate::gateway::read_spec;

pub(super) use attach::attach_route;
pub(super) use connection::{Connections, connection_route};
pub use hosts::listener_route_hosts;
#[cfg(test)]
pub(super) use hosts::taken_by_narrower_listener;
pub use shape::RouteShape;
pub(super) use shape::{GatewayRoute, OwnRule, ParentIn, RuleFilters, RuleMatch};
use tally::Tally;

/// Why a route is refused for a filter on a backendRef other than the header modifiers.
pub(super) const BACKEND_FILTERS_ROUTED: &str = "sluice applies RequestHeaderModifier and ResponseHeaderModifier filters on a backendRef; move this one to the rule's filters";

/// Adds to `out` what sluice does not route yet at `path`: reason `UnsupportedValue`.
pub(super) fn unsupported_value(
    out: &mut Vec<crate::validate::FieldError>,
    path: String,
    message: &str,
) {
    out.push(crate::validate::FieldError::new(
        path,
        cond::UNSUPPORTED_VALUE,
        message,
    ));
}

/// A route's filters on the backendRefs of its rule `rule` (`field` names the rule) that sluice
/// does not apply, added to `out`: any but the header modifiers (HTTPRoute, GRPCRoute).
pub(super) fn unsupported_backend_filters(
    out: &mut Vec<crate::validate::FieldError>,
    field: &str,
    rule: &crate::api::gateway_route::Rule,
) {
    const APPLIED: [&str; 2] = ["RequestHeaderModifier", "ResponseHeaderModifier"];
    for (j, r) in rule.backend_refs.iter().enumerate() {
        for (k, f) in r.filters.iter().enumerate() {
            if !APPLIED.contains(&f.type_.as_str()) {
                unsupported_value(
                    out,
                    format!("{field}.backendRefs[{j}].filters[{k}].type"),
                    BACKEND_FILTERS_ROUTED,
                );
            }
        }
    }
}

/// What sluice does not route in a TCPRoute or TLSRoute (`kind`, with `rules` rules): more than
/// one rule (a connection goes to one rule's backends).
pub(super) fn one_rule(kind: Kind, rules: usize) -> Vec<crate::validate::FieldError> {
    match rules {
        0 | 1 => Vec::new(),
        n => vec![crate::validate::FieldError::new(
            "spec.rules",
            cond::UNSUPPORTED_VALUE,
            format!(
                "sluice sends a {}'s connections to the backends of one rule, and this route has {n}; put every backendRef in one rule (weights split the connections)",
                kind.kind()
            ),
        )],
    }
}

/// A route of any kind as the build attaches it: its key, its shape, and what refuses it on
/// every parent (its single-object problems and what sluice does not route yet).
pub(super) struct RouteIn<'r> {
    pub key: &'r ObjKey,
    pub ready: &'r ReadyRoute,
}

impl RouteIn<'_> {
    /// The route's kind.
    fn kind(&self) -> Kind {
        self.ready.shape.kind
    }

    /// The route as a status names it.
    fn obj(&self) -> ObjectRef {
        ObjectRef {
            kind: self.kind(),
            key: self.key.clone(),
        }
    }

    /// Where its backends are referred from: its kind and namespace.
    fn from(&self) -> (Kind, &str) {
        (self.kind(), &self.key.namespace)
    }
}

/// What a build reads of a Gateway API route besides the object, worked out when the route
/// arrives ([`crate::store::Prepared`]): the route lowered into the shape every kind shares, and
/// the single-object rules' problems or, when it has none, what it uses that sluice does not
/// route yet. All follow from the object alone.
pub struct ReadyRoute {
    pub refused: Box<[String]>,
    pub shape: RouteShape,
}

/// Every route kind is kept prepared: checked and lowered once, when it arrives.
impl<R: GatewayRoute> Prepare for R {
    type Ready = ReadyRoute;

    fn prepare(_key: &ObjKey, route: &R) -> ReadyRoute {
        let mut v = Verdict::default();
        let spec = read_spec(&mut v, route.spec());
        let errors = route.validate(v, &spec).errors;
        let refused = if errors.is_empty() {
            route.unsupported(&spec)
        } else {
            errors
        };
        ReadyRoute {
            refused: refused.iter().map(ToString::to_string).collect(),
            shape: RouteShape::lower(route, spec),
        }
    }
}

fn parent_status(
    controller: &str,
    route_ns: &str,
    p: &ParentIn<'_>,
    conditions: Vec<GatewayCondition>,
) -> ParentStatus {
    ParentStatus {
        kind: p.listener_set(route_ns).map(|_| "ListenerSet"),
        namespace: p.namespace.unwrap_or(route_ns).to_string(),
        name: p.name.to_string(),
        section_name: p.section_name.map(str::to_string),
        port: p.port,
        controller_name: controller.to_string(),
        conditions,
    }
}

/// The parents of a route that are sluice's: each with its index in `parentRefs` and its Gateway.
type Parents<'p, 'r> = Vec<(usize, &'p ParentIn<'r>, ObjKey)>;

/// The parents of a route (`obj`) that are Gateways of sluice's or ListenerSets naming one, each
/// with its index in `parentRefs` and the Gateway's key; None when it has none (the route is then
/// marked ignored: another controller's). Otherwise the route's generation is tracked for its
/// status. Which listeners of the Gateway a parent selects is [`tally::Tally::takes`]'s:
/// a Gateway's own, or the ListenerSet's.
pub(super) fn sluices_parents<'p, 'r>(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    parents: &'p [ParentIn<'r>],
    generation: Option<i64>,
    gateways: &BTreeMap<ObjKey, GatewayAcc>,
) -> Option<Parents<'p, 'r>> {
    let ours: Vec<_> = (parents.iter().enumerate())
        .filter_map(|(i, p)| {
            if let Some(set) = p.listener_set(&obj.key.namespace) {
                // The Gateway the ListenerSet names, when it is one of sluice's.
                let ls = b.snapshot.listener_sets.get(&set)?;
                let parent = &ls.spec.parent_ref;
                let ns = parent.namespace.as_deref().unwrap_or(&set.namespace);
                let gateway = ObjKey::new(ns, parent.name.as_str());
                let gw = gateways.get(&gateway)?;
                return gw
                    .listener_sets
                    .contains_key(&set)
                    .then_some((i, p, gateway));
            }
            let gateway_ref =
                p.group.unwrap_or(GROUP) == GROUP && p.kind.unwrap_or("Gateway") == "Gateway";
            let gateway = ObjKey::new(p.namespace.unwrap_or(&obj.key.namespace), p.name);
            (gateway_ref && gateways.contains_key(&gateway)).then_some((i, p, gateway))
        })
        .collect();
    // The generation, also of a route that is not sluice's: the status writer releases what it
    // wrote on one that was, and writes nothing older than what the cluster holds.
    b.track_generation_of(obj, generation);
    if ours.is_empty() {
        b.set_ignored(obj, "no parent is a Gateway of sluice's");
        return None;
    }
    Some(ours)
}

/// What the TLS of a route's backends (BackendTLSPolicy) depends on of its Gateways (`parents`):
/// they are the policies' ancestors, and present their client certificate, when they all
/// present the same one.
fn route_backend_tls(
    gateways: &BTreeMap<ObjKey, GatewayAcc>,
    parents: &Parents<'_, '_>,
) -> RouteBackendTls {
    let parent_gateways: Vec<ObjKey> = parents.iter().map(|(_, _, k)| k.clone()).collect();
    let mut clients = (parent_gateways.iter())
        .filter_map(|k| gateways.get(k))
        .map(|g| g.backend_client.as_ref().and_then(|(_, id)| id.clone()));
    let first = clients.next().flatten();
    let client_secret = match clients.all(|c| c == first) {
        true => first,
        false => None,
    };
    RouteBackendTls {
        gateways: parent_gateways,
        client_secret,
    }
}

/// Settles the `Accepted` condition of each parent that accepted the route (`statuses`) with
/// what it does not serve: `taken`, every host belonging to another object (the message names
/// them), refuses it; else `notes`, what is not `served` ("routed", "passed through"), are
/// named in its message.
fn settle_accepted(
    statuses: &mut [(&ParentIn<'_>, GatewayCondition)],
    taken: Option<String>,
    served: &str,
    notes: &[&str],
) {
    for (_, accepted) in statuses {
        if !accepted.status {
            continue;
        }
        if let Some(taken) = &taken {
            *accepted = condition(
                cond::ACCEPTED,
                false,
                cond::HOST_CONFLICT,
                format!("every hostname of this route belongs to another object: {taken}"),
            );
        } else if !notes.is_empty() {
            accepted.message = format!("attached to Gateway; not {served}: {}", notes.join("; "));
        }
    }
}

/// Records a route's status: for each parent its `Accepted` condition and the route's
/// `ResolvedRefs`; the route is invalid with every refusal, unresolved reference and `more`
/// problem, else valid.
pub(super) fn record_status(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    controller: &str,
    route_ns: &str,
    statuses: Vec<(&ParentIn<'_>, GatewayCondition)>,
    resolved: GatewayCondition,
    more: Vec<String>,
) {
    let mut problems: Vec<String> = Vec::new();
    let parents = (statuses.into_iter())
        .map(|(p, accepted)| {
            if !accepted.status && !problems.contains(&accepted.message) {
                problems.push(accepted.message.clone());
            }
            parent_status(controller, route_ns, p, vec![accepted, resolved.clone()])
        })
        .collect();
    b.set_gateway_status(
        obj,
        GatewayApiStatus {
            parents,
            ..Default::default()
        },
    );
    if !resolved.status {
        problems.push(resolved.message.clone());
    }
    problems.extend(more);
    if problems.is_empty() {
        b.set_valid(obj, format!("accepted {}", obj.kind.kind()));
    }
    for p in problems {
        b.set_invalid(obj, crate::api::status::reason::INVALID_SPEC, p);
    }
}

/// A match as a status message names it.
pub(super) fn describe(m: &RuleMatch) -> String {
    let path = match &m.path {
        PathMatch::Exact(p) => format!("path {p:?} (Exact)"),
        PathMatch::Prefix(p) | PathMatch::StringPrefix(p) => format!("path {p:?} (PathPrefix)"),
        PathMatch::Regex(p) => format!("path {p:?} (RegularExpression)"),
    };
    let count = |n: usize, what: &str| match n {
        0 => None,
        1 => Some(format!("1 {what} condition")),
        n => Some(format!("{n} {what} conditions")),
    };
    let conditions: Vec<String> = [
        count(m.headers.len(), "header"),
        count(m.query.len(), "query parameter"),
    ]
    .into_iter()
    .flatten()
    .collect();
    match conditions.is_empty() {
        true => path,
        false => format!("{path} with {}", conditions.join(" and ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::gateway_common::attached_to_gateway;

    fn parent() -> ParentIn<'static> {
        ParentIn {
            group: None,
            kind: None,
            namespace: None,
            name: "gw",
            section_name: None,
            port: None,
        }
    }

    #[test]
    fn a_parent_whose_hosts_are_all_taken_refuses_the_route() {
        let p = parent();
        let mut statuses = vec![(&p, attached_to_gateway())];
        let taken = Some("\"a.example.com\" is owned by x".to_string());
        settle_accepted(&mut statuses, taken, "routed", &["ignored"]);
        let accepted = &statuses[0].1;
        assert!(!accepted.status);
        assert_eq!(accepted.reason, cond::HOST_CONFLICT);
        assert_eq!(
            accepted.message,
            "every hostname of this route belongs to another object: \"a.example.com\" is owned by x"
        );
    }

    #[test]
    fn a_parent_names_what_it_does_not_serve_and_a_refusal_stays() {
        let p = parent();
        let refused = condition(cond::ACCEPTED, false, cond::NO_MATCHING_PARENT, "no");
        let mut statuses = vec![(&p, attached_to_gateway()), (&p, refused.clone())];
        settle_accepted(&mut statuses, None, "passed through", &["a", "b"]);
        assert_eq!(
            statuses[0].1.message,
            "attached to Gateway; not passed through: a; b"
        );
        assert_eq!(statuses[1].1, refused);
        settle_accepted(&mut statuses, None, "routed", &[]);
        assert_eq!(
            statuses[0].1.message,
            "attached to Gateway; not passed through: a; b"
        );
    }

    #[test]
    fn a_connection_route_of_more_than_one_rule_is_refused_by_kind() {
        assert!(one_rule(Kind::TcpRoute, 1).is_empty());
        let errors = one_rule(Kind::TlsRoute, 2);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("a TLSRoute's connections"));
    }

    #[test]
    fn a_parent_ref_names_a_listener_set_by_kind() {
        let mut p = parent();
        assert_eq!(p.listener_set("ns"), None);
        p.kind = Some("ListenerSet");
        assert_eq!(p.listener_set("ns"), Some(ObjKey::new("ns", "gw")));
        p.group = Some("example.com");
        assert_eq!(p.listener_set("ns"), None);
    }
}
