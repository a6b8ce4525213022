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

use sluice_core::api::Kind;
use sluice_core::api::status::{
    COND_READY, COND_VALID, ROUTE_STATUS_INVALID, ROUTE_STATUS_ORPHANED, ROUTE_STATUS_VALID,
    STATUS_INVALID, STATUS_ORPHANED, STATUS_VALID, reason,
};
use sluice_core::dag::gateway::GROUP;
use sluice_core::dag::{GatewayApiStatus, GatewayCondition, ObjectStatus, ParentStatus, State};

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

/// What the status writer needs to know about an object as it is in the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    /// What sluice needs of the object's `status` as stored.
    pub status: Option<ObservedStatus>,
    /// Whether field manager `sluice` owns fields of the status subresource.
    pub sluice_owns_status: bool,
}

/// A routing object that is in the cluster but does not decode into sluice's types.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    pub error: sluice_core::validate::FieldError,
    pub generation: Option<i64>,
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
            | Kind::ListenerSet
            | Kind::BackendTlsPolicy
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
            | Kind::ListenerSet
            | Kind::BackendTlsPolicy
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
        None if observed.sluice_owns_status => {
            let release = released(kind);
            match same(&release, observed.status.as_ref(), kind) {
                true => Plan::Keep,
                false => Plan::Apply(release),
            }
        }
        None => Plan::Keep,
    }
}

