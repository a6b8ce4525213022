//! The delegation walk shared by both IngressRoute versions, and backend resolution shared with the
//! Route v1alpha1 processor.
//!
//! Each API version lowers its objects into routes with a path, own header conditions and a
//! target (backends, a TCP proxy or a delegation); the store does that once per version of an
//! object, as it takes it in (see [`super::ingressroute::ReadyIngressRoute`]), and a [`Node`] is
//! an object's lowered routes with its identity in the build. [`Walk`] then goes depth-first from
//! each served root, carrying the delegated space (path prefix + header conditions), the
//! permitInsecure grant and the chain of objects (cycle detection). Objects are found by key
//! through the build's numbering of its objects (see [`super::slots`]; the snapshot's maps for an
//! object the build does not hold), at most once per build, so the work is linear in the size of
//! the reachable graph. What the walk records of an object (reached, valid) it records by number.
//!
//! Nodes borrow from the snapshot, and field paths (`spec.routes[1].services[0]`) are written only
//! into the messages that need them: most objects are valid, and a rebuild should not pay for text
//! nobody reads.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use hashbrown::hash_map::Entry;
use hashbrown::{HashMap, HashSet};

use super::builder::{BackendRef, Builder, HostId, PortRef, effective_weight, weights_even};
use super::model::*;
use super::slots::Slot;
use crate::api::status::reason;
use crate::api::{HealthCheck, LbStrategy, ObjKey, ObjectRef};
use crate::validate::common::Timeout;
use crate::validate::{FieldError, quote};

#[path = "delegation_nodes.rs"]
mod nodes;

/// Longest delegation chain followed from a root (delegations, not objects).
pub const MAX_DELEGATION_DEPTH: usize = 32;

/// Vertex visits allowed per root: this plus [`VISITS_PER_OBJECT`] per object of the API version. A
/// vertex is visited once per distinct delegated space it is reached in; without a bound, a tenant
/// could make the work exponential (each level delegating to the next under two different header
/// conditions). The budget is per root so one tree cannot starve the others.
pub const BASE_VISIT_BUDGET: usize = 1024;
pub const VISITS_PER_OBJECT: usize = 8;
/// Up to this many routes, a node's routes are checked for repeated matches pair by pair; more
/// go through a hash table.
const SMALL_NODE_ROUTES: usize = 16;

/// Identity of a visit: the vertex (its node, of which there is one per object and build) and the
/// space it is visited in.
type VisitKey = (*const (), PathMatch, Vec<HeaderMatch>, bool);

pub(super) use nodes::*;

/// Resolves backends to weighted clusters. Weights are computed over all backends as written (so a
/// backend without a weight beside weighted ones still gets none), then unresolved backends are
/// dropped. Returns the action and one status message per unresolved backend, prefixed with its
/// field path. No resolved backend with a weight above 0 → 503.
pub(super) fn forward(
    b: &mut Builder<'_>,
    namespace: &str,
    backends: &[NodeBackend<'_>],
    outlier: Option<&OutlierDetection>,
) -> (RouteAction, Vec<FieldError>) {
    let even = weights_even(backends.iter().map(|nb| nb.weight));
    let mut clusters = Clusters::with_capacity(backends.len());
    let mut errors = Vec::new();
    let mut reasons = Vec::new();
    for nb in backends {
        let weight = effective_weight(even, nb.weight);
        // The CA certificates a TLS backend's certificate is verified with, in the object's
        // namespace: without them the backend is not used (never reached unverified).
        let validation = match nb.validation.as_deref() {
            None => None,
            Some(v) => match b.ca_secret(namespace, &v.ca_secret) {
                Ok(ca_secret) => Some(UpstreamValidation {
                    ca_secret,
                    subject_name: v.subject_name.clone(),
                    subject_alt_names: Vec::new(),
                }),
                Err(m) => {
                    reasons.push(m.message.clone());
                    errors.push(FieldError {
                        path: format!("{}.validation.caSecret", nb.field),
                        ..m
                    });
                    continue;
                }
            },
        };
        let r = BackendRef {
            namespace,
            service: &nb.name,
            port: PortRef::Number(nb.port),
            protocol: nb.protocol,
            lb: nb.lb,
            health_check: nb.health_check.as_ref().map(HealthCheckRef::get),
            outlier_detection: outlier.cloned(),
        };
        match b.cluster_verifying(&r, validation.as_ref()) {
            Ok(cluster) => clusters.push(WeightedCluster { cluster, weight }),
            Err(m) => {
                reasons.push(m.message.clone());
                errors.push(FieldError {
                    path: nb.field.to_string(),
                    ..m
                });
            }
        }
    }
    let action = if clusters.iter().any(|c| c.weight > 0) {
        RouteAction::Forward(clusters)
    } else if reasons.is_empty() {
        RouteAction::Unavailable("no backends".to_string())
    } else {
        RouteAction::Unavailable(reasons.join("; "))
    };
    (action, errors)
}

/// The delegated space a node is visited in.
struct Scope<'x> {
    path: &'x PathMatch,
    headers: &'x [HeaderMatch],
    /// v1: every delegating route on the chain has permitInsecure.
    insecure_ok: bool,
    /// The object that delegated (None at the root).
    by: Option<&'x ObjectRef>,
}

