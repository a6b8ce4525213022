//! IngressRoute processors: `contour.heptio.com/v1beta1` (seed 000) and `projectcontour.io/v1`
//! (seed 002). Roots claim their fqdn; the owner of each host is served with its TLS settings and
//! everything it delegates to (see [`super::delegation`]); vertices no served root reaches are
//! orphaned. The rules are written down in docs/ingressroute.md.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::Builder;
use super::delegation::{
    BackendField, Finder, Found, HealthCheckRef, Node, NodeBackend, NodeRoute, Target, Walk,
};
use super::links::ingressroute_links;
use super::model::*;
use super::slots::{Slot, SlotIndex};
use crate::api::contour_v1::{self, BackendProtocol};
use crate::api::heptio_v1beta1::{self, VirtualHost};
use crate::api::status::reason;
use crate::api::{Delegate, Kind, ObjKey, ObjectRef};
use crate::store::{Objects, Prepare, Prepared};
use crate::validate::common::{Timeout, parse_timeout};
use crate::validate::ingressroute::{
    v1_backends_field, v1_header_match, v1_path_match, v1beta1_services, validate_v1,
    validate_v1beta1,
};
use crate::validate::{FieldError, Verdict, quote};

/// Tracks every IngressRoute, reports the verdict of its single-object rules (worked out when the
/// store took the object in) and lets valid roots in allowed namespaces claim their fqdn.
pub fn claim_hosts(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    for (slot, key, o) in b.own(Kind::IngressRouteV1beta1, &snap.ingressroutes_v1beta1) {
        claim(b, slot, Kind::IngressRouteV1beta1, key, o.ready());
    }
    for (slot, key, o) in b.own(Kind::IngressRouteV1, &snap.ingressroutes_v1) {
        claim(b, slot, Kind::IngressRouteV1, key, o.ready());
    }
}

/// What the build reads of an IngressRoute of either version, worked out once when the store
/// takes the object in ([`Prepare`]): the verdict of its single-object rules, the little of its
/// metadata a status and a host claim need, its virtual host and, when it passes its rules, its
/// routes lowered for the delegation walk. A build reads these instead of the typed object,
/// and does not run the rules or lower the routes again.
pub struct ReadyIngressRoute {
    /// What breaks its single-object rules (the verdict's errors; its warnings are for
    /// admission only).
    errors: Box<[FieldError]>,
    generation: Option<i64>,
    created: Option<Time>,
    virtualhost: Option<VirtualHost>,
    /// Empty when the object breaks its own rules.
    routes: Box<[NodeRoute<'static>]>,
    /// The hashes of its links (`LinkRef::hash`): itself, what it delegates to, its host.
    link_hashes: smallvec::SmallVec<[u64; 2]>,
    /// A v1 object's `BackendTLSVerified` condition, when it passes its rules and has TLS
    /// backends ([`backend_tls_condition`]).
    backend_tls: Option<Arc<GatewayCondition>>,
}

impl ReadyIngressRoute {
    /// Whether the object passes its single-object rules.
    fn allowed(&self) -> bool {
        self.errors.is_empty()
    }

    /// The hashes of its links, by which a parallel build deals it into a half.
    pub(super) fn link_hashes(&self) -> &[u64] {
        &self.link_hashes
    }

    fn new<'a>(
        key: &'a ObjKey,
        meta: &ObjectMeta,
        virtualhost: Option<&'a VirtualHost>,
        delegates: impl Iterator<Item = &'a Delegate>,
        verdict: Verdict,
        lower: impl FnOnce() -> Vec<NodeRoute<'static>>,
    ) -> Self {
        let routes = if verdict.allowed() {
            lower().into_boxed_slice()
        } else {
            Box::default()
        };
        let mut link_hashes = smallvec::SmallVec::new();
        let fqdn = virtualhost.map(|v| v.fqdn.as_str());
        ingressroute_links(key, delegates, fqdn, &mut |l| link_hashes.push(l.hash()));
        ReadyIngressRoute {
            errors: verdict.errors.into_boxed_slice(),
            generation: meta.generation,
            created: meta.creation_timestamp.clone(),
            virtualhost: virtualhost.cloned(),
            routes,
            link_hashes,
            backend_tls: None,
        }
    }
}

