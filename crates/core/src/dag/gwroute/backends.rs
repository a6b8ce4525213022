//! The backends of a Gateway API route of any kind: each `backendRef` resolved to a cluster (or
//! to why it has none, on the route's `ResolvedRefs` condition), a rule's backends weighed into
//! its action, its mirrors.

use super::super::backend_tls::BackendTls;
use super::super::gateway_common::{cond, granted};
use super::super::model::{
    ClusterName, Clusters, GatewayCondition, HeaderEdits, INVALID_BACKEND_CLUSTER, Mirror,
    RouteAction, UNAVAILABLE_BACKEND_CLUSTER, UpstreamProtocol, WeightedCluster,
};
use super::super::{BackendRef, Builder, PortRef};
use super::shape::{BackendIn, RuleFilters, RuleIn, RuleMatch, upstream_protocol};
use crate::api::{Kind, LbStrategy, ObjKey};
use crate::store::{APP_PROTOCOL_WSS, AppProtocol, Snapshot};
use crate::validate::FieldError;

/// A rule as routes: its matches and what each route of them does.
pub(in crate::dag) struct BuiltRule<'r> {
    pub matches: &'r [RuleMatch],
    pub action: RouteAction,
    pub filters: &'r RuleFilters,
    /// The mirrors whose backends resolve.
    pub mirrors: Vec<Mirror>,
    /// The header changes of each backend of `action` ([`super::super::model::RouteExtras::backend_edits`]).
    pub backend_edits: Vec<Option<HeaderEdits>>,
}

/// Where the route is from: its kind and namespace.
type From<'a> = (Kind, &'a str);

/// Rule `i` of a route (`from`) as routes: a redirect answers itself; otherwise its backends
/// (then its mirrors) are resolved, what does not resolve going to `resolved`.
pub(in crate::dag) fn build_rule<'r>(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    from: From<'_>,
    i: usize,
    rule: RuleIn<'r>,
    resolved: &mut GatewayCondition,
) -> BuiltRule<'r> {
    let RuleIn {
        matches,
        filters,
        mirrors,
        backends,
    } = rule;
    let (action, backend_edits, mirrors) = match &filters.redirect {
        // A redirect answers itself: the rule's backends (and mirrors) take no requests.
        Some(redirect) => (
            RouteAction::Redirect(Box::new(redirect.clone())),
            Vec::new(),
            Vec::new(),
        ),
        None => {
            let (action, backend_edits) = rule_action(b, snapshot, from, i, &backends, resolved);
            let protocol = upstream_protocol(from.0);
            let mirrors = (mirrors.into_iter())
                .filter_map(|m| {
                    let field = format!(
                        "spec.rules[{i}].filters[{}].requestMirror.backendRef",
                        m.filter
                    );
                    match resolve_backend(b, snapshot, from, &field, &m.backend, protocol) {
                        Ok(cluster) => Some(Mirror {
                            cluster,
                            per_million: m.per_million,
                        }),
                        Err(problem) => {
                            unresolved(resolved, &problem);
                            None
                        }
                    }
                })
                .collect();
            (action, backend_edits, mirrors)
        }
    };
    BuiltRule {
        matches,
        action,
        filters,
        mirrors,
        backend_edits,
    }
}

