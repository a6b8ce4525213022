//! Ingress `networking.k8s.io/v1` processor: class selection, pathType matching, single-label
//! wildcard hosts, defaultBackend, spec.tls with Secrets, and conflicts between Ingresses.
//!
//! Ingresses are processed once each, oldest first (creationTimestamp, a missing timestamp counts as
//! newest, then namespace, then name); every decision is a map lookup, so the pass is linear in the
//! number of Ingresses plus their rules. The rules are written down in `docs/ingress.md`.

use std::collections::BTreeSet;

use hashbrown::HashMap;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressSpec, IngressTLS};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::model::{PathMatch, Route, RouteAction, UpstreamProtocol, VhostTls, WeightedCluster};
use super::slots::Slot;
use super::{BackendRef, Builder, PortRef};
use crate::api::status::reason;
use crate::api::{Kind, LbStrategy, ObjKey, ObjectRef, TlsVersion};
use crate::store::{Prepare, Prepared};
use crate::validate::FieldError;
use crate::validate::ingress::{
    PathType, class_conflict, ingress_class, is_default_class, validate_ingress,
};

pub use super::model::CATCH_ALL_HOST;
/// Minimum TLS version of hosts served from Ingress TLS entries.
pub const INGRESS_MIN_TLS: TlsVersion = TlsVersion::V1_2;
/// Message of routes to `resource` backends.
pub const RESOURCE_BACKEND_UNSUPPORTED: &str =
    "resource backends are not supported by sluice; use service";

/// What a build reads of an Ingress's metadata and verdict, worked out once when the store takes
/// the object in ([`Prepare`]): a build neither runs the single-object rules again nor reads the
/// typed object's metadata (its rules and backends it still reads from the object).
pub struct ReadyIngress {
    /// What breaks its single-object rules (the verdict's errors; its warnings are for admission
    /// only).
    errors: Box<[FieldError]>,
    generation: Option<i64>,
    created: Option<Time>,
    /// Its ingress class, from the annotation or `spec.ingressClassName`.
    class: Option<Box<str>>,
    /// Set when the class annotation and `spec.ingressClassName` disagree: the status warning.
    class_conflict: Option<Box<str>>,
    /// The hashes of its links (`LinkRef::hash`), each once.
    link_hashes: smallvec::SmallVec<[u64; 2]>,
}

impl ReadyIngress {
    /// The hashes of its links, by which a parallel build deals it into a half.
    pub(super) fn link_hashes(&self) -> &[u64] {
        &self.link_hashes
    }
}

impl Prepare for Ingress {
    type Ready = ReadyIngress;

    fn prepare(_key: &ObjKey, o: &Self) -> ReadyIngress {
        let mut link_hashes = smallvec::SmallVec::new();
        super::links::ingress_links(o, &mut |l| link_hashes.push(l.hash()));
        link_hashes.sort_unstable();
        link_hashes.dedup();
        ReadyIngress {
            errors: validate_ingress(o).errors.into_boxed_slice(),
            generation: o.metadata.generation,
            created: o.metadata.creation_timestamp.clone(),
            class: ingress_class(o).map(Box::from),
            class_conflict: class_conflict(o).map(Box::from),
            link_hashes,
        }
    }
}

/// State shared by all Ingresses of one build.
#[derive(Default)]
struct IngressState {
    /// TLS host → (secret key, the Ingress that set it first).
    tls: HashMap<String, (String, ObjectRef)>,
    /// Host → the Ingress whose route matches every path there (Prefix `/` or
    /// ImplementationSpecific `/`). Both match the same requests, so they count as the same path.
    catch_all: HashMap<String, ObjectRef>,
}