/// The root a walk started from.
struct RootCtx<'r> {
    host: &'r str,
    /// The build's number of its virtual host.
    host_id: HostId,
    root: &'r ObjectRef,
}

/// How a walk finds the objects delegations name.
pub(super) trait Finder<'s> {
    /// How many objects the build numbers for the walk (see [`Finder::number`]).
    fn numbered(&self) -> usize;
    /// The object's number, below [`Finder::numbered`], when the build holds it.
    fn number(&self, key: &ObjKey) -> Option<usize>;
    /// What the object of `key` (numbered `number`, when it has a number) is for a delegation.
    fn find(&self, key: &ObjKey, number: Option<usize>) -> Found<'s>;
}

/// The delegation walk over one API version's objects.
pub(super) struct Walk<'s, F: Finder<'s>> {
    finder: F,
    /// v1: a vertex's permitInsecure counts only when every delegating route permits it too.
    strict_insecure: bool,
    /// What each numbered object was found to be, by number: found once per build, and a vertex
    /// is one node (its identity in [`VisitKey`]) however often it is reached.
    found: Vec<Option<Found<'s>>>,
    /// The same for objects the build does not number, by key.
    found_by_key: HashMap<ObjKey, Found<'s>>,
    /// Vertices reached from a served root, whatever became of them.
    reached: Reached,
    /// Status messages already reported (a vertex reached twice reports once).
    reported: HashSet<(ObjectRef, String)>,
    /// Visits of the current root's walk and their outcome: reaching a vertex again in the same
    /// space (diamonds) reuses the outcome instead of walking it again.
    visited: HashMap<VisitKey, Result<(), String>>,
    /// Vertex visits allowed per root, and left for the current root.
    budget_per_root: usize,
    budget: usize,
    /// `prefix /`: the space a root is visited in.
    everything: PathMatch,
    /// The chain of objects from the current root to the vertex visited (empty between roots).
    chain: Vec<Rc<Node<'s>>>,
}

