//! Desired status per object, computed from the DAG's verdict and the object's current status.
//!
//! Pure: the writer calls [`plan`] for each routing object and writes only what differs. Rules:
//! - IngressRoute (both versions) and Route get `currentStatus`, `description`,
//!   `observedGeneration` and the `Valid`/`Ready` conditions (Route also `errors[]` and
//!   `lastProcessTime`);
//! - Ingress gets `status.loadBalancer` when an address is configured, and nothing else;
//! - GatewayClass, Gateway and HTTPRoute of sluice's controller get the Gateway API's own status
//!   (conditions; a Gateway's listeners and addresses; an HTTPRoute's parents), with
//!   `observedGeneration` on every condition;
//! - objects of another controller (state `ignored`) get nothing; status fields sluice wrote on them
//!   earlier are released (an empty apply removes exactly the fields sluice owns);
//! - a condition keeps its `lastTransitionTime` while its status stays the same, and Route's
//!   `lastProcessTime` only moves when something else in the status moves, so an unchanged verdict
//!   is never a write.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::api::Kind;
use crate::api::status::{
    COND_READY, COND_VALID, STATUS_INVALID, STATUS_ORPHANED, STATUS_VALID, reason,
};
use crate::dag::gateway::GROUP;
use crate::dag::{GatewayApiStatus, GatewayCondition, ObjectStatus, State};

use super::state::{Observed, Rejected};

/// What to do about one object's status.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The status in the cluster is what sluice wants.
    Keep,
    /// Server-side apply this `status` value.
    Apply(Value),
}

/// Where Ingress `status.loadBalancer` points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadBalancer {
    /// IP addresses and host names, in order.
    pub ips: Vec<String>,
    pub hostnames: Vec<String>,
}