/// Builds routes for every Ingress of our class and records a status for every Ingress.
pub fn build_ingresses(b: &mut Builder<'_>) {
    let snapshot = b.snapshot;
    let ours = b.options.ingress_class_name.as_str();
    let default_class = b
        .backing
        .ingress_classes
        .get(&ObjKey::new("", ours))
        .is_some_and(|c| is_default_class(c));
    let mut order: Vec<(Slot, &ObjKey, &Prepared<Ingress>)> = b
        .own(Kind::Ingress, &snapshot.ingresses)
        .map(|(slot, k, o)| (slot, k, o.as_ref()))
        .collect();
    order.sort_by(|(_, ka, a), (_, kb, b)| {
        let ta = a.ready().created.as_ref();
        let tb = b.ready().created.as_ref();
        (ta.is_none(), ta, ka).cmp(&(tb.is_none(), tb, kb))
    });
    let mut state = IngressState::default();
    for (slot, key, ing) in order {
        let obj = ObjectRef {
            kind: Kind::Ingress,
            key: key.clone(),
        };
        let ready = ing.ready();
        b.track_generation(slot, ready.generation);
        match ready.class.as_deref() {
            Some(class) if class == ours => {
                if let Some(conflict) = &ready.class_conflict {
                    b.add_warning(slot, reason::INGRESS_CLASS_CONFLICT, conflict.to_string());
                }
            }
            Some(class) => {
                let why = match &ready.class_conflict {
                    // The field names sluice's class, but the annotation decides (seed 001).
                    Some(conflict) => {
                        format!("ingress class {class:?} is not {ours:?}: {conflict}")
                    }
                    None => format!("ingress class {class:?} is not {ours:?}"),
                };
                b.set_ignored(slot, why);
                continue;
            }
            None if default_class => {}
            None => {
                b.set_ignored(
                    slot,
                    format!(
                        "no ingress class set and IngressClass {ours:?} is not marked default (annotation ingressclass.kubernetes.io/is-default-class: \"true\")"
                    ),
                );
                continue;
            }
        }
        if !ready.errors.is_empty() {
            for e in &ready.errors {
                b.fail(slot, e.clone());
            }
            continue;
        }
        if let Some(spec) = &ing.spec {
            build_ingress(b, &mut state, &obj, spec);
        }
        b.set_valid(slot, "valid Ingress");
    }
}

/// One Ingress of our class that passed the single-object rules.
fn build_ingress(
    b: &mut Builder<'_>,
    state: &mut IngressState,
    obj: &ObjectRef,
    spec: &IngressSpec,
) {
    // TLS first: a host whose certificate cannot be used gets none of this Ingress's routes.
    let mut tls_ok: HashMap<String, bool> = HashMap::new();
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        ingress_tls(b, state, obj, i, tls, &mut tls_ok);
    }
    let hosts = ingress_rules(b, state, obj, spec, &tls_ok);
    // defaultBackend: the shortest prefix on the catch-all host and on every host of this
    // Ingress's rules, so it takes exactly the requests no path takes.
    if let Some(backend) = &spec.default_backend {
        default_backend(b, state, obj, backend, hosts);
    }
}

/// TLS entry `i` of an Ingress: its Secret on each of its hosts no root owns, unless another
/// Secret was there first. Records in `tls_ok` whether each host's certificate can be used.
fn ingress_tls(
    b: &mut Builder<'_>,
    state: &mut IngressState,
    obj: &ObjectRef,
    i: usize,
    tls: &IngressTLS,
    tls_ok: &mut HashMap<String, bool>,
) {
    let ns = obj.key.namespace.as_ref();
    let hosts = tls.hosts.as_deref().unwrap_or(&[]);
    let Some(secret_name) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
        return;
    };
    if hosts.is_empty() {
        return;
    }
    // Hosts owned by a root are not ours to serve.
    let mut entry_hosts: Vec<(usize, String)> = Vec::new();
    for (j, host) in hosts.iter().enumerate() {
        let host = host.to_ascii_lowercase();
        match b.host_owner(&host) {
            Some(owner) => {
                let msg = format!(
                    "spec.tls[{i}].hosts[{j}]: {host:?} is owned by {owner}; the certificate is not used for it"
                );
                b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
            }
            None => entry_hosts.push((j, host)),
        }
    }
    if entry_hosts.is_empty() {
        return;
    }
    let secret = b.tls_secret(ns, secret_name);
    if let Err(m) = &secret {
        let names: Vec<String> = entry_hosts.iter().map(|(_, h)| format!("{h:?}")).collect();
        let message = format!(
            "{}; rules for {} are not routed",
            m.message,
            names.join(", ")
        );
        b.fail(
            obj,
            FieldError::new(format!("spec.tls[{i}].secretName"), m.reason, message),
        );
    }
    for (j, host) in entry_hosts {
        let id = match &secret {
            Err(_) => {
                tls_ok.insert(host, false);
                continue;
            }
            Ok(id) => id,
        };
        match state.tls.get(&host) {
            Some((first, by)) if first != id => {
                let by = if by == obj {
                    "an earlier spec.tls entry of this Ingress".to_string()
                } else {
                    by.to_string()
                };
                let msg = format!(
                    "spec.tls[{i}].hosts[{j}]: host {host:?} already uses TLS Secret {first:?} from {by}; Secret {id:?} is not used"
                );
                b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
            }
            Some(_) => {}
            None => {
                state.tls.insert(host.clone(), (id.clone(), obj.clone()));
                b.vhost(&host).tls = Some(VhostTls {
                    secret: id.clone(),
                    min_version: INGRESS_MIN_TLS,
                });
            }
        }
        tls_ok.entry(host).or_insert(true);
    }
}