impl Prepare for heptio_v1beta1::IngressRoute {
    type Ready = ReadyIngressRoute;

    fn prepare(key: &ObjKey, o: &Self) -> ReadyIngressRoute {
        let vh = o.spec.virtualhost.as_ref();
        let delegates = o.spec.routes.iter().filter_map(|r| r.delegate.as_ref());
        ReadyIngressRoute::new(key, &o.metadata, vh, delegates, validate_v1beta1(o), || {
            lower_v1beta1(key, o)
        })
    }
}

impl Prepare for contour_v1::IngressRoute {
    type Ready = ReadyIngressRoute;

    fn prepare(key: &ObjKey, o: &Self) -> ReadyIngressRoute {
        let vh = o.spec.virtualhost.as_ref();
        let delegates = o.spec.routes.iter().filter_map(|r| r.delegate.as_ref());
        let mut ready =
            ReadyIngressRoute::new(key, &o.metadata, vh, delegates, validate_v1(o), || {
                lower_v1(key, o)
            });
        if ready.allowed() {
            ready.backend_tls = backend_tls_condition(key, o);
        }
        ready
    }
}

/// The node of a prepared IngressRoute for the walk.
fn node<'s, T: Prepare<Ready = ReadyIngressRoute>>(
    kind: Kind,
    key: &ObjKey,
    slot: Option<Slot>,
    o: &'s Prepared<T>,
) -> Node<'s> {
    Node {
        obj: ObjectRef {
            kind,
            key: key.clone(),
        },
        slot,
        routes: &o.ready().routes,
    }
}

fn claim(b: &mut Builder<'_>, slot: Slot, kind: Kind, key: &ObjKey, o: &ReadyIngressRoute) {
    b.track_generation(slot, o.generation);
    if !o.allowed() {
        for e in &o.errors {
            b.fail(slot, e.clone());
        }
        return;
    }
    if let Some(c) = &o.backend_tls {
        b.set_condition(slot, c.clone());
    }
    let Some(vh) = &o.virtualhost else {
        return;
    };
    let ns = &key.namespace;
    if !b.options.root_allowed_in(ns) {
        let allowed = b.options.root_namespaces.join(", ");
        b.set_invalid(
            slot,
            reason::ROOT_NAMESPACE,
            format!(
                "root IngressRoute in namespace {} is not allowed; root namespaces are: {allowed}",
                quote(ns)
            ),
        );
        return;
    }
    let obj = ObjectRef {
        kind,
        key: key.clone(),
    };
    b.claim_host(&vh.fqdn, obj, o.created.clone());
}

/// Serves the v1beta1 roots that own their host, then marks unreached vertices orphaned.
pub fn build_v1beta1(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    let objects = &snap.ingressroutes_v1beta1;
    let finder = VersionFinder {
        lookup: Lookup::new(b, Kind::IngressRouteV1beta1, objects),
        other: &snap.ingressroutes_v1,
        other_kind: Kind::IngressRouteV1,
    };
    let walk = Walk::new(finder, false, b.backing.ingressroutes_v1beta1.len());
    build_version(b, Kind::IngressRouteV1beta1, objects, walk);
}

/// Serves the v1 roots that own their host, then marks unreached vertices orphaned.
pub fn build_v1(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    let objects = &snap.ingressroutes_v1;
    let finder = VersionFinder {
        lookup: Lookup::new(b, Kind::IngressRouteV1, objects),
        other: &snap.ingressroutes_v1beta1,
        other_kind: Kind::IngressRouteV1beta1,
    };
    let walk = Walk::new(finder, true, b.backing.ingressroutes_v1.len());
    build_version(b, Kind::IngressRouteV1, objects, walk);
}