impl LoadBalancer {
    /// One address from `--ingress-status-address`: an IP when it parses as one, else a host name.
    pub fn from_address(address: &str) -> LoadBalancer {
        let address = address.trim();
        if address.parse::<std::net::IpAddr>().is_ok() {
            LoadBalancer {
                ips: vec![address.to_string()],
                hostnames: vec![],
            }
        } else {
            LoadBalancer {
                ips: vec![],
                hostnames: vec![address.to_string()],
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.hostnames.is_empty()
    }

    fn to_status(&self) -> Value {
        let ingress: Vec<Value> = self
            .ips
            .iter()
            .map(|ip| json!({ "ip": ip }))
            .chain(self.hostnames.iter().map(|h| json!({ "hostname": h })))
            .collect();
        json!({ "loadBalancer": { "ingress": ingress } })
    }
}

/// The verdict for one object: from the DAG, or a decode failure.
#[derive(Clone, Copy, Debug)]
pub enum Verdict<'a> {
    Dag(&'a ObjectStatus),
    Rejected(&'a Rejected),
}

/// Whether sluice writes status for this kind.
pub fn writes_status(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Ingress
            | Kind::IngressRouteV1beta1
            | Kind::IngressRouteV1
            | Kind::RouteV1alpha1
            | Kind::GatewayClass
            | Kind::Gateway
            | Kind::HttpRoute
            | Kind::GrpcRoute
            | Kind::TcpRoute
            | Kind::TlsRoute
    )
}

/// The Gateway API kinds sluice writes status on.
fn is_gateway_kind(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::GatewayClass
            | Kind::Gateway
            | Kind::HttpRoute
            | Kind::GrpcRoute
            | Kind::TcpRoute
            | Kind::TlsRoute
    )
}

/// Decides the status write for one object. `now` is an RFC 3339 timestamp.
pub fn plan(
    kind: Kind,
    verdict: Verdict<'_>,
    observed: &Observed,
    lb: Option<&LoadBalancer>,
    now: &str,
) -> Plan {
    let ignored = matches!(verdict, Verdict::Dag(s) if s.state == State::Ignored);
    let desired = if !writes_status(kind) || ignored {
        None
    } else if kind == Kind::Ingress {
        lb.filter(|lb| !lb.is_empty()).map(LoadBalancer::to_status)
    } else if is_gateway_kind(kind) {
        // A Gateway API object's status says what its controller decided; one sluice could
        // not decode it says nothing about (it may be another controller's).
        match verdict {
            Verdict::Dag(s) => (s.gateway.as_deref())
                .map(|g| gateway_status(g, s.generation, observed.status.as_ref(), lb, now)),
            Verdict::Rejected(_) => None,
        }
    } else {
        Some(routing_status(kind, verdict, observed.status.as_ref(), now))
    };
    match desired {
        Some(d) if same(&d, observed.status.as_ref(), kind) => Plan::Keep,
        Some(d) => Plan::Apply(d),
        None if observed.sluice_owns_status => Plan::Apply(json!({})),
        None => Plan::Keep,
    }
}

struct Summary {
    current: &'static str,
    description: String,
    reason: &'static str,
    errors: Vec<String>,
    generation: Option<i64>,
}

fn summarize(verdict: Verdict<'_>) -> Summary {
    match verdict {
        Verdict::Dag(s) => {
            let (current, reason) = match s.state {
                State::Valid => (STATUS_VALID, reason::VALID),
                State::Orphaned => (STATUS_ORPHANED, reason::ORPHANED),
                State::Invalid | State::Ignored => (
                    STATUS_INVALID,
                    s.messages.first().map_or(reason::INVALID, |m| m.reason),
                ),
            };
            Summary {
                current,
                description: s.description.to_string(),
                reason,
                errors: s.messages.iter().map(|m| m.message.clone()).collect(),
                generation: s.generation,
            }
        }
        Verdict::Rejected(r) => Summary {
            current: STATUS_INVALID,
            description: r.error.to_string(),
            reason: reason::INVALID_SPEC,
            errors: vec![r.error.to_string()],
            generation: r.generation,
        },
    }
}

fn routing_status(
    kind: Kind,
    verdict: Verdict<'_>,
    observed: Option<&ObservedStatus>,
    now: &str,
) -> Value {
    let s = summarize(verdict);
    let valid = s.current == STATUS_VALID;
    let (ready_reason, ready_message) = if valid {
        (
            reason::PROGRAMMED,
            "routes are programmed into Envoy".to_string(),
        )
    } else {
        (s.reason, s.description.clone())
    };
    let mut status = Map::new();
    status.insert("currentStatus".into(), json!(s.current));
    status.insert("description".into(), json!(s.description));
    if let Some(g) = s.generation {
        status.insert("observedGeneration".into(), json!(g));
    }
    let conditions = vec![
        condition(
            COND_VALID,
            valid,
            s.reason,
            &s.description,
            s.generation,
            observed,
            now,
        ),
        condition(
            COND_READY,
            valid,
            ready_reason,
            &ready_message,
            s.generation,
            observed,
            now,
        ),
    ];
    status.insert("conditions".into(), Value::Array(conditions));
    if kind == Kind::RouteV1alpha1 {
        if !s.errors.is_empty() {
            status.insert("errors".into(), json!(s.errors));
        }
        // lastProcessTime moves only when something else does.
        let mut value = Value::Object(status);
        let kept = observed
            .and_then(|o| o.last_process_time.as_deref())
            .filter(|_| same(&value, observed, kind))
            .unwrap_or(now);
        value["lastProcessTime"] = json!(kept);
        return value;
    }
    Value::Object(status)
}

/// The Gateway API status of a GatewayClass, Gateway or HTTPRoute.
fn gateway_status(
    g: &GatewayApiStatus,
    generation: Option<i64>,
    observed: Option<&ObservedStatus>,
    lb: Option<&LoadBalancer>,
    now: &str,
) -> Value {
    let conditions = |prefix: &str, cs: &[GatewayCondition]| -> Value {
        Value::Array(
            cs.iter()
                .map(|c| {
                    let type_ = format!("{prefix}{}", c.type_);
                    let mut v = condition(
                        &type_, c.status, c.reason, &c.message, generation, observed, now,
                    );
                    v["type"] = json!(c.type_);
                    v
                })
                .collect(),
        )
    };
    let mut status = Map::new();
    if !g.conditions.is_empty() {
        status.insert("conditions".into(), conditions("", &g.conditions));
    }
    if !g.supported_features.is_empty() {
        let names = g.supported_features.iter().map(|f| json!({ "name": f }));
        status.insert("supportedFeatures".into(), Value::Array(names.collect()));
    }
    if !g.listeners.is_empty() {
        let listeners = g.listeners.iter().map(|l| {
            let kinds: Vec<Value> = (l.supported_kinds.iter())
                .map(|k| json!({ "group": GROUP, "kind": k }))
                .collect();
            json!({
                "name": l.name,
                "supportedKinds": kinds,
                "attachedRoutes": l.attached_routes,
                "conditions": conditions(&listener_prefix(&l.name), &l.conditions),
            })
        });
        status.insert("listeners".into(), Value::Array(listeners.collect()));
        if let Some(lb) = lb.filter(|lb| !lb.is_empty()) {
            let addresses = (lb
                .ips
                .iter()
                .map(|ip| json!({ "type": "IPAddress", "value": ip })))
            .chain((lb.hostnames.iter()).map(|h| json!({ "type": "Hostname", "value": h })));
            status.insert("addresses".into(), Value::Array(addresses.collect()));
        }
    }
    if !g.parents.is_empty() {
        let parents = g.parents.iter().map(|p| {
            let mut parent_ref = json!({
                "group": GROUP,
                "kind": "Gateway",
                "namespace": p.namespace,
                "name": p.name,
            });
            if let Some(s) = &p.section_name {
                parent_ref["sectionName"] = json!(s);
            }
            if let Some(port) = p.port {
                parent_ref["port"] = json!(port);
            }
            let prefix = parent_prefix(&parent_ref);
            json!({
                "parentRef": parent_ref,
                "controllerName": p.controller_name,
                "conditions": conditions(&prefix, &p.conditions),
            })
        });
        status.insert("parents".into(), Value::Array(parents.collect()));
    }
    Value::Object(status)
}

/// The key a listener's conditions' transition times are kept under ([`ObservedStatus`]).
fn listener_prefix(name: &str) -> String {
    format!("listener {name}: ")
}

/// The key a parent's conditions' transition times are kept under ([`ObservedStatus`]).
fn parent_prefix(parent_ref: &Value) -> String {
    let s = |k: &str| parent_ref.get(k).map(Value::to_string).unwrap_or_default();
    format!(
        "parent {}/{}/{}/{}: ",
        s("namespace"),
        s("name"),
        s("sectionName"),
        s("port")
    )
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    observed: Option<&ObservedStatus>,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = observed
        .and_then(|o| o.transition_time(type_, status))
        .unwrap_or(now);
    let mut c = json!({
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    if let Some(g) = generation {
        c["observedGeneration"] = json!(g);
    }
    c
}

/// Whether the observed status already says what `desired` says, ignoring timestamps and fields
/// sluice does not write.
fn same(desired: &Value, observed: Option<&ObservedStatus>, kind: Kind) -> bool {
    observed.is_some_and(|o| o.digest(kind) == digest(&project(desired, kind)))
}

/// A stable digest of a JSON value: its serialization, whose object keys are sorted.
fn digest(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// What sluice keeps of an object's status as stored: enough to tell whether a desired status is
/// already there ([`plan`]'s `Keep`) and the timestamps a write carries over, not the status
/// itself. (A JSON tree per routing object was a fifth of cluster mode's memory.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedStatus {
    /// Digests of the fields sluice writes on routing kinds, on Ingress and on Gateway API
    /// kinds ([`project`]).
    routing: u64,
    ingress: u64,
    gateway: u64,
    /// The stored conditions' `lastTransitionTime`s.
    transitions: Box<[Transition]>,
    /// Route's `lastProcessTime`.
    last_process_time: Option<Box<str>>,
}

/// A stored condition's type, status and `lastTransitionTime`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Transition {
    type_: Box<str>,
    status: Option<Box<str>>,
    time: Option<Box<str>>,
}

impl ObservedStatus {
    pub fn new(status: &Value) -> ObservedStatus {
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(Box::<str>::from);
        fn conditions_of(v: &Value) -> &[Value] {
            (v.get("conditions").and_then(Value::as_array)).map_or(&[], Vec::as_slice)
        }
        let array =
            |k: &str| (status.get(k).and_then(Value::as_array)).map_or(&[][..], Vec::as_slice);
        let mut transitions = Vec::new();
        let mut take = |prefix: &str, cs: &[Value]| {
            transitions.extend(cs.iter().filter_map(|c| {
                let type_ = c.get("type")?.as_str()?;
                Some(Transition {
                    type_: if prefix.is_empty() {
                        type_.into()
                    } else {
                        format!("{prefix}{type_}").into()
                    },
                    status: str_of(c, "status"),
                    time: str_of(c, "lastTransitionTime"),
                })
            }))
        };
        take("", conditions_of(status));
        for l in array("listeners") {
            let name = l.get("name").and_then(Value::as_str).unwrap_or_default();
            take(&listener_prefix(name), conditions_of(l));
        }
        for p in array("parents") {
            let parent_ref = p.get("parentRef").unwrap_or(&Value::Null);
            take(&parent_prefix(parent_ref), conditions_of(p));
        }
        let transitions = transitions.into_boxed_slice();
        ObservedStatus {
            routing: digest(&project(status, Kind::IngressRouteV1)),
            ingress: digest(&project(status, Kind::Ingress)),
            gateway: digest(&project(status, Kind::Gateway)),
            transitions,
            last_process_time: str_of(status, "lastProcessTime"),
        }
    }

    fn digest(&self, kind: Kind) -> u64 {
        if kind == Kind::Ingress {
            self.ingress
        } else if is_gateway_kind(kind) {
            self.gateway
        } else {
            self.routing
        }
    }

    /// When the first condition of this type last took this status (as stored).
    fn transition_time(&self, type_: &str, status: &str) -> Option<&str> {
        self.transitions
            .iter()
            .find(|t| &*t.type_ == type_)
            .filter(|t| t.status.as_deref() == Some(status))
            .and_then(|t| t.time.as_deref())
    }
}

/// The fields sluice writes, without timestamps.
fn project(status: &Value, kind: Kind) -> Value {
    let pick = |keys: &[&str]| {
        let mut m = Map::new();
        for k in keys {
            if let Some(v) = status.get(*k) {
                m.insert((*k).to_string(), v.clone());
            }
        }
        m
    };
    if kind == Kind::Ingress {
        return Value::Object(pick(&["loadBalancer"]));
    }
    let strip = |cs: &mut Value| {
        for c in cs.as_array_mut().into_iter().flatten() {
            if let Value::Object(c) = c {
                c.remove("lastTransitionTime");
            }
        }
    };
    if is_gateway_kind(kind) {
        let mut m = pick(&[
            "conditions",
            "listeners",
            "parents",
            "addresses",
            "supportedFeatures",
        ]);
        if let Some(cs) = m.get_mut("conditions") {
            strip(cs);
        }
        for k in ["listeners", "parents"] {
            for item in m
                .get_mut(k)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(cs) = item.get_mut("conditions") {
                    strip(cs);
                }
            }
        }
        return Value::Object(m);
    }
    let mut m = pick(&[
        "currentStatus",
        "description",
        "observedGeneration",
        "conditions",
        "errors",
    ]);
    if let Some(Value::Array(cs)) = m.get_mut("conditions") {
        for c in cs.iter_mut() {
            if let Value::Object(c) = c {
                c.remove("lastTransitionTime");
            }
        }
    }
    Value::Object(m)
}

/// The body of a server-side apply on the status subresource.
pub fn apply_body(
    api_version: &str,
    kind: &str,
    name: &str,
    namespace: &str,
    status: &Value,
) -> Value {
    let mut meta = json!({ "name": name });
    if !namespace.is_empty() {
        meta["namespace"] = json!(namespace);
    }
    json!({ "apiVersion": api_version, "kind": kind, "metadata": meta, "status": status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::StatusMessage;
    use crate::validate::FieldError;

    const T0: &str = "2025-01-01T00:00:00Z";
    const T1: &str = "2025-01-01T00:05:00Z";

    fn mk_status(state: State, generation: i64) -> ObjectStatus {
        let (description, messages) = match state {
            State::Invalid => (
                "spec.routes[0].services[0]: Service \"web\" not found".to_string(),
                vec![StatusMessage {
                    reason: reason::SERVICE_NOT_FOUND,
                    message: "spec.routes[0].services[0]: Service \"web\" not found".into(),
                }],
            ),
            State::Orphaned => ("not part of a delegation chain from a root".into(), vec![]),
            State::Ignored => ("ingress class \"nginx\" is not sluice".into(), vec![]),
            State::Valid => ("valid".into(), vec![]),
        };
        ObjectStatus {
            state,
            description: description.into(),
            messages,
            generation: Some(generation),
            gateway: None,
        }
    }

    fn observed(status: Option<Value>) -> Observed {
        Observed {
            generation: Some(1),
            status: status.as_ref().map(ObservedStatus::new),
            sluice_owns_status: false,
        }
    }

    fn applied(p: Plan) -> Value {
        match p {
            Plan::Apply(v) => v,
            Plan::Keep => panic!("expected a write"),
        }
    }

    #[test]
    fn valid_ingressroute_gets_seed_fields_and_both_conditions() {
        let st = mk_status(State::Valid, 4);
        let v = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(
            v,
            json!({
                "currentStatus": "valid",
                "description": "valid",
                "observedGeneration": 4,
                "conditions": [
                    {"type": "Valid", "status": "True", "reason": "Valid", "message": "valid",
                     "observedGeneration": 4, "lastTransitionTime": T0},
                    {"type": "Ready", "status": "True", "reason": "Programmed",
                     "message": "routes are programmed into Envoy",
                     "observedGeneration": 4, "lastTransitionTime": T0},
                ]
            })
        );
    }

    #[test]
    fn unchanged_verdict_is_no_write_even_later() {
        let st = mk_status(State::Invalid, 2);
        let first = applied(plan(
            Kind::IngressRouteV1beta1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(first["conditions"][0]["reason"], json!("ServiceNotFound"));
        assert_eq!(first["conditions"][1]["status"], json!("False"));
        let again = plan(
            Kind::IngressRouteV1beta1,
            Verdict::Dag(&st),
            &observed(Some(first)),
            None,
            T1,
        );
        assert_eq!(again, Plan::Keep);
    }

    #[test]
    fn only_the_fields_sluice_writes_are_compared() {
        let st = mk_status(State::Valid, 3);
        let written = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        // Another controller's field, other timestamps: still what sluice wants.
        let mut stored = written.clone();
        stored["loadBalancer"] = json!({"ingress": [{"ip": "192.0.2.1"}]});
        stored["conditions"][1]["lastTransitionTime"] = json!(T1);
        let again = |stored: Value| {
            plan(
                Kind::IngressRouteV1,
                Verdict::Dag(&st),
                &observed(Some(stored)),
                None,
                T1,
            )
        };
        assert_eq!(again(stored.clone()), Plan::Keep);
        // A field sluice writes that differs: written again, keeping the stored transition times.
        stored["description"] = json!("edited by hand");
        let rewritten = applied(again(stored));
        assert_eq!(rewritten["description"], json!("valid"));
        assert_eq!(rewritten["conditions"][0]["lastTransitionTime"], json!(T0));
        assert_eq!(rewritten["conditions"][1]["lastTransitionTime"], json!(T1));
    }

    #[test]
    fn generation_bump_writes_but_keeps_transition_time() {
        let st = mk_status(State::Valid, 1);
        let first = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        let st2 = mk_status(State::Valid, 2);
        let second = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&st2),
            &observed(Some(first)),
            None,
            T1,
        ));
        assert_eq!(second["observedGeneration"], json!(2));
        assert_eq!(second["conditions"][0]["observedGeneration"], json!(2));
        assert_eq!(second["conditions"][0]["lastTransitionTime"], json!(T0));
    }

    #[test]
    fn invalid_to_valid_moves_transition_time() {
        let bad = mk_status(State::Invalid, 1);
        let first = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&bad),
            &observed(None),
            None,
            T0,
        ));
        let good = mk_status(State::Valid, 2);
        let second = applied(plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&good),
            &observed(Some(first)),
            None,
            T1,
        ));
        assert_eq!(second["currentStatus"], json!("valid"));
        assert_eq!(second["conditions"][0]["status"], json!("True"));
        assert_eq!(second["conditions"][0]["lastTransitionTime"], json!(T1));
    }

    #[test]
    fn orphaned_is_not_valid_nor_ready() {
        let st = mk_status(State::Orphaned, 1);
        let v = applied(plan(
            Kind::IngressRouteV1beta1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(v["currentStatus"], json!("orphaned"));
        assert_eq!(v["conditions"][0]["reason"], json!("Orphaned"));
        assert_eq!(v["conditions"][1]["status"], json!("False"));
    }

    #[test]
    fn route_gets_errors_and_a_process_time_that_only_moves_with_the_status() {
        let st = mk_status(State::Invalid, 1);
        let first = applied(plan(
            Kind::RouteV1alpha1,
            Verdict::Dag(&st),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(
            first["errors"],
            json!(["spec.routes[0].services[0]: Service \"web\" not found"])
        );
        assert_eq!(first["lastProcessTime"], json!(T0));
        assert_eq!(
            plan(
                Kind::RouteV1alpha1,
                Verdict::Dag(&st),
                &observed(Some(first.clone())),
                None,
                T1
            ),
            Plan::Keep
        );
        let fixed = mk_status(State::Valid, 2);
        let second = applied(plan(
            Kind::RouteV1alpha1,
            Verdict::Dag(&fixed),
            &observed(Some(first)),
            None,
            T1,
        ));
        assert_eq!(second["lastProcessTime"], json!(T1));
        assert!(second.get("errors").is_none());
    }

    #[test]
    fn rejected_object_is_invalid_with_the_decode_error() {
        let r = Rejected {
            error: FieldError::spec(
                "spec.routes[0].pathPrefix",
                "invalid type: integer `42`, expected a string",
            ),
            generation: Some(7),
        };
        let v = applied(plan(
            Kind::RouteV1alpha1,
            Verdict::Rejected(&r),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(v["currentStatus"], json!("invalid"));
        assert_eq!(v["observedGeneration"], json!(7));
        assert_eq!(v["conditions"][0]["reason"], json!("InvalidSpec"));
        assert_eq!(v["description"], json!(r.error.to_string()));
    }

    #[test]
    fn ingress_gets_only_the_load_balancer_and_only_when_configured() {
        let st = mk_status(State::Valid, 1);
        assert_eq!(
            plan(Kind::Ingress, Verdict::Dag(&st), &observed(None), None, T0),
            Plan::Keep
        );
        let lb = LoadBalancer::from_address("192.0.2.10");
        let v = applied(plan(
            Kind::Ingress,
            Verdict::Dag(&st),
            &observed(None),
            Some(&lb),
            T0,
        ));
        assert_eq!(
            v,
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})
        );
        assert_eq!(
            plan(
                Kind::Ingress,
                Verdict::Dag(&st),
                &observed(Some(v)),
                Some(&lb),
                T1
            ),
            Plan::Keep
        );
        let host = LoadBalancer::from_address("lb.example.com");
        assert_eq!(host.hostnames, vec!["lb.example.com"]);
    }

    #[test]
    fn ignored_objects_are_left_alone_unless_sluice_wrote_there_before() {
        let st = mk_status(State::Ignored, 1);
        let lb = LoadBalancer::from_address("192.0.2.10");
        assert_eq!(
            plan(
                Kind::Ingress,
                Verdict::Dag(&st),
                &observed(None),
                Some(&lb),
                T0
            ),
            Plan::Keep
        );
        let mut o = observed(Some(
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
        ));
        o.sluice_owns_status = true;
        assert_eq!(
            plan(Kind::Ingress, Verdict::Dag(&st), &o, Some(&lb), T0),
            Plan::Apply(json!({}))
        );
    }

    #[test]
    fn gateway_api_objects_without_a_gateway_api_verdict_get_nothing() {
        // A TLSRoute (not routed yet) and routes whose verdict carries no Gateway API status
        // (no parent of sluice's).
        let st = mk_status(State::Valid, 1);
        for kind in [Kind::TlsRoute, Kind::GrpcRoute, Kind::HttpRoute] {
            assert_eq!(
                plan(kind, Verdict::Dag(&st), &observed(None), None, T0),
                Plan::Keep
            );
        }
    }

    #[test]
    fn apply_body_carries_type_and_identity() {
        let b = apply_body(
            "projectcontour.io/v1",
            "IngressRoute",
            "a",
            "ns",
            &json!({"x": 1}),
        );
        assert_eq!(
            b,
            json!({"apiVersion": "projectcontour.io/v1", "kind": "IngressRoute",
                   "metadata": {"name": "a", "namespace": "ns"}, "status": {"x": 1}})
        );
    }

    fn gateway_verdict(kind_status: crate::dag::GatewayApiStatus, state: State) -> ObjectStatus {
        ObjectStatus {
            state,
            description: "accepted HTTPRoute".into(),
            messages: Vec::new(),
            generation: Some(4),
            gateway: Some(Box::new(kind_status)),
        }
    }

    fn gcond(type_: &'static str, ok: bool, reason: &'static str) -> GatewayCondition {
        GatewayCondition {
            type_,
            status: ok,
            reason,
            message: format!("{type_} is {ok}"),
        }
    }

    #[test]
    fn an_httproute_gets_one_parent_entry_per_gateway_of_sluices_and_keeps_its_times() {
        let mut g = crate::dag::GatewayApiStatus {
            parents: vec![crate::dag::ParentStatus {
                namespace: "shop".into(),
                name: "edge".into(),
                section_name: Some("http".into()),
                port: None,
                controller_name: "sluice.dev/gateway-controller".into(),
                conditions: vec![
                    gcond("Accepted", true, "Accepted"),
                    gcond("ResolvedRefs", true, "ResolvedRefs"),
                ],
            }],
            ..Default::default()
        };
        let s = gateway_verdict(g.clone(), State::Valid);
        let first = applied(plan(
            Kind::HttpRoute,
            Verdict::Dag(&s),
            &observed(None),
            None,
            T0,
        ));
        assert_eq!(
            first,
            json!({"parents": [{
                "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "shop", "name": "edge", "sectionName": "http"},
                "controllerName": "sluice.dev/gateway-controller",
                "conditions": [
                    {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Accepted is true", "observedGeneration": 4, "lastTransitionTime": T0},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "ResolvedRefs is true", "observedGeneration": 4, "lastTransitionTime": T0},
                ],
            }]})
        );
        // The same verdict later: no write.
        let stored = observed(Some(first.clone()));
        assert_eq!(
            plan(Kind::HttpRoute, Verdict::Dag(&s), &stored, None, T1),
            Plan::Keep
        );
        // A backend goes missing: ResolvedRefs moves, Accepted keeps its time.
        g.parents[0].conditions[1] = gcond("ResolvedRefs", false, "BackendNotFound");
        let s = gateway_verdict(g, State::Invalid);
        let next = applied(plan(Kind::HttpRoute, Verdict::Dag(&s), &stored, None, T1));
        let cs = &next["parents"][0]["conditions"];
        assert_eq!(cs[0]["lastTransitionTime"], T0);
        assert_eq!(cs[1]["lastTransitionTime"], T1);
        assert_eq!(cs[1]["status"], "False");
    }

    #[test]
    fn a_gateway_class_lists_its_supported_features_and_is_not_written_again() {
        let g = crate::dag::GatewayApiStatus {
            conditions: vec![gcond("Accepted", true, "Accepted")],
            supported_features: crate::dag::gateway::SUPPORTED_FEATURES.to_vec(),
            ..Default::default()
        };
        let s = gateway_verdict(g, State::Valid);
        let first = applied(plan(
            Kind::GatewayClass,
            Verdict::Dag(&s),
            &observed(None),
            None,
            T0,
        ));
        let names: Vec<&str> = (first["supportedFeatures"].as_array().unwrap().iter())
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, crate::dag::gateway::SUPPORTED_FEATURES);
        // In the order the Gateway API asks for, each once.
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        assert!(names.contains(&"TLSRoute") && names.contains(&"HTTPRoute"));
        let stored = observed(Some(first));
        assert_eq!(
            plan(Kind::GatewayClass, Verdict::Dag(&s), &stored, None, T1),
            Plan::Keep
        );
    }

    #[test]
    fn a_gateway_gets_its_conditions_listeners_and_addresses() {
        let g = crate::dag::GatewayApiStatus {
            conditions: vec![
                gcond("Accepted", true, "Accepted"),
                gcond("Programmed", true, "Programmed"),
            ],
            listeners: vec![crate::dag::ListenerStatus {
                name: "http".into(),
                supported_kinds: vec!["HTTPRoute"],
                attached_routes: 2,
                conditions: vec![gcond("Accepted", true, "Accepted")],
            }],
            ..Default::default()
        };
        let s = gateway_verdict(g, State::Valid);
        let lb = LoadBalancer::from_address("203.0.113.7");
        let status = applied(plan(
            Kind::Gateway,
            Verdict::Dag(&s),
            &observed(None),
            Some(&lb),
            T0,
        ));
        assert_eq!(
            status["addresses"],
            json!([{"type": "IPAddress", "value": "203.0.113.7"}])
        );
        assert_eq!(status["conditions"][1]["type"], "Programmed");
        assert_eq!(status["listeners"][0]["attachedRoutes"], 2);
        assert_eq!(
            status["listeners"][0]["supportedKinds"],
            json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
        );
        let stored = observed(Some(status));
        assert_eq!(
            plan(Kind::Gateway, Verdict::Dag(&s), &stored, Some(&lb), T1),
            Plan::Keep
        );
        // Another controller's Gateway gets nothing; one sluice wrote on before is released.
        let ignored = ObjectStatus {
            gateway: None,
            ..mk_status(State::Ignored, 1)
        };
        assert_eq!(
            plan(
                Kind::Gateway,
                Verdict::Dag(&ignored),
                &observed(None),
                None,
                T1
            ),
            Plan::Keep
        );
        let owned = Observed {
            sluice_owns_status: true,
            ..observed(None)
        };
        assert_eq!(
            plan(Kind::Gateway, Verdict::Dag(&ignored), &owned, None, T1),
            Plan::Apply(json!({}))
        );
    }
}