/// The rules of an Ingress: each path's route on its host, unless a root owns the host or its
/// certificate cannot be used. Returns the hosts the default backend also serves (those of the
/// rules, when there is one).
fn ingress_rules(
    b: &mut Builder<'_>,
    state: &mut IngressState,
    obj: &ObjectRef,
    spec: &IngressSpec,
    tls_ok: &HashMap<String, bool>,
) -> BTreeSet<String> {
    let ns = obj.key.namespace.as_ref();
    let mut hosts: BTreeSet<String> = BTreeSet::new();
    for (i, rule) in spec.rules.iter().flatten().enumerate() {
        let host = rule
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .map(str::to_ascii_lowercase)
            .unwrap_or_else(|| CATCH_ALL_HOST.to_string());
        if let Some(owner) = b.host_owner(&host) {
            let msg = format!(
                "spec.rules[{i}].host: {host:?} is owned by {owner}; Ingress rules for it are ignored"
            );
            b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
            continue;
        }
        if tls_ok.get(&host) == Some(&false) {
            // Reported with the TLS entry; never serve a TLS host over plain HTTP.
            continue;
        }
        if spec.default_backend.is_some() {
            hosts.insert(host.clone());
        }
        for (j, p) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
            let field = || format!("spec.rules[{i}].http.paths[{j}]");
            let path_type = PathType::parse(&p.path_type).unwrap_or(PathType::Exact);
            let raw = p.path.as_deref().filter(|p| !p.is_empty()).unwrap_or("/");
            let path = match path_type {
                PathType::Exact => PathMatch::Exact(raw.into()),
                PathType::Prefix => PathMatch::prefix(raw),
                PathType::ImplementationSpecific => PathMatch::StringPrefix(raw.into()),
            };
            let action = backend_action(b, obj, ns, || format!("{}.backend", field()), &p.backend);
            let conflict = add(b, state, obj, &host, path, action);
            match conflict {
                Conflict::None => {}
                Conflict::With(by) => {
                    let by = if by == *obj {
                        "an earlier path of this Ingress".to_string()
                    } else {
                        by.to_string()
                    };
                    let msg = format!(
                        "{}: path {raw:?} ({}) on host {host:?} is already defined by {by}",
                        field(),
                        path_type.as_str()
                    );
                    b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
                }
            }
        }
    }
    hosts
}

/// The default backend: prefix `/` on the catch-all host and on `hosts`.
fn default_backend(
    b: &mut Builder<'_>,
    state: &mut IngressState,
    obj: &ObjectRef,
    backend: &IngressBackend,
    mut hosts: BTreeSet<String>,
) {
    let ns = obj.key.namespace.as_ref();
    let action = backend_action(b, obj, ns, || "spec.defaultBackend".to_string(), backend);
    hosts.insert(CATCH_ALL_HOST.to_string());
    for host in &hosts {
        if let Some(owner) = b.host_owner(host) {
            let msg = format!(
                "spec.defaultBackend: host {host:?} is owned by {owner}; the default backend is not used for it"
            );
            b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
            continue;
        }
        match add(b, state, obj, host, PathMatch::prefix("/"), action.clone()) {
            Conflict::None => {}
            // A path "/" of this very Ingress already takes everything on that host.
            Conflict::With(by) if by == *obj => {}
            Conflict::With(by) => {
                let msg = format!(
                    "spec.defaultBackend: path \"/\" (Prefix) on host {host:?} is already defined by {by}"
                );
                b.set_invalid(obj, reason::ROUTE_CONFLICT, msg);
            }
        }
    }
}

enum Conflict {
    None,
    With(ObjectRef),
}