/// The IngressRoutes of one version a delegation can name, found by key: through the build's
/// numbering (one hash of the key) when the build holds the object, with its slot; in the
/// snapshot's map otherwise.
struct Lookup<'s, T> {
    index: Rc<SlotIndex<'s>>,
    kind: Kind,
    start: Slot,
    /// The builder's objects of `kind`, by slot from `start`.
    own: Vec<&'s T>,
    objects: &'s Objects<T>,
}

impl<'s, T> Lookup<'s, T> {
    fn new(b: &Builder<'s>, kind: Kind, objects: &'s Objects<T>) -> Self {
        let index = b.slot_index().clone();
        Lookup {
            kind,
            start: index.start(kind),
            index,
            own: b.own(kind, objects).map(|(_, _, o)| o.as_ref()).collect(),
            objects,
        }
    }

    /// The position in `own` of the object of `key`, when the build holds it.
    fn number(&self, key: &ObjKey) -> Option<usize> {
        let slot = self.index.find(self.kind, key)?;
        let number = slot.wrapping_sub(self.start) as usize;
        (number < self.own.len()).then_some(number)
    }

    /// The object of `key`, with its slot when the build holds it; `number`: its position in
    /// `own` ([`Lookup::number`]), when it has one.
    fn get(&self, key: &ObjKey, number: Option<usize>) -> Option<(Option<Slot>, &'s T)> {
        match number {
            Some(i) => Some((Some(self.start + i as Slot), *self.own.get(i)?)),
            None => Some((None, self.objects.get(key)?.as_ref())),
        }
    }
}

/// What a delegation to an IngressRoute of one version finds (see [`Finder`]).
struct VersionFinder<'s, T: Prepare, O> {
    lookup: Lookup<'s, Prepared<T>>,
    /// The other version's objects, named in a hint when a delegation finds none of this one.
    other: &'s Objects<O>,
    other_kind: Kind,
}

impl<'s, T: Prepare<Ready = ReadyIngressRoute>, O> Finder<'s> for VersionFinder<'s, T, O> {
    fn numbered(&self) -> usize {
        self.lookup.own.len()
    }

    fn number(&self, key: &ObjKey) -> Option<usize> {
        self.lookup.number(key)
    }

    fn find(&self, key: &ObjKey, number: Option<usize>) -> Found<'s> {
        match self.lookup.get(key, number) {
            None => Found::Missing(other_group_hint(
                self.other.contains_key(key),
                self.other_kind,
            )),
            Some((_, o)) if o.ready().virtualhost.is_some() => Found::Root,
            Some((_, o)) if !o.ready().allowed() => Found::Invalid,
            Some((slot, o)) => Found::Vertex(Rc::new(node(self.lookup.kind, key, slot, o))),
        }
    }
}

/// Why a delegate of the same name in the other API group does not count.
fn other_group_hint(exists: bool, other: Kind) -> Option<String> {
    exists.then(|| {
        format!(
            "there is an {} of that name, but delegation stays within one API group",
            other
        )
    })
}

/// The processor body both versions share.
fn build_version<'s, T, F>(
    b: &mut Builder<'s>,
    kind: Kind,
    objects: &'s Objects<Prepared<T>>,
    mut walk: Walk<'s, F>,
) where
    T: Prepare<Ready = ReadyIngressRoute>,
    F: Finder<'s>,
{
    // Roots to serve, decided before any walk: valid, and owner of their host (whose virtual
    // host is numbered here, while the claim is at hand).
    let mut roots = Vec::with_capacity(objects.len());
    for (slot, key, o) in b.own(kind, objects) {
        let Some(vh) = &o.ready().virtualhost else {
            continue;
        };
        if b.state_of(slot) == Some(State::Invalid) {
            continue;
        }
        if let Some(host) = b.owned_host_id(&vh.fqdn, kind, key) {
            roots.push((slot, key, o, vh, host));
        }
    }
    for (slot, key, o, vh, host) in roots {
        let node = Rc::new(node(kind, key, Some(slot), o));
        if let Some(tls) = &vh.tls {
            match b.tls_secret(&key.namespace, &tls.secret_name) {
                Err(m) => {
                    let path = "spec.virtualhost.tls.secretName".to_string();
                    b.fail(&node.obj, FieldError { path, ..m });
                    continue;
                }
                Ok(secret) => {
                    b.vhost_at(host).tls = Some(VhostTls {
                        secret,
                        min_version: tls.minimum_protocol_version.unwrap_or(IR_DEFAULT_MIN_TLS),
                    });
                }
            }
        }
        walk.walk_root(b, node, &vh.fqdn, host);
    }
    let reached = walk.finish();
    for (slot, key, o) in b.own(kind, objects) {
        if o.ready().virtualhost.is_none() && !reached.contains(slot, key) {
            b.set_orphaned(slot);
        }
    }
}

