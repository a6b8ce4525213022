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
    BackendField, Found, HealthCheckRef, Node, NodeBackend, NodeRoute, Target, Walk,
};
use super::incremental::ingressroute_links;
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
        ReadyIngressRoute::new(key, &o.metadata, vh, delegates, validate_v1(o), || {
            lower_v1(key, o)
        })
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
            b.set_invalid(slot, e.reason, e.to_string());
        }
        return;
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
    let other = &snap.ingressroutes_v1;
    let lookup = Lookup::new(b, Kind::IngressRouteV1beta1, objects);
    let find = |key: &ObjKey| match lookup.get(key) {
        None => Found::Missing(other_group_hint(
            other.contains_key(key),
            Kind::IngressRouteV1,
        )),
        Some((_, o)) if o.ready().virtualhost.is_some() => Found::Root,
        Some((_, o)) if !o.ready().allowed() => Found::Invalid,
        Some((slot, o)) => Found::Vertex(Rc::new(node(Kind::IngressRouteV1beta1, key, slot, o))),
    };
    let walk = Walk::new(find, false, b.backing.ingressroutes_v1beta1.len());
    build_version(b, Kind::IngressRouteV1beta1, objects, walk);
}

/// Serves the v1 roots that own their host, then marks unreached vertices orphaned.
pub fn build_v1(b: &mut Builder<'_>) {
    let snap = b.snapshot;
    let objects = &snap.ingressroutes_v1;
    let other = &snap.ingressroutes_v1beta1;
    let lookup = Lookup::new(b, Kind::IngressRouteV1, objects);
    let find = |key: &ObjKey| match lookup.get(key) {
        None => Found::Missing(other_group_hint(
            other.contains_key(key),
            Kind::IngressRouteV1beta1,
        )),
        Some((_, o)) if o.ready().virtualhost.is_some() => Found::Root,
        Some((_, o)) if !o.ready().allowed() => Found::Invalid,
        Some((slot, o)) => Found::Vertex(Rc::new(node(Kind::IngressRouteV1, key, slot, o))),
    };
    let walk = Walk::new(find, true, b.backing.ingressroutes_v1.len());
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

    fn get(&self, key: &ObjKey) -> Option<(Option<Slot>, &'s T)> {
        let numbered = (self.index.find(self.kind, key)).and_then(|slot| {
            Some((
                Some(slot),
                *self.own.get(slot.wrapping_sub(self.start) as usize)?,
            ))
        });
        numbered.or_else(|| Some((None, self.objects.get(key)?.as_ref())))
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
    F: Fn(&ObjKey) -> Found<'s>,
{
    // Roots to serve, decided before any walk: valid, and owner of their host.
    let mut roots = Vec::new();
    for (slot, key, o) in b.own(kind, objects) {
        let Some(vh) = &o.ready().virtualhost else {
            continue;
        };
        let owns = b
            .host_owner(&vh.fqdn)
            .is_some_and(|owner| owner.kind == kind && owner.key == *key);
        if owns && b.state_of(slot) != Some(State::Invalid) {
            roots.push((slot, key, o, vh));
        }
    }
    for (slot, key, o, vh) in roots {
        let node = Rc::new(node(kind, key, Some(slot), o));
        if let Some(tls) = &vh.tls {
            match b.tls_secret(&key.namespace, &tls.secret_name) {
                Err(m) => {
                    b.set_invalid(
                        &node.obj,
                        m.reason,
                        format!("spec.virtualhost.tls.secretName: {}", m.message),
                    );
                    continue;
                }
                Ok(secret) => {
                    b.vhost(&vh.fqdn).tls = Some(VhostTls {
                        secret,
                        min_version: tls.minimum_protocol_version.unwrap_or_default(),
                    });
                }
            }
        }
        walk.walk_root(b, node, &vh.fqdn);
    }
    let reached = walk.finish();
    for (slot, key, o) in b.own(kind, objects) {
        if o.ready().virtualhost.is_none() && !reached.contains(slot, key) {
            b.set_orphaned(slot);
        }
    }
}

pub(super) fn delegate_key(own_ns: &str, d: &Delegate) -> ObjKey {
    ObjKey::new(delegate_namespace(own_ns, d), d.name.clone())
}

/// The namespace a delegation names: its own, or the delegating object's (`own_ns`) when it
/// names none.
pub(super) fn delegate_namespace<'a>(own_ns: &'a str, d: &'a Delegate) -> &'a str {
    d.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(own_ns)
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
            let field = v1_backends_field(r);
            let backends: Vec<NodeBackend> = r
                .backend_list()
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
                    })
                })
                .collect();
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
            let (retry, outlier) = match &r.failure_policy {
                None => (None, None),
                Some(f) => {
                    let retry = f.retry_policy_enabled.unwrap_or(true).then(|| RetryPolicy {
                        count: f.count.unwrap_or(1),
                        per_try_timeout: match duration("", f.per_try_timeout.as_deref()) {
                            Some(Timeout::After(d)) => Some(d),
                            _ => None,
                        },
                    });
                    let outlier =
                        f.passive_health_check_enabled
                            .unwrap_or(true)
                            .then(|| OutlierDetection {
                                consecutive_5xx: f.count.unwrap_or(5).max(1),
                            });
                    (retry, outlier)
                }
            };
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::dag::{self, Dag, Options};
    use crate::store::{AnyObject, Snapshot};

    use super::*;
    use crate::dag::incremental::LinkRef;

    fn mk_dag(yaml: &str) -> Dag {
        dag::build(&Snapshot::from_test_yaml(yaml), &Options::default())
    }

    fn status(d: &Dag, kind: Kind, ns: &str, name: &str) -> (State, Vec<String>) {
        let s = &d.statuses[&ObjectRef::new(kind, ns, name)];
        (
            s.state,
            s.messages.iter().map(|m| m.message.clone()).collect(),
        )
    }

    const SVC: &str = "
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: a}
spec: {ports: [{port: 80}]}
";

    #[test]
    fn the_store_prepares_each_version_of_an_ingressroute_it_takes_in() {
        let root = |prefix: &str| {
            format!(
                "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: r, namespace: a, generation: 3}}
spec:
  virtualhost: {{fqdn: r.example.com}}
  routes:
  - match: {prefix}
    services: [{{name: app, port: 80}}]
  - match: /d
    delegate: {{name: v, namespace: b}}
"
            )
        };
        let mut snap = Snapshot::from_test_yaml(&root("/app"));
        let key = ObjKey::new("a", "r");
        let first = snap.ingressroutes_v1beta1[&key].clone();
        let ready = first.ready();
        assert!(ready.allowed());
        assert_eq!(ready.generation, Some(3));
        assert_eq!(ready.virtualhost.as_ref().unwrap().fqdn, "r.example.com");
        let paths: Vec<_> = ready.routes.iter().map(|r| r.path.clone()).collect();
        assert_eq!(paths, [PathMatch::prefix("/app"), PathMatch::prefix("/d")]);
        assert!(matches!(&ready.routes[0].target, Target::Backends(b) if b[0].name == "app"));
        // A delegation without a namespace names the object's own.
        assert!(
            matches!(&ready.routes[1].target, Target::Delegate(k) if *k == ObjKey::new("b", "v"))
        );
        // The hashes of its links: itself, its delegate, its host, in any letter case.
        let links = [
            LinkRef::IngressRoute("a", "r"),
            LinkRef::IngressRoute("b", "v"),
            LinkRef::Host("R.Example.com"),
        ];
        let want: Vec<u64> = links.into_iter().map(LinkRef::hash).collect();
        assert_eq!(ready.link_hashes(), want);
        assert_ne!(want[0], LinkRef::IngressRoute("a", "v").hash());

        // A new version of the object is prepared again: a path that breaks the rules leaves
        // the verdict's errors and no routes, and the object compares as its object.
        let next = Snapshot::from_test_yaml(&root("app"));
        let bad = next.ingressroutes_v1beta1[&key].clone();
        assert!(!bad.ready().allowed());
        assert!(bad.ready().routes.is_empty());
        assert!(*bad != *first);
        snap.insert(AnyObject::IngressRouteV1beta1(bad.object().clone()));
        assert!(*snap.ingressroutes_v1beta1[&key] == *bad);
        let d = dag::build(&snap, &Options::default());
        let (state, messages) = status(&d, Kind::IngressRouteV1beta1, "a", "r");
        assert_eq!(state, State::Invalid);
        assert!(messages[0].contains("spec.routes[0].match"), "{messages:?}");
    }

    #[test]
    fn v1_failure_and_timeout_policies_reach_the_model() {
        let d = mk_dag(&format!(
            "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: r, namespace: a}}
spec:
  virtualhost: {{fqdn: t.example.com}}
  routes:
  - match: {{path: /}}
    timeoutPolicy: {{request: 1s}}
    failurePolicy: {{count: 3, perTryTimeout: 150ms}}
    services: [{{https: app, port: 80, strategy: Random}}]
  - match: {{path: /no-retry}}
    failurePolicy: {{retryPolicyEnabled: false, passiveHealthCheckEnabled: false}}
    services: [{{http: app, port: 80}}]
  - match: {{path: /defaults}}
    failurePolicy: {{}}
    services: [{{http: app, port: 80}}]
{SVC}"
        ));
        let routes = &d.vhosts["t.example.com"].routes;
        let by_path = |p: &str| routes.iter().find(|r| r.path.value() == p).unwrap();
        let root = by_path("/");
        assert_eq!(root.timeout, Some(Timeout::After(Duration::from_secs(1))));
        assert_eq!(
            root.retry,
            Some(RetryPolicy {
                count: 3,
                per_try_timeout: Some(Duration::from_millis(150))
            })
        );
        let RouteAction::Forward(cs) = &root.action else {
            panic!("forward expected")
        };
        let c = &d.clusters[&cs[0].cluster];
        assert_eq!(c.protocol, UpstreamProtocol::Https);
        assert_eq!(c.lb, crate::api::LbStrategy::Random);
        assert_eq!(
            c.outlier_detection,
            Some(OutlierDetection { consecutive_5xx: 3 })
        );
        let off = by_path("/no-retry");
        assert_eq!(off.retry, None);
        let RouteAction::Forward(cs) = &off.action else {
            panic!("forward expected")
        };
        assert_eq!(d.clusters[&cs[0].cluster].outlier_detection, None);
        let defaults = by_path("/defaults");
        assert_eq!(
            defaults.retry,
            Some(RetryPolicy {
                count: 1,
                per_try_timeout: None
            })
        );
        let RouteAction::Forward(cs) = &defaults.action else {
            panic!("forward expected")
        };
        assert_eq!(
            d.clusters[&cs[0].cluster].outlier_detection,
            Some(OutlierDetection { consecutive_5xx: 5 })
        );
    }

    #[test]
    fn strategy_and_health_check_fall_back_to_the_spec() {
        let d = mk_dag(&format!(
            "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: r, namespace: a}}
spec:
  virtualhost: {{fqdn: h.example.com}}
  strategy: WeightedLeastRequest
  healthCheck: {{path: /healthz, intervalSeconds: 7}}
  routes:
  - match: /
    services:
    - {{name: app, port: 80}}
    - {{name: app, port: 80, strategy: Random, healthCheck: {{path: /own}}}}
{SVC}"
        ));
        let RouteAction::Forward(cs) = &d.vhosts["h.example.com"].routes[0].action else {
            panic!("forward expected")
        };
        let inherited = &d.clusters[&cs[0].cluster];
        assert_eq!(inherited.lb, crate::api::LbStrategy::WeightedLeastRequest);
        let hc = inherited.health_check.as_ref().unwrap();
        assert_eq!((hc.path.as_str(), hc.interval.as_secs()), ("/healthz", 7));
        let own = &d.clusters[&cs[1].cluster];
        assert_eq!(own.lb, crate::api::LbStrategy::Random);
        assert_eq!(own.health_check.as_ref().unwrap().path, "/own");
        assert_eq!(inherited.protocol, UpstreamProtocol::Http);
    }

    #[test]
    fn tcp_backends_become_the_vhost_tcp_proxy() {
        let crt = include_str!("../../tests/golden/dag/ir-tls.in.yaml");
        // Reuse the Secret of the TLS golden case.
        let secret = crt
            .split("\n---\n")
            .find(|d| d.contains("kind: Secret"))
            .unwrap();
        let d = mk_dag(&format!(
            "{secret}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: tcp, namespace: web}}
spec:
  virtualhost:
    fqdn: tcp.example.com
    tls: {{secretName: site-tls}}
  routes:
  - services: [{{tcp: db, port: 5432, weight: 3}}, {{tcp: db2, port: 5432}}]
---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: web}}
spec: {{ports: [{{port: 5432}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: db2, namespace: web}}
spec: {{ports: [{{port: 5432}}]}}
"
        ));
        let v = &d.vhosts["tcp.example.com"];
        assert!(v.routes.is_empty());
        assert!(v.tls.is_some());
        let proxy = v.tcp_proxy.as_ref().expect("tcp proxy");
        let got: Vec<(UpstreamProtocol, u32)> = proxy
            .iter()
            .map(|w| (d.clusters[&w.cluster].protocol, w.weight))
            .collect();
        assert_eq!(
            got,
            vec![(UpstreamProtocol::Tcp, 3), (UpstreamProtocol::Tcp, 0)]
        );
        assert_eq!(
            status(&d, Kind::IngressRouteV1, "web", "tcp").0,
            State::Valid
        );
    }

    #[test]
    fn v1_vertex_without_path_leaves_a_path_delegation() {
        let d = mk_dag(&format!(
            "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: a}}
spec:
  virtualhost: {{fqdn: p.example.com}}
  routes:
  - match: {{path: /foo}}
    delegate: {{name: v}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v, namespace: a}}
spec:
  routes:
  - match: {{headers: [{{header: x, value: a}}]}}
    services: [{{http: app, port: 80}}]
{SVC}"
        ));
        assert_eq!(
            status(&d, Kind::IngressRouteV1, "a", "v"),
            (
                State::Invalid,
                vec![
                    "spec.routes[0].match.path: absent (everything) is outside the prefix \"/foo\" delegated by IngressRoute a/root".to_string()
                ]
            )
        );
        let r = &d.vhosts["p.example.com"].routes[0];
        assert_eq!(
            r.action,
            RouteAction::Unavailable(
                "delegate a/v has routes outside the space delegated to it".into()
            )
        );
    }

    #[test]
    fn delegation_depth_is_bounded() {
        // root -> v0 -> v1 -> ... -> v39: delegations past the 32nd are not followed.
        let mut yaml = "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: deep.example.com}
  routes:
  - match: /
    delegate: {name: v0}
"
        .to_string();
        for i in 0..40 {
            yaml.push_str(&format!(
                "---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: v{i}, namespace: a}}
spec:
  routes:
  - match: /
    delegate: {{name: v{}}}
",
                i + 1
            ));
        }
        let d = mk_dag(&yaml);
        // v31 is reached by the 32nd delegation; its own delegation would be the 33rd.
        assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v31"),
            (
                State::Invalid,
                vec![
                    "spec.routes[0].delegate: IngressRoute a/v32 is not followed: delegation chains are limited to 32 delegations".to_string()
                ]
            )
        );
        assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v30").0,
            State::Valid
        );
        assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v32").0,
            State::Orphaned
        );
        let r = &d.vhosts["deep.example.com"].routes[0];
        assert_eq!(
            r.source,
            ObjectRef::new(Kind::IngressRouteV1beta1, "a", "v31")
        );
        // v40 does not exist: never reached, so the missing delegate is not reported.
        assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v39").0,
            State::Orphaned
        );
    }

    /// Level k delegates to level k+1 twice; `headers` puts a different header condition on each.
    fn diamonds(levels: usize, headers: bool) -> String {
        // Level k delegates a(k) and a(k)/y; a(k) = a(k-1)/y/x{k} lies inside the narrower a(k-1)/y.
        let path = |k: usize| -> String {
            let mut p: String = (0..k).map(|i| format!("/x{i}/y")).collect();
            p.push_str(&format!("/x{k}"));
            p
        };
        let leaf = if headers {
            "/leaf".to_string()
        } else {
            format!("{}/y/leaf", path(levels - 1))
        };
        let mut yaml = String::new();
        for k in 0..levels {
            let vh = if k == 0 {
                "  virtualhost: {fqdn: diamond.example.com}\n"
            } else {
                ""
            };
            // Path mode: both delegations of level k lie inside the narrower one of level k-1.
            let (m1, m2) = if headers {
                (
                    format!("{{headers: [{{header: x-{k}, value: a}}]}}"),
                    format!("{{headers: [{{header: x-{k}, value: b}}]}}"),
                )
            } else {
                (
                    format!("{{path: {}}}", path(k)),
                    format!("{{path: {}/y}}", path(k)),
                )
            };
            yaml.push_str(&format!(
                "---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v{k}, namespace: a}}
spec:
{vh}  routes:
  - match: {m1}
    delegate: {{name: v{}}}
  - match: {m2}
    delegate: {{name: v{}}}
",
                k + 1,
                k + 1
            ));
        }
        yaml.push_str(&format!(
            "---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v{levels}, namespace: a}}
spec:
  routes:
  - match: {{path: {leaf}}}
    services: [{{http: app, port: 80}}]
{SVC}"
        ));
        yaml
    }

    #[test]
    fn diamonds_are_walked_once_per_space() {
        // 2^30 delegation paths, but only two spaces per vertex: linear work.
        let d = mk_dag(&diamonds(30, false));
        assert_eq!(status(&d, Kind::IngressRouteV1, "a", "v30").0, State::Valid);
        let routes = &d.vhosts["diamond.example.com"].routes;
        assert_eq!(routes.len(), 1, "{routes:?}");
        assert!(routes[0].path.value().ends_with("/x28/y/x29/y/leaf"));
    }

    #[test]
    fn exponential_header_delegation_hits_the_visit_budget() {
        // Every level doubles the distinct header spaces: 2^30 visits without a bound.
        let d = mk_dag(&diamonds(30, true));
        let refused = d
            .statuses
            .values()
            .flat_map(|s| &s.messages)
            .filter(|m| {
                m.message.ends_with(
                    "the delegation graph of IngressRoute a/v0 needs more than 1272 vertex visits",
                )
            })
            .count();
        assert!(refused > 0);
        let routes: usize = d.vhosts.values().map(|v| v.routes.len()).sum();
        // 31 IngressRoutes: 1024 + 8 * 31 = 1272 visits for the root, two routes each at most.
        assert!(routes <= 2 * 1272, "{routes} routes");
    }

    #[test]
    fn inherited_conditions_can_make_two_vertex_routes_the_same() {
        let d = mk_dag(&format!(
            "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: root, namespace: a}}
spec:
  virtualhost: {{fqdn: same.example.com}}
  routes:
  - match: {{path: /foo, headers: [{{header: x, value: a}}]}}
    delegate: {{name: v}}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {{name: v, namespace: a}}
spec:
  routes:
  - match: {{path: /foo}}
    services: [{{http: app, port: 80}}]
  - match: {{path: /foo, headers: [{{header: x, value: a}}]}}
    services: [{{http: app, port: 80}}]
{SVC}"
        ));
        assert_eq!(
            status(&d, Kind::IngressRouteV1, "a", "v"),
            (
                State::Invalid,
                vec![
                    "spec.routes[1].match: is the same match as spec.routes[0] once the conditions delegated by IngressRoute a/root are added".to_string()
                ]
            )
        );
        assert_eq!(d.vhosts["same.example.com"].routes.len(), 1);
    }

    #[test]
    fn repeated_matches_are_found_in_small_and_large_vertices_alike() {
        // The last route repeats the first once the delegated condition is added; the routes
        // between differ. Few routes are compared pair by pair, many through a table.
        for n in [3, 40] {
            let mut yaml = String::from(
                "
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: same.example.com}
  routes:
  - match: {path: /, headers: [{header: x, value: a}]}
    delegate: {name: v}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: v, namespace: a}
spec:
  routes:
  - match: {path: /p, headers: [{header: x, value: a}]}
    services: [{http: app, port: 80}]
",
            );
            for i in 1..n - 1 {
                yaml.push_str(&format!(
                    "  - match: {{path: /p{i}}}\n    services: [{{http: app, port: 80}}]\n"
                ));
            }
            yaml.push_str("  - match: {path: /p}\n    services: [{http: app, port: 80}]\n");
            yaml.push_str(SVC);
            let d = mk_dag(&yaml);
            let last = n - 1;
            assert_eq!(
                status(&d, Kind::IngressRouteV1, "a", "v"),
                (
                    State::Invalid,
                    vec![format!(
                        "spec.routes[{last}].match: is the same match as spec.routes[0] once the conditions delegated by IngressRoute a/root are added"
                    )]
                ),
                "{n} routes"
            );
            assert_eq!(
                d.vhosts["same.example.com"].routes.len(),
                n - 1,
                "{n} routes"
            );
        }
    }

    #[test]
    fn a_vertex_reached_twice_reports_each_problem_once() {
        let d = mk_dag(
            "
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: a}
spec:
  virtualhost: {fqdn: twice.example.com}
  routes:
  - match: /a
    delegate: {name: v}
  - match: /a/b
    delegate: {name: v}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: v, namespace: a}
spec:
  routes:
  - match: /a/b/c
    services: [{name: missing, port: 80}]
",
        );
        assert_eq!(
            status(&d, Kind::IngressRouteV1beta1, "a", "v"),
            (
                State::Invalid,
                vec!["spec.routes[0].services[0]: Service \"a/missing\" not found".to_string()]
            )
        );
        assert_eq!(d.vhosts["twice.example.com"].routes.len(), 1);
    }
}