/// What releases the status fields sluice wrote on an object that is no longer sluice's (an
/// empty apply removes exactly the fields sluice owns). A Gateway API route's status must keep
/// `parents` (the CRD requires it), so a route no longer attached to a Gateway of sluice's (its
/// Gateway deleted, say) gets an empty list of parents.
fn released(kind: Kind) -> Value {
    match kind {
        Kind::HttpRoute | Kind::GrpcRoute | Kind::TcpRoute | Kind::TlsRoute => {
            json!({ "parents": [] })
        }
        // Likewise a policy's `ancestors`.
        Kind::BackendTlsPolicy => json!({ "ancestors": [] }),
        _ => json!({}),
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
                errors: s.messages.iter().map(ToString::to_string).collect(),
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
    // Route v1alpha1 spells its values as seed 004 does (`Valid`, `Invalid`); the IngressRoute
    // seeds spell them in lower case.
    let current = if kind == Kind::RouteV1alpha1 {
        route_current_status(s.current)
    } else {
        s.current
    };
    status.insert("currentStatus".into(), json!(current));
    status.insert("description".into(), json!(s.description));
    if let Some(g) = s.generation {
        status.insert("observedGeneration".into(), json!(g));
    }
    let mut conditions = vec![
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
    // An IngressRoute's BackendTLSVerified, beside them.
    if let Verdict::Dag(d) = verdict
        && let Some(c) = &d.condition
    {
        let (type_, ok, reason, message) = (c.type_, c.status, c.reason, &c.message);
        let c = condition(type_, ok, reason, message, s.generation, observed, now);
        conditions.push(c);
    }
    status.insert("conditions".into(), Value::Array(conditions));
    if kind == Kind::RouteV1alpha1 {
        // Always present, empty when there is nothing wrong (seed 004's `errors: []`).
        status.insert("errors".into(), json!(s.errors));
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

/// Route v1alpha1's spelling of a `currentStatus` value (seed 004: `currentStatus: Valid`).
fn route_current_status(current: &str) -> &'static str {
    match current {
        STATUS_VALID => ROUTE_STATUS_VALID,
        STATUS_ORPHANED => ROUTE_STATUS_ORPHANED,
        _ => ROUTE_STATUS_INVALID,
    }
}

/// The Gateway API status of a GatewayClass, Gateway or HTTPRoute.
fn gateway_status(
    g: &GatewayApiStatus,
    generation: Option<i64>,
    observed: Option<&ObservedStatus>,
    lb: Option<&LoadBalancer>,
    now: &str,
) -> Value {
    let conditions = Conditions {
        generation,
        observed,
        now,
    };
    let mut status = Map::new();
    if !g.conditions.is_empty() {
        status.insert("conditions".into(), conditions.list("", &g.conditions));
    }
    if !g.supported_features.is_empty() {
        let names = g.supported_features.iter().map(|f| json!({ "name": f }));
        status.insert("supportedFeatures".into(), Value::Array(names.collect()));
    }
    if !g.listeners.is_empty() {
        status.insert("listeners".into(), listeners(g, &conditions));
        if let Some(addresses) = gateway_addresses(g, lb) {
            status.insert("addresses".into(), addresses);
        }
    }
    if let Some(n) = g.attached_listener_sets {
        status.insert("attachedListenerSets".into(), json!(n));
    }
    if !g.parents.is_empty() {
        status.insert("parents".into(), parents(&g.parents, &conditions));
    }
    if let Some(list) = &g.ancestors {
        // A policy's: the Gateways it affects, by `ancestorRef`.
        status.insert("ancestors".into(), ancestors(list, &conditions));
    }
    Value::Object(status)
}

/// What every condition of one object's Gateway API status is written with.
struct Conditions<'a> {
    generation: Option<i64>,
    observed: Option<&'a ObservedStatus>,
    now: &'a str,
}

impl Conditions<'_> {
    /// The conditions `cs` of the part whose transition times are kept under `prefix`.
    fn list(&self, prefix: &str, cs: &[GatewayCondition]) -> Value {
        Value::Array(
            cs.iter()
                .map(|c| {
                    let type_ = format!("{prefix}{}", c.type_);
                    let mut v = condition(
                        &type_,
                        c.status,
                        c.reason,
                        &c.message,
                        self.generation,
                        self.observed,
                        self.now,
                    );
                    v["type"] = json!(c.type_);
                    v
                })
                .collect(),
        )
    }
}

/// A Gateway's `status.listeners`.
fn listeners(g: &GatewayApiStatus, conditions: &Conditions) -> Value {
    let listeners = g.listeners.iter().map(|l| {
        let kinds: Vec<Value> = (l.supported_kinds.iter())
            .map(|k| json!({ "group": GROUP, "kind": k }))
            .collect();
        json!({
            "name": l.name,
            "supportedKinds": kinds,
            "attachedRoutes": l.attached_routes,
            "conditions": conditions.list(&listener_prefix(&l.name), &l.conditions),
        })
    });
    Value::Array(listeners.collect())
}

/// A Gateway's `status.addresses`: its own (`--gateway-addresses`), else the load balancer's.
fn gateway_addresses(g: &GatewayApiStatus, lb: Option<&LoadBalancer>) -> Option<Value> {
    if !g.addresses.is_empty() {
        let addresses = (g.addresses.iter()).map(
            |ip| json!({ "type": sluice_core::dag::addresses::IP_ADDRESS, "value": ip.to_string() }),
        );
        return Some(Value::Array(addresses.collect()));
    }
    let lb = lb.filter(|lb| !lb.is_empty())?;
    let addresses = (lb
        .ips
        .iter()
        .map(|ip| json!({ "type": "IPAddress", "value": ip })))
    .chain((lb.hostnames.iter()).map(|h| json!({ "type": "Hostname", "value": h })));
    Some(Value::Array(addresses.collect()))
}

/// A route's `status.parents`.
fn parents(parents: &[ParentStatus], conditions: &Conditions) -> Value {
    let parents = parents.iter().map(|p| {
        let mut parent_ref = json!({
            "group": GROUP,
            "kind": p.kind.unwrap_or("Gateway"),
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
            "conditions": conditions.list(&prefix, &p.conditions),
        })
    });
    Value::Array(parents.collect())
}

/// A policy's `status.ancestors`.
fn ancestors(ancestors: &[ParentStatus], conditions: &Conditions) -> Value {
    let ancestors = ancestors.iter().map(|p| {
        let ancestor_ref = json!({
            "group": GROUP,
            "kind": "Gateway",
            "namespace": p.namespace,
            "name": p.name,
        });
        let prefix = ancestor_prefix(&ancestor_ref);
        json!({
            "ancestorRef": ancestor_ref,
            "controllerName": p.controller_name,
            "conditions": conditions.list(&prefix, &p.conditions),
        })
    });
    Value::Array(ancestors.collect())
}

/// The key a listener's conditions' transition times are kept under ([`ObservedStatus`]).
fn listener_prefix(name: &str) -> String {
    format!("listener {name}: ")
}

/// The key an ancestor's conditions' transition times are kept under ([`ObservedStatus`]).
fn ancestor_prefix(ancestor_ref: &Value) -> String {
    format!("ancestor {}", parent_prefix(ancestor_ref))
}

/// The key a parent's conditions' transition times are kept under ([`ObservedStatus`]).
fn parent_prefix(parent_ref: &Value) -> String {
    let s = |k: &str| parent_ref.get(k).map(Value::to_string).unwrap_or_default();
    // A ListenerSet and a Gateway of one name are two parents; a Gateway's key is as it was.
    let kind = match parent_ref.get("kind").and_then(Value::as_str) {
        Some(k) if k != "Gateway" => format!("{k} "),
        _ => String::new(),
    };
    format!(
        "parent {kind}{}/{}/{}/{}: ",
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
        for a in array("ancestors") {
            let ancestor_ref = a.get("ancestorRef").unwrap_or(&Value::Null);
            take(&ancestor_prefix(ancestor_ref), conditions_of(a));
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
            "ancestors",
            "addresses",
            "supportedFeatures",
            "attachedListenerSets",
        ]);
        if let Some(cs) = m.get_mut("conditions") {
            strip(cs);
        }
        for k in ["listeners", "parents", "ancestors"] {
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
#[path = "status_tests.rs"]
mod tests;