pub(super) fn delegate_key(own_ns: &str, d: &Delegate) -> ObjKey {
    ObjKey::new(d.namespace_in(own_ns), d.name.clone())
}

/// Lowers the routes of a v1beta1 IngressRoute (valid by its own rules) for the walk.
fn lower_v1beta1(key: &ObjKey, o: &heptio_v1beta1::IngressRoute) -> Vec<NodeRoute<'static>> {
    let spec = &o.spec;
    let inherited = spec.health_check.clone().map(Arc::new);
    let backend = |field: BackendField, s: heptio_v1beta1::Service| {
        let lb = s.strategy.or(spec.strategy).unwrap_or_default();
        let health_check = s.health_check.map(Arc::new).or_else(|| inherited.clone());
        NodeBackend {
            field,
            name: Cow::Owned(s.name),
            port: s.port,
            weight: s.weight,
            protocol: UpstreamProtocol::Http,
            lb,
            health_check: health_check.map(HealthCheckRef::Shared),
            validation: None,
        }
    };
    spec.routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let target = match &r.delegate {
                Some(d) => Target::Delegate(delegate_key(&key.namespace, d)),
                // The deprecated `service` field needs decoding: the rules' own reading of it.
                None if r.service.is_some() => Target::Backends(
                    v1beta1_services(r, i)
                        .0
                        .into_iter()
                        .map(|(field, s)| backend(BackendField::Written(field), s))
                        .collect(),
                ),
                None => Target::Backends(
                    r.services
                        .iter()
                        .enumerate()
                        .map(|(j, s)| {
                            let field = BackendField::Indexed {
                                route: i,
                                list: "services",
                                item: j,
                            };
                            backend(field, s.clone())
                        })
                        .collect(),
                ),
            };
            NodeRoute {
                index: i,
                path_suffix: ".match",
                path_written: Some(Cow::Owned(r.match_.clone())),
                path: PathMatch::prefix(&r.match_),
                headers: Vec::new(),
                permit_insecure: r.permit_insecure,
                timeout: None,
                retry: None,
                outlier: None,
                target,
            }
        })
        .collect()
}

fn upstream_protocol(p: BackendProtocol) -> UpstreamProtocol {
    match p {
        BackendProtocol::Http => UpstreamProtocol::Http,
        BackendProtocol::Https => UpstreamProtocol::Https,
        BackendProtocol::H2c => UpstreamProtocol::H2c,
        BackendProtocol::H2 => UpstreamProtocol::H2,
        BackendProtocol::Tcp => UpstreamProtocol::Tcp,
    }
}

/// Consecutive 5xx answers that eject a host when a failure policy names no (or a zero)
/// `count`: Envoy's own default.
pub const DEFAULT_CONSECUTIVE_5XX: u32 = 5;

/// The minimum TLS version of a root that names none. Seed 000 says 1.1; TLS 1.0 and 1.1 are
/// deprecated (RFC 8996) and Envoy's default cipher suites need TLS 1.2, so a vhost accepts TLS
/// 1.1 only when it asks for it (`minimumProtocolVersion: "1.1"`, which also offers the CBC suites
/// TLS 1.1 clients need). docs/ingressroute.md, "TLS".
pub const IR_DEFAULT_MIN_TLS: crate::api::TlsVersion = crate::api::TlsVersion::V1_2;