/// The clusters, weighted, a route (`from`) sends connections to (plain TCP to its backends,
/// `refs`); None when no backend resolves. What does not resolve goes to `resolved`, and its
/// weight's share to a cluster of no endpoints (those connections close).
pub(in crate::dag) fn connection_clusters(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    from: From<'_>,
    refs: &[BackendIn<'_>],
    resolved: &mut GatewayCondition,
) -> Option<Clusters> {
    match rule_action(b, snapshot, from, 0, refs, resolved).0 {
        RouteAction::Forward(clusters) => Some(clusters),
        _ => None,
    }
}

/// A rule's backends weighed so far: their clusters, each one's header changes, and the weight
/// of those that do not resolve.
#[derive(Default)]
struct Weighed {
    clusters: Clusters,
    edits: Vec<Option<HeaderEdits>>,
    /// The message of the last backend that does not resolve.
    failed: Option<String>,
    /// The weights of the backends that are not valid: their share of the requests fails.
    failed_weight: u32,
}

impl Weighed {
    /// Adds a backend that resolves to `cluster`. Two backendRefs of one Service are one
    /// backend, unless their filters differ.
    fn add(&mut self, cluster: ClusterName, r: &BackendIn<'_>) {
        let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
        if weight == 0 {
            return;
        }
        let same = (self.clusters.iter_mut().zip(&self.edits))
            .find(|(c, e)| c.cluster == cluster && e.as_ref() == r.edits);
        match same {
            Some((c, _)) => c.weight = c.weight.saturating_add(weight),
            None => {
                self.clusters.push(WeightedCluster { cluster, weight });
                self.edits.push(r.edits.cloned());
            }
        }
    }
}

/// A rule's backends as a route action; what cannot be resolved goes to `resolved` (the route's
/// ResolvedRefs condition). A rule none of whose backends resolve answers 500 (HTTPRoute) or 503
/// (the other kinds); the weight of those that do not resolve, beside some that do, goes to
/// [`INVALID_BACKEND_CLUSTER`] or [`UNAVAILABLE_BACKEND_CLUSTER`], which answer the same.
/// With the action, the header changes of each of its backends
/// ([`super::super::model::RouteExtras::backend_edits`]).
pub(in crate::dag) fn rule_action(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    from: From<'_>,
    i: usize,
    refs: &[BackendIn<'_>],
    resolved: &mut GatewayCondition,
) -> (RouteAction, Vec<Option<HeaderEdits>>) {
    // What a rule with no valid backend answers: the Gateway API asks for a 500 from an
    // HTTPRoute and for UNAVAILABLE from a GRPCRoute (the 503 Envoy turns into it).
    let http = from.0 == Kind::HttpRoute;
    let no_backend = |why: String| match http {
        true => RouteAction::Invalid(why),
        false => RouteAction::Unavailable(why),
    };
    if refs.is_empty() {
        return (
            no_backend(format!("spec.rules[{i}] has no backendRefs")),
            Vec::new(),
        );
    }
    let protocol = upstream_protocol(from.0);
    let mut w = Weighed::default();
    for (j, r) in refs.iter().enumerate() {
        let field = format!("spec.rules[{i}].backendRefs[{j}]");
        match resolve_backend(b, snapshot, from, &field, r, protocol) {
            Ok(cluster) => w.add(cluster, r),
            Err(problem) => {
                let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
                w.failed_weight = w.failed_weight.saturating_add(weight);
                // A backend whose BackendTLSPolicy is not accepted resolves: the policy's
                // status says why its requests fail.
                if problem.reason != super::super::backend_tls::reason::POLICY_NOT_ACCEPTED {
                    unresolved(resolved, &problem);
                }
                w.failed = Some(problem.to_string());
            }
        }
    }
    if w.clusters.is_empty() {
        let action = match w.failed {
            Some(why) => no_backend(why),
            None => RouteAction::Unavailable(format!(
                "every backendRef of spec.rules[{i}] has weight 0"
            )),
        };
        return (action, Vec::new());
    }
    if w.failed_weight > 0 {
        let cluster = match http {
            true => INVALID_BACKEND_CLUSTER,
            false => UNAVAILABLE_BACKEND_CLUSTER,
        };
        w.clusters.push(WeightedCluster {
            cluster: cluster.into(),
            weight: w.failed_weight,
        });
        w.edits.push(None);
    }
    if w.edits.iter().all(Option::is_none) {
        w.edits = Vec::new();
    }
    (RouteAction::Forward(w.clusters), w.edits)
}

/// Why a backend cannot be resolved (the route's ResolvedRefs condition takes its reason).
type Unresolved = FieldError;

/// The cluster of a backend (`field` names it in messages) of a route of kind `from.0` in
/// namespace `from.1`, or why it has none.
pub(in crate::dag) fn resolve_backend(
    b: &mut Builder<'_>,
    snapshot: &Snapshot,
    (from_kind, ns): From<'_>,
    field: &str,
    r: &BackendIn<'_>,
    protocol: UpstreamProtocol,
) -> Result<ClusterName, Unresolved> {
    let from_kind = from_kind.kind();
    let to_ns = r.namespace.unwrap_or(ns);
    let group = r.group.unwrap_or("");
    let kind = r.kind.unwrap_or("Service");
    if !group.is_empty() || kind != "Service" {
        Err(FieldError::new(
            field,
            cond::INVALID_KIND,
            format!(
                "sluice routes to Services (group \"\", kind Service), not {kind} of group {group:?}"
            ),
        ))
    } else if to_ns != ns && !granted(snapshot, from_kind, ns, "Service", to_ns, r.name) {
        Err(FieldError::new(
            field,
            cond::REF_NOT_PERMITTED,
            format!(
                "Service \"{to_ns}/{}\" is in another namespace and no ReferenceGrant there lets {from_kind}s of {ns:?} use it",
                r.name
            ),
        ))
    } else if let Some(port) = r.port {
        service_cluster(b, field, (to_ns, r.name, port), protocol)
    } else {
        Err(FieldError::new(
            format!("{field}.port"),
            cond::UNSUPPORTED_VALUE,
            "a Service backend needs a port",
        ))
    }
}

/// The cluster of port `port` of Service `to_ns/name`, a backend the route may use, spoken to
/// in `protocol` as the port's `appProtocol` and BackendTLSPolicy have it.
fn service_cluster(
    b: &mut Builder<'_>,
    field: &str,
    (to_ns, name, port): (&str, &str, i32),
    protocol: UpstreamProtocol,
) -> Result<ClusterName, Unresolved> {
    // What the Service port's `appProtocol` says it speaks: an HTTP backend that speaks
    // cleartext HTTP/2 gets it; one that wants TLS is refused (sluice speaks it to no
    // Gateway API backend yet). A stream's backend is spoken to as it is.
    let service_port = (protocol != UpstreamProtocol::Tcp)
        .then(|| {
            let svc = b.backing.services().get(&ObjKey::new(to_ns, name))?;
            let p = svc.ports.iter().find(|p| p.port == port)?;
            Some((p.app_protocol, p.name.clone()))
        })
        .flatten();
    let (app_protocol, port_name) = service_port.unwrap_or_default();
    // The BackendTLSPolicy of the port, for the backends of HTTP routes.
    let policy = match (protocol, b.backend_tls.as_mut()) {
        (UpstreamProtocol::Tcp, _) | (_, None) => BackendTls::None,
        (_, Some(policies)) => policies.backend(
            &ObjKey::new(to_ns, name),
            port_name.as_deref(),
            &b.route_backend.gateways,
        ),
    };
    let validation = match policy {
        BackendTls::None => None,
        BackendTls::Verify(v) => Some(v),
        BackendTls::Refused(why) => {
            return Err(FieldError::new(
                field,
                super::super::backend_tls::reason::POLICY_NOT_ACCEPTED,
                why,
            ));
        }
    };
    let protocol = match (protocol, app_protocol) {
        (_, AppProtocol::WebSocketTls) => {
            return Err(FieldError::new(
                field,
                cond::UNSUPPORTED_PROTOCOL,
                format!(
                    "port {port} of Service \"{to_ns}/{name}\" has appProtocol {APP_PROTOCOL_WSS} (WebSockets over TLS), and sluice speaks TLS to no Gateway API backend; serve the WebSockets on a port of appProtocol kubernetes.io/ws or none"
                ),
            ));
        }
        // A BackendTLSPolicy: TLS, HTTP/2 inside it where the port speaks HTTP/2.
        (UpstreamProtocol::Http, AppProtocol::H2c) if validation.is_some() => UpstreamProtocol::H2,
        (UpstreamProtocol::H2c, _) if validation.is_some() => UpstreamProtocol::H2,
        (UpstreamProtocol::Http, _) if validation.is_some() => UpstreamProtocol::Https,
        (UpstreamProtocol::Http, AppProtocol::H2c) => UpstreamProtocol::H2c,
        (other, _) => other,
    };
    let backend = BackendRef {
        namespace: to_ns,
        service: name,
        port: PortRef::Number(port),
        protocol,
        lb: LbStrategy::RoundRobin,
        health_check: None,
        outlier_detection: None,
    };
    let client = (validation.is_some())
        .then(|| b.route_backend.client_secret.clone())
        .flatten();
    b.cluster_tls(&backend, validation.as_ref(), client.as_deref())
        .map_err(|m| FieldError::new(field, cond::BACKEND_NOT_FOUND, m.to_string()))
}

/// Records a backend that does not resolve on the route's ResolvedRefs condition: the first
/// sets it false with its reason, each one's message is added.
pub(in crate::dag) fn unresolved(resolved: &mut GatewayCondition, problem: &FieldError) {
    if resolved.status {
        *resolved = GatewayCondition::failed(cond::RESOLVED_REFS, problem);
    } else {
        resolved.message = format!("{}; {problem}", resolved.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(weight: Option<i32>, edits: Option<&HeaderEdits>) -> BackendIn<'_> {
        BackendIn {
            group: None,
            kind: None,
            namespace: None,
            name: "api",
            port: Some(80),
            weight,
            edits,
        }
    }

    #[test]
    fn backends_of_one_cluster_and_filters_are_one_backend() {
        let mut w = Weighed::default();
        w.add("a".into(), &backend(None, None));
        w.add("a".into(), &backend(Some(2), None));
        w.add("a".into(), &backend(Some(0), None));
        let mut edits = HeaderEdits::default();
        edits.request.remove.push("x".into());
        w.add("a".into(), &backend(Some(4), Some(&edits)));
        let weights: Vec<u32> = w.clusters.iter().map(|c| c.weight).collect();
        assert_eq!(weights, vec![3, 4]);
        assert_eq!(w.edits.len(), 2);
    }

    #[test]
    fn an_unresolved_backend_adds_its_message_to_the_first_reason() {
        let mut resolved = super::super::super::gateway_common::refs_resolved();
        unresolved(
            &mut resolved,
            &FieldError::new("", cond::INVALID_KIND, "one"),
        );
        unresolved(
            &mut resolved,
            &FieldError::new("", cond::REF_NOT_PERMITTED, "two"),
        );
        assert!(!resolved.status);
        assert_eq!(resolved.reason, cond::INVALID_KIND);
        assert_eq!(resolved.message, "one; two");
    }
}