impl<'s, F: Finder<'s>> Walk<'s, F> {
    /// `objects`: how many objects of this API version exist (sizes the visit budget).
    pub fn new(finder: F, strict_insecure: bool, objects: usize) -> Self {
        Walk {
            found: std::iter::repeat_with(|| None)
                .take(finder.numbered())
                .collect(),
            finder,
            strict_insecure,
            found_by_key: HashMap::new(),
            reached: Reached::default(),
            reported: HashSet::new(),
            visited: HashMap::new(),
            budget_per_root: BASE_VISIT_BUDGET
                .saturating_add(objects.saturating_mul(VISITS_PER_OBJECT)),
            budget: 0,
            everything: PathMatch::prefix("/"),
            chain: Vec::new(),
        }
    }

    fn find(&mut self, key: &ObjKey) -> Found<'s> {
        let number = self.finder.number(key);
        let cached = match number {
            Some(i) => self.found.get(i).and_then(Option::as_ref),
            None => self.found_by_key.get(key),
        };
        if let Some(f) = cached {
            return f.clone();
        }
        let f = self.finder.find(key, number);
        match number.and_then(|i| self.found.get_mut(i)) {
            Some(slot) => *slot = Some(f.clone()),
            None => {
                self.found_by_key.insert(key.clone(), f.clone());
            }
        }
        f
    }

    fn invalid(&mut self, b: &mut Builder<'_>, obj: &ObjectRef, why: &'static str, msg: String) {
        self.fail(b, obj, FieldError::new("", why, msg));
    }

    /// Marks the object invalid with the problem, unless the same text was reported already.
    fn fail(&mut self, b: &mut Builder<'_>, obj: &ObjectRef, problem: FieldError) {
        if self.reported.insert((obj.clone(), problem.to_string())) {
            b.fail(obj, problem);
        }
    }

    /// Marks the node's object valid, with `description` unless it has one already. An object
    /// found invalid later in the walk shows no "valid" description: being marked invalid drops
    /// it, and invalid is final.
    fn valid(
        b: &mut Builder<'_>,
        node: &Node<'_>,
        description: impl FnOnce() -> Cow<'static, str>,
    ) {
        match node.slot {
            Some(slot) => b.set_valid_with(slot, description),
            None => b.set_valid_with(&node.obj, description),
        }
    }

    /// Serves one root (host ownership and TLS already settled) and everything it delegates to,
    /// on the virtual host `host_id` of its host `host`.
    pub fn walk_root(
        &mut self,
        b: &mut Builder<'_>,
        root: Rc<Node<'s>>,
        host: &str,
        host_id: HostId,
    ) {
        // A copy shares the text (a reference count), so `self` stays free to borrow mutably.
        let everything = self.everything.clone();
        let scope = Scope {
            path: &everything,
            headers: &[],
            insecure_ok: true,
            by: None,
        };
        let ctx = RootCtx {
            host,
            host_id,
            root: &root.obj,
        };
        // Without delegation, the root's routes are the host's.
        b.expect_routes(host_id, root.routes.len());
        // One vector for every root's chain (growing a new one from one object, as nearly every
        // root delegates, reallocated it once per root).
        let mut chain = std::mem::take(&mut self.chain);
        chain.push(root.clone());
        self.visited.clear();
        self.budget = self.budget_per_root;
        // A root cannot leave "/" with no inherited headers, so its visit always succeeds.
        let _ = self.visit(b, &ctx, &root, &scope, &mut chain);
        chain.clear();
        self.chain = chain;
        Self::valid(b, &root, || "valid IngressRoute".into());
    }

    /// The vertices the walks reached.
    pub fn finish(self) -> Reached {
        self.reached
    }

    /// Visits a node within a scope. Err(reason) when the node as a whole is refused in this scope
    /// (a route outside the delegated space): nothing of it is added and the delegating route
    /// answers 503 with that reason.
    fn visit(
        &mut self,
        b: &mut Builder<'_>,
        ctx: &RootCtx<'_>,
        node: &Node<'s>,
        scope: &Scope<'_>,
        chain: &mut Vec<Rc<Node<'s>>>,
    ) -> Result<(), String> {
        // 1. Every route must stay inside the delegated space; compute effective header conditions.
        let (effective, escapes) = effective_conditions(node, scope);
        if !escapes.is_empty() {
            for m in escapes {
                self.invalid(b, &node.obj, reason::DELEGATION_ESCAPE, m);
            }
            return Err(format!(
                "delegate {} has routes outside the space delegated to it",
                node.obj.key
            ));
        }
        if scope.by.is_some() {
            self.reached.insert(node);
            Self::valid(b, node, || delegated_from(ctx.root).into());
        }

        // 2. Routes, in the order written. A route with the same match as an earlier one (its own
        // conditions plus the delegated ones) is refused.
        let same_as_earlier = same_as_earlier(node, &effective);
        let mut same_as_earlier = same_as_earlier.into_iter().peekable();
        for (i, (r, headers)) in node.routes.iter().zip(effective).enumerate() {
            if let Some((_, first)) = same_as_earlier.next_if(|&(j, _)| j == i) {
                let first = node.routes[first].at();
                self.invalid(
                    b,
                    &node.obj,
                    reason::ROUTE_CONFLICT,
                    format!(
                        "{}.match: is the same match as {first} once the conditions delegated by {} are added",
                        r.at(),
                        scope.by.map_or_else(String::new, |o| o.to_string())
                    ),
                );
                continue;
            }
            self.route(b, ctx, node, r, headers, scope, chain);
        }
        Ok(())
    }

    /// One route of a visited node, not refused as a repeat: forwarded, proxied (TCP, roots
    /// only) or delegated (a delegation that fails answers 503 with its reason).
    #[allow(clippy::too_many_arguments)]
    fn route(
        &mut self,
        b: &mut Builder<'_>,
        ctx: &RootCtx<'_>,
        node: &Node<'s>,
        r: &NodeRoute<'s>,
        headers: Vec<HeaderMatch>,
        scope: &Scope<'_>,
        chain: &mut Vec<Rc<Node<'s>>>,
    ) {
        let permit = r.permit_insecure && (scope.insecure_ok || !self.strict_insecure);
        match &r.target {
            Target::Backends(bs) => {
                let action = self.forward(b, node, bs, r.outlier.as_ref());
                self.add(b, ctx, node, r, headers, action, permit);
            }
            Target::Tcp(bs) => {
                // Only roots may proxy TCP (the single-object rules refuse it elsewhere).
                if scope.by.is_none()
                    && let RouteAction::Forward(cs) = self.forward(b, node, bs, r.outlier.as_ref())
                {
                    b.vhost_at(ctx.host_id).tcp_proxy = Some(cs);
                }
            }
            Target::Delegate(key) => {
                let why = {
                    let next = Scope {
                        path: &r.path,
                        headers: &headers,
                        insecure_ok: scope.insecure_ok && r.permit_insecure,
                        by: Some(&node.obj),
                    };
                    self.delegate(b, ctx, node, r, key, &next, chain)
                };
                if let Some(why) = why {
                    let action = RouteAction::Unavailable(why);
                    self.add(b, ctx, node, r, headers, action, permit);
                }
            }
        }
    }

    /// Follows one delegation. Some(reason) when the delegating route must answer 503.
    #[allow(clippy::too_many_arguments)]
    fn delegate(
        &mut self,
        b: &mut Builder<'_>,
        ctx: &RootCtx<'_>,
        node: &Node<'s>,
        r: &NodeRoute<'s>,
        key: &ObjKey,
        next: &Scope<'_>,
        chain: &mut Vec<Rc<Node<'s>>>,
    ) -> Option<String> {
        let found = self.find(key);
        if let Some(refused) = refusal(node, r, key, &found, chain) {
            self.fail(b, &node.obj, refused.problem);
            return Some(refused.short);
        }
        match found {
            Found::Invalid => Some(format!("delegate {key} is invalid")),
            Found::Vertex(target) => self.follow(b, ctx, node, r, key, target, next, chain),
            Found::Missing(_) | Found::Root => None,
        }
    }

    /// Visits the vertex a delegation reaches, once per scope (a vertex delegated to twice in
    /// one scope is visited once), within the root's budget of visits. Some(reason) when the
    /// delegating route must answer 503.
    #[allow(clippy::too_many_arguments)]
    fn follow(
        &mut self,
        b: &mut Builder<'_>,
        ctx: &RootCtx<'_>,
        node: &Node<'s>,
        r: &NodeRoute<'s>,
        key: &ObjKey,
        target: Rc<Node<'s>>,
        next: &Scope<'_>,
        chain: &mut Vec<Rc<Node<'s>>>,
    ) -> Option<String> {
        let visit_key = (
            Rc::as_ptr(&target).cast::<()>(),
            next.path.clone(),
            next.headers.to_vec(),
            next.insecure_ok,
        );
        if let Some(res) = self.visited.get(&visit_key) {
            return res.clone().err();
        }
        if self.budget == 0 {
            self.invalid(
                b,
                &node.obj,
                reason::INVALID,
                format!(
                    "{}.delegate: {} {key} is not followed: the delegation graph of {} needs more than {} vertex visits",
                    r.at(),
                    node.obj.kind.kind(),
                    ctx.root,
                    self.budget_per_root
                ),
            );
            return Some("delegation graph too large".to_string());
        }
        self.budget -= 1;
        chain.push(target.clone());
        let res = self.visit(b, ctx, &target, next, chain);
        chain.pop();
        self.visited.insert(visit_key, res.clone());
        res.err()
    }

    fn forward(
        &mut self,
        b: &mut Builder<'_>,
        node: &Node<'s>,
        bs: &[NodeBackend<'s>],
        outlier: Option<&OutlierDetection>,
    ) -> RouteAction {
        let (action, errors) = forward(b, &node.obj.key.namespace, bs, outlier);
        for e in errors {
            self.fail(b, &node.obj, e);
        }
        action
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        b: &mut Builder<'_>,
        ctx: &RootCtx<'_>,
        node: &Node<'s>,
        r: &NodeRoute<'s>,
        headers: Vec<HeaderMatch>,
        action: RouteAction,
        permit_insecure: bool,
    ) {
        let route = Route {
            path: r.path.clone(),
            headers,
            action,
            permit_insecure,
            timeout: r.timeout,
            retry: r.retry.clone(),
            extras: None,
            source: node.obj.clone(),
        };
        match b.add_route_to(ctx.host_id, route) {
            Ok(()) => {}
            // The same object reached again through another delegation: already there.
            Err(conflict) if conflict.0 == node.obj => {}
            Err(conflict) => {
                let (existing, route) = *conflict;
                // The effective headers are sorted already, as add_route keeps them.
                let what = describe_match(&route);
                self.invalid(
                    b,
                    &node.obj,
                    reason::ROUTE_CONFLICT,
                    format!(
                        "{}: {what} on {} is already defined by {existing}",
                        r.path_field(),
                        ctx.host.to_ascii_lowercase()
                    ),
                )
            }
        }
    }
}