/// Adds an Ingress route; an identical match on the host (Prefix `/` and ImplementationSpecific `/`
/// count as identical) keeps the route already there.
fn add(
    b: &mut Builder<'_>,
    state: &mut IngressState,
    obj: &ObjectRef,
    host: &str,
    path: PathMatch,
    action: RouteAction,
) -> Conflict {
    let catch_all = path.is_catch_all();
    if catch_all && let Some(by) = state.catch_all.get(host) {
        return Conflict::With(by.clone());
    }
    let route = Route {
        path,
        headers: Vec::new(),
        action,
        permit_insecure: false,
        timeout: None,
        retry: None,
        extras: None,
        source: obj.clone(),
    };
    match b.add_route(host, route) {
        Ok(()) => {
            if catch_all {
                state.catch_all.insert(host.to_string(), obj.clone());
            }
            Conflict::None
        }
        Err(conflict) => Conflict::With(conflict.0),
    }
}

/// Resolves a backend to a route action; a backend that cannot be resolved answers 503 and its
/// problem goes to the Ingress's status under `field`.
fn backend_action(
    b: &mut Builder<'_>,
    obj: &ObjectRef,
    namespace: &str,
    field: impl Fn() -> String,
    backend: &IngressBackend,
) -> RouteAction {
    let Some(svc) = &backend.service else {
        b.set_invalid(
            obj,
            reason::UNSUPPORTED_BACKEND,
            format!("{}.resource: {RESOURCE_BACKEND_UNSUPPORTED}", field()),
        );
        return RouteAction::Unavailable(RESOURCE_BACKEND_UNSUPPORTED.to_string());
    };
    let port = svc.port.as_ref();
    let port = match (
        port.and_then(|p| p.number),
        port.and_then(|p| p.name.as_deref())
            .filter(|n| !n.is_empty()),
    ) {
        (Some(n), _) => PortRef::Number(n),
        (None, Some(name)) => PortRef::Name(name),
        // Refused by validate_ingress before we get here.
        (None, None) => return RouteAction::Unavailable("no service port".to_string()),
    };
    let backend_ref = BackendRef {
        namespace,
        service: &svc.name,
        port,
        protocol: UpstreamProtocol::Http,
        lb: LbStrategy::RoundRobin,
        health_check: None,
        outlier_detection: None,
    };
    match b.cluster_for(&backend_ref) {
        Ok(cluster) => {
            RouteAction::Forward(smallvec::smallvec![WeightedCluster { cluster, weight: 1 }])
        }
        Err(m) => {
            let unavailable = RouteAction::Unavailable(m.message.clone());
            b.fail(
                obj,
                FieldError {
                    path: format!("{}.service", field()),
                    ..m
                },
            );
            unavailable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::{Dag, Options, State};
    use crate::manifest::{Document, parse_documents};
    use crate::store::Snapshot;

    fn mk_snapshot(yaml: &str) -> Snapshot {
        let docs = parse_documents("test.yaml", yaml).expect("test input parses");
        Snapshot::from_objects(docs.into_iter().map(|(_, d)| match d {
            Document::Object(o) => o,
            other => panic!("unexpected document {other:?}"),
        }))
    }

    /// Builds only the Ingress processor, with `owned` hosts claimed by an IngressRoute first.
    fn mk_dag(yaml: &str, owned: &[(&str, &str)]) -> Dag {
        let snapshot = mk_snapshot(yaml);
        let options = Options::default();
        let mut b = Builder::new(&snapshot, &options);
        for (host, owner) in owned {
            let (ns, name) = owner.split_once('/').unwrap();
            b.claim_host(
                host,
                ObjectRef::new(Kind::IngressRouteV1beta1, ns, name),
                None,
            );
        }
        b.settle_host_claims();
        build_ingresses(&mut b);
        b.finish()
    }

    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\nspec: {ports: [{port: 80}]}\n";

    fn messages(dag: &Dag, name: &str) -> Vec<String> {
        dag.statuses[&ObjectRef::new(Kind::Ingress, "ns", name)]
            .messages
            .iter()
            .map(|m| format!("[{}] {m}", m.reason))
            .collect()
    }

    #[test]
    fn hosts_owned_by_a_root_are_not_merged() {
        let dag = mk_dag(
            &format!(
                "{SERVICE}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: a, namespace: ns}}\nspec:\n  ingressClassName: sluice\n  rules:\n  - host: foo.com\n    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n  - host: bar.com\n    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n"
            ),
            &[("foo.com", "prod/google")],
        );
        assert_eq!(
            messages(&dag, "a"),
            vec![
                "[RouteConflict] spec.rules[0].host: \"foo.com\" is owned by IngressRoute prod/google; Ingress rules for it are ignored"
            ]
        );
        let status = &dag.statuses[&ObjectRef::new(Kind::Ingress, "ns", "a")];
        assert_eq!(status.state, State::Invalid);
        // The root's host gets nothing from the Ingress; the other rule still applies.
        assert!(!dag.vhosts.contains_key("foo.com"));
        assert_eq!(dag.vhosts["bar.com"].routes.len(), 1);
    }

    #[test]
    fn tls_and_default_backend_skip_owned_hosts() {
        let dag = mk_dag(
            &format!(
                "{SERVICE}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: a, namespace: ns}}\nspec:\n  ingressClassName: sluice\n  tls: [{{hosts: [foo.com], secretName: missing}}]\n  defaultBackend: {{service: {{name: web, port: {{number: 80}}}}}}\n"
            ),
            &[("foo.com", "prod/google"), ("*", "prod/catchall")],
        );
        assert_eq!(
            messages(&dag, "a"),
            vec![
                "[RouteConflict] spec.tls[0].hosts[0]: \"foo.com\" is owned by IngressRoute prod/google; the certificate is not used for it",
                "[RouteConflict] spec.defaultBackend: host \"*\" is owned by IngressRoute prod/catchall; the default backend is not used for it",
            ]
        );
        assert!(dag.vhosts.is_empty());
    }

    #[test]
    fn the_store_prepares_each_version_of_an_ingress_it_takes_in() {
        use crate::dag::links::LinkRef;
        use crate::store::AnyObject;
        let ingress = |class: &str, path: &str| {
            format!(
                "{SERVICE}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: a, namespace: ns, generation: 4, creationTimestamp: \"2026-01-02T03:04:05Z\"}}\nspec:\n  ingressClassName: {class}\n  tls: [{{hosts: [foo.com], secretName: s}}]\n  rules:\n  - host: foo.com\n    http: {{paths: [{{path: {path}, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n  - http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}\n"
            )
        };
        let mut snap = mk_snapshot(&ingress("sluice", "/app"));
        let key = ObjKey::new("ns", "a");
        let first = snap.ingresses[&key].clone();
        let ready = first.ready();
        assert!(ready.errors.is_empty());
        assert_eq!(ready.generation, Some(4));
        assert_eq!(ready.class.as_deref(), Some("sluice"));
        assert!(ready.created.is_some());
        // Its hosts, in any letter case, and the catch-all host of the rule without one, once
        // each.
        let mut want: Vec<u64> = [LinkRef::Host("foo.com"), LinkRef::Host(CATCH_ALL_HOST)]
            .into_iter()
            .map(LinkRef::hash)
            .collect();
        want.sort_unstable();
        assert_eq!(ready.link_hashes(), want);

        // A new version is prepared again: a path that breaks the rules leaves their errors,
        // which the build reports; another class leaves the object to another controller.
        let bad = mk_snapshot(&ingress("sluice", "app")).ingresses[&key].clone();
        assert!(!bad.ready().errors.is_empty());
        snap.insert(AnyObject::Ingress(bad.object().clone()));
        let d = crate::dag::build(&snap, &Options::default());
        let status = &d.statuses[&ObjectRef::new(Kind::Ingress, "ns", "a")];
        assert_eq!(status.state, State::Invalid);
        assert!(
            status.messages[0]
                .to_string()
                .contains("spec.rules[0].http.paths[0].path")
        );
        let other = mk_snapshot(&ingress("other", "/app")).ingresses[&key].clone();
        assert_eq!(other.ready().class.as_deref(), Some("other"));
        snap.insert(AnyObject::Ingress(other.object().clone()));
        let d = crate::dag::build(&snap, &Options::default());
        let status = &d.statuses[&ObjectRef::new(Kind::Ingress, "ns", "a")];
        assert_eq!(status.state, State::Ignored);
    }

    #[test]
    fn many_ingresses_merge_into_one_host() {
        // 2000 Ingresses on one host, each with its own path: every one routed, none in conflict.
        let mut yaml = String::from(SERVICE);
        for i in 0..2000 {
            yaml.push_str(&format!(
                "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i{i}, namespace: ns}}\nspec:\n  ingressClassName: sluice\n  rules: [{{host: foo.com, http: {{paths: [{{path: /p{i}, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
            ));
        }
        let dag = mk_dag(&yaml, &[]);
        assert_eq!(dag.vhosts["foo.com"].routes.len(), 2000);
        assert!(dag.statuses.values().all(|s| s.state == State::Valid));
    }
}