/// The consecutive 5xx answers that eject a host under a failure policy of `count`: the count
/// itself, or [`DEFAULT_CONSECUTIVE_5XX`] when it is absent or 0. `count: 0` turns retries off;
/// it does not make a single 5xx eject a host.
fn ejection_threshold(count: Option<u32>) -> u32 {
    count.filter(|c| *c > 0).unwrap_or(DEFAULT_CONSECUTIVE_5XX)
}

/// A TLS backend's `validation` as the walk reads it: its subject name in lower case.
fn lower_validation(
    be: &contour_v1::Backend,
    protocol: BackendProtocol,
) -> Option<Box<contour_v1::UpstreamValidation>> {
    let v = be.validation.as_ref().filter(|_| protocol.is_tls())?;
    Some(Box::new(contour_v1::UpstreamValidation {
        ca_secret: v.ca_secret.clone(),
        subject_name: v.subject_name.to_ascii_lowercase(),
    }))
}

fn duration(path: &str, value: Option<&str>) -> Option<Timeout> {
    value.and_then(|v| parse_timeout(path, v).ok())
}

/// Lowers the routes of a v1 IngressRoute (valid by its own rules) for the walk.
fn lower_v1(key: &ObjKey, o: &contour_v1::IngressRoute) -> Vec<NodeRoute<'static>> {
    let spec = &o.spec;
    let inherited = spec.health_check.clone().map(Arc::new);
    spec.routes
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let backends = lower_v1_backends(spec, i, r, &inherited);
            let target = match &r.delegate {
                Some(d) => Target::Delegate(delegate_key(&key.namespace, d)),
                None if backends
                    .iter()
                    .any(|nb| nb.protocol == UpstreamProtocol::Tcp) =>
                {
                    Target::Tcp(backends)
                }
                None => Target::Backends(backends),
            };
            let headers = r
                .match_
                .iter()
                .flat_map(|m| m.headers.iter().enumerate())
                .filter_map(|(k, c)| v1_header_match(c).map(|h| (k, h)))
                .collect();
            let timeout = duration(
                "",
                r.timeout_policy.as_ref().and_then(|t| t.request.as_deref()),
            );
            let (retry, outlier) = lower_failure_policy(r.failure_policy.as_ref());
            NodeRoute {
                index: i,
                path_suffix: ".match.path",
                path_written: r
                    .match_
                    .as_ref()
                    .and_then(|m| m.path.clone())
                    .map(Cow::Owned),
                path: v1_path_match(r.match_.as_ref()),
                headers,
                permit_insecure: r.permit_insecure,
                timeout,
                retry,
                outlier,
                target,
            }
        })
        .collect()
}

/// The backends of route `i` of a v1 IngressRoute, each with its settings (a backend's own, else
/// the route's or the object's: strategy, health check inherited from the spec).
fn lower_v1_backends(
    spec: &contour_v1::IngressRouteSpec,
    i: usize,
    r: &contour_v1::Route,
    inherited: &Option<Arc<crate::api::HealthCheck>>,
) -> Vec<NodeBackend<'static>> {
    let field = v1_backends_field(r);
    r.backend_list()
        .iter()
        .enumerate()
        .filter_map(|(j, be)| {
            let (protocol, name) = be.protocol_and_name()?;
            Some(NodeBackend {
                field: BackendField::Indexed {
                    route: i,
                    list: field,
                    item: j,
                },
                name: Cow::Owned(name.to_owned()),
                port: be.port,
                weight: be.weight,
                protocol: upstream_protocol(protocol),
                lb: be.strategy.or(spec.strategy).unwrap_or_default(),
                health_check: match &be.health_check {
                    Some(h) => Some(Arc::new(h.clone())),
                    None => inherited.clone(),
                }
                .map(HealthCheckRef::Shared),
                validation: lower_validation(be, protocol),
            })
        })
        .collect()
}