/// The vertices a walk reached: by slot, and by key for an object the build does not number.
#[derive(Default)]
pub(super) struct Reached {
    slots: HashSet<Slot>,
    unnumbered: HashSet<ObjKey>,
}

impl Reached {
    fn insert(&mut self, node: &Node<'_>) {
        match node.slot {
            Some(slot) => {
                self.slots.insert(slot);
            }
            None => {
                if !self.unnumbered.contains(&node.obj.key) {
                    self.unnumbered.insert(node.obj.key.clone());
                }
            }
        }
    }

    /// Whether the object with `slot` and `key` was reached.
    pub fn contains(&self, slot: Slot, key: &ObjKey) -> bool {
        self.slots.contains(&slot) || self.unnumbered.contains(key)
    }
}

/// `prefix /foo` or `prefix /foo [x-header="a"]`.
fn describe_match(r: &Route) -> String {
    if r.headers.is_empty() {
        r.path.to_string()
    } else {
        let hs: Vec<String> = r.headers.iter().map(|h| h.to_string()).collect();
        format!("{} [{}]", r.path, hs.join(", "))
    }
}

/// The description of a vertex a root delegates to: "delegated from <root>", written into a
/// string of its final size (`format!` grows its string piece by piece, and a build writes one
/// for every vertex).
fn delegated_from(root: &ObjectRef) -> String {
    const START: &str = "delegated from ";
    let (kind, ns, name) = (root.kind.kind(), &*root.key.namespace, &*root.key.name);
    let mut s = String::with_capacity(START.len() + kind.len() + 1 + ns.len() + 1 + name.len());
    s.push_str(START);
    s.push_str(kind);
    s.push(' ');
    if !ns.is_empty() {
        s.push_str(ns);
        s.push('/');
    }
    s.push_str(name);
    s
}

/// Why a delegation is not followed, for the delegating object's status (`problem`) and its
/// route's 503 (`short`).
struct Refusal {
    problem: FieldError,
    short: String,
}

/// A delegation that cannot be followed: to an IngressRoute that is missing or is a root, one
/// that closes a cycle on `chain`, or one past the depth limit.
fn refusal(
    node: &Node<'_>,
    r: &NodeRoute<'_>,
    key: &ObjKey,
    found: &Found<'_>,
    chain: &[Rc<Node<'_>>],
) -> Option<Refusal> {
    let kind = node.obj.kind.kind();
    let field = || format!("{}.delegate", r.at());
    let refuse = |path, reason, message, short: String| {
        Some(Refusal {
            problem: FieldError::new(path, reason, message),
            short,
        })
    };
    match found {
        Found::Missing(hint) => {
            let hint = hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
            let message = format!("{} {key} not found{hint}", node.obj.kind);
            return refuse(
                field(),
                reason::DELEGATE_NOT_FOUND,
                message,
                format!("delegate {key} not found"),
            );
        }
        Found::Root => {
            let message = format!(
                "{kind} {key} is a root (it has spec.virtualhost); only IngressRoutes without a virtualhost can be delegated to"
            );
            return refuse(
                field(),
                reason::DELEGATE_IS_ROOT,
                message,
                format!("delegate {key} is a root"),
            );
        }
        _ => {}
    }
    if let Some(start) = chain.iter().position(|n| n.obj.key == *key) {
        let cycle: Vec<String> = chain[start..]
            .iter()
            .map(|n| &n.obj.key)
            .chain(std::iter::once(key))
            .map(|k| k.to_string())
            .collect();
        let message = format!("delegation cycle: {kind} {}", cycle.join(" → "));
        return refuse(
            String::new(),
            reason::DELEGATION_CYCLE,
            message,
            "delegation cycle".to_string(),
        );
    }
    if chain.len() > MAX_DELEGATION_DEPTH {
        let message = format!(
            "{kind} {key} is not followed: delegation chains are limited to {MAX_DELEGATION_DEPTH} delegations"
        );
        return refuse(
            field(),
            reason::INVALID,
            message,
            "delegation chain too long".to_string(),
        );
    }
    None
}

/// Each route's header conditions with the delegated ones added, and the reasons routes leave
/// the space delegated to the node (a path outside the delegated prefix, a header condition
/// conflicting with a delegated one).
fn effective_conditions(
    node: &Node<'_>,
    scope: &Scope<'_>,
) -> (Vec<Vec<HeaderMatch>>, Vec<String>) {
    let mut escapes = Vec::new();
    let mut effective: Vec<Vec<HeaderMatch>> = Vec::with_capacity(node.routes.len());
    for r in node.routes {
        let mut headers = scope.headers.to_vec();
        if let Some(by) = scope.by {
            if !r.path.within(scope.path) {
                let written = match &r.path_written {
                    Some(p) => quote(p),
                    None => "absent (everything)".to_string(),
                };
                escapes.push(format!(
                    "{}: {written} is outside the prefix {} delegated by {by}",
                    r.path_field(),
                    quote(scope.path.value())
                ));
            }
            for (k, h) in &r.headers {
                let inherited: Vec<String> = scope
                    .headers
                    .iter()
                    .filter(|i| i.name == h.name)
                    .map(|i| i.to_string())
                    .collect();
                if !inherited.is_empty() && !scope.headers.contains(h) {
                    escapes.push(format!(
                        "{}: header condition {h} conflicts with {} delegated by {by}",
                        r.header_field(*k),
                        inherited.join(", ")
                    ));
                }
            }
        }
        if !r.headers.is_empty() {
            headers.extend(r.headers.iter().map(|(_, h)| h.clone()));
            headers.sort();
            headers.dedup();
        }
        effective.push(headers);
    }
    (effective, escapes)
}

/// The routes whose match (path and effective conditions) repeats an earlier route's, each as
/// (index, index of the first), in order.
fn same_as_earlier(node: &Node<'_>, effective: &[Vec<HeaderMatch>]) -> Vec<(usize, usize)> {
    let mut same_as_earlier: Vec<(usize, usize)> = Vec::new();
    let matches = || node.routes.iter().map(|r| &r.path).zip(effective);
    if node.routes.len() > SMALL_NODE_ROUTES {
        let mut seen: HashMap<(&PathMatch, &[HeaderMatch]), usize> =
            HashMap::with_capacity(node.routes.len());
        for (i, (path, headers)) in matches().enumerate() {
            match seen.entry((path, headers.as_slice())) {
                Entry::Occupied(first) => same_as_earlier.push((i, *first.get())),
                Entry::Vacant(e) => {
                    e.insert(i);
                }
            }
        }
    } else {
        // A few routes (nearly every object) are compared pair by pair: no table to
        // allocate and no match to hash.
        for (i, m) in matches().enumerate().skip(1) {
            if let Some(first) = matches().take(i).position(|earlier| earlier == m) {
                same_as_earlier.push((i, first));
            }
        }
    }
    same_as_earlier
}