/// A v1 route's `failurePolicy` as a retry policy and passive health checks (each on unless
/// turned off).
fn lower_failure_policy(
    failure_policy: Option<&contour_v1::FailurePolicy>,
) -> (Option<RetryPolicy>, Option<OutlierDetection>) {
    match failure_policy {
        None => (None, None),
        Some(f) => {
            let retry = f.retry_policy_enabled.unwrap_or(true).then(|| RetryPolicy {
                count: f.count.unwrap_or(1),
                per_try_timeout: match duration("", f.per_try_timeout.as_deref()) {
                    Some(Timeout::After(d)) => Some(d),
                    _ => None,
                },
                ..RetryPolicy::new(0, None)
            });
            let outlier =
                f.passive_health_check_enabled
                    .unwrap_or(true)
                    .then(|| OutlierDetection {
                        consecutive_5xx: ejection_threshold(f.count),
                    });
            (retry, outlier)
        }
    }
}

/// Backends listed in full in a `BackendTLSVerified` message, of each kind (verified, not);
/// more are counted.
const LISTED_TLS_BACKENDS: usize = 8;

/// The `BackendTLSVerified` condition of an IngressRoute v1 (that passes its rules): True when
/// Envoy verifies the certificate of every one of its TLS backends (`https`, `https2`), False
/// (`NotVerified`) when it accepts any certificate from one. The message names, for each
/// backend, the CA Secret and subject name its certificate is checked against, or the SNI sent
/// to it unverified. None without TLS backends.
fn backend_tls_condition(
    key: &ObjKey,
    o: &contour_v1::IngressRoute,
) -> Option<Arc<GatewayCondition>> {
    use crate::api::status::COND_BACKEND_TLS_VERIFIED;
    let ns = &*key.namespace;
    let (mut verified, mut unverified) = (Vec::new(), Vec::new());
    for (i, r) in o.spec.routes.iter().enumerate() {
        let field = v1_backends_field(r);
        for (j, be) in r.backend_list().iter().enumerate() {
            let Some((_, name)) = be.protocol_and_name().filter(|(p, _)| p.is_tls()) else {
                continue;
            };
            let at = format!("spec.routes[{i}].{field}[{j}]");
            match &be.validation {
                Some(v) => verified.push(format!(
                    "{at} ({name}) against CA Secret {ns}/{} (ca.crt) and subject name {} (also its SNI)",
                    v.ca_secret,
                    v.subject_name.to_ascii_lowercase()
                )),
                None => unverified.push(format!("{at} ({name}, SNI {name}.{ns}.svc)")),
            }
        }
    }
    let list = |items: &[String]| {
        let mut s = items[..items.len().min(LISTED_TLS_BACKENDS)].join("; ");
        if items.len() > LISTED_TLS_BACKENDS {
            s.push_str(&format!("; and {} more", items.len() - LISTED_TLS_BACKENDS));
        }
        s
    };
    let (status, reason, message) = match (verified.is_empty(), unverified.is_empty()) {
        (true, true) => return None,
        (false, true) => (
            true,
            reason::VERIFIED,
            format!("backend certificates are verified: {}", list(&verified)),
        ),
        (_, false) => {
            let mut m = format!(
                "Envoy accepts any certificate from {}: add validation {{caSecret, subjectName}} to verify it",
                list(&unverified)
            );
            if !verified.is_empty() {
                m.push_str(&format!("; verified: {}", list(&verified)));
            }
            (false, reason::NOT_VERIFIED, m)
        }
    };
    Some(Arc::new(GatewayCondition {
        type_: COND_BACKEND_TLS_VERIFIED,
        status,
        reason,
        message,
    }))
}

#[cfg(test)]
#[path = "ingressroute_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "secure_backends_tests.rs"]
mod secure_backends_tests;
