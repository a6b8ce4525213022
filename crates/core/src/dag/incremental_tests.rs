//! Every incremental build equals a full build of the same snapshot.

use super::*;
use crate::manifest::{Document, parse_documents};
use crate::store::AnyObject;
use crate::test_rng::Rng;

use crate::synth::pool::{is_routing, pool};

fn is_routing_ref(o: &ObjectRef) -> bool {
    matches!(
        o.kind,
        Kind::Ingress | Kind::IngressRouteV1beta1 | Kind::IngressRouteV1 | Kind::RouteV1alpha1
    )
}

fn check(step: usize, got: &Dag, want: &Dag) {
    if got == want {
        return;
    }
    let keys = |d: &Dag| -> Vec<String> { d.vhosts.keys().cloned().collect() };
    assert_eq!(keys(got), keys(want), "step {step}: hosts");
    for (h, v) in &want.vhosts {
        assert_eq!(got.vhosts.get(h), Some(v), "step {step}: host {h}");
    }
    for (o, s) in &want.statuses {
        assert_eq!(got.statuses.get(o), Some(s), "step {step}: status of {o}");
    }
    assert_eq!(
        got.statuses.len(),
        want.statuses.len(),
        "step {step}: statuses"
    );
    let names = |d: &Dag| -> Vec<String> { d.clusters.keys().map(|n| n.to_string()).collect() };
    assert_eq!(names(got), names(want), "step {step}: clusters");
    for (n, c) in &want.clusters {
        assert_eq!(got.clusters.get(n), Some(c), "step {step}: cluster {n}");
    }
    assert_eq!(got.secrets, want.secrets, "step {step}: secrets");
    panic!("step {step}: models differ");
}

/// Runs `steps` random changes over the golden objects, as the pipeline would: routing changes
/// go through [`Incremental::build`]; a change of EndpointSlices alone takes the pipeline's
/// endpoint fast path (the model is kept, [`Incremental::endpoints_changed`] notes it).
/// The index's vectors live as long as their objects: full and partial builds keep them at their
/// exact size (no room left over from pushes).
fn assert_index_exact(step: usize, inc: &Incremental) {
    for (obj, links) in &inc.links {
        assert_eq!(links.len(), links.capacity(), "step {step}: links of {obj}");
    }
    for (link, holders) in &inc.holders {
        assert_eq!(
            holders.len(),
            holders.capacity(),
            "step {step}: holders of {link:?}"
        );
    }
}

/// One of `objects` added back, replaced by another version (EndpointSlices have two), or, one
/// time in three, removed.
fn add_or_remove(store: &mut Snapshot, rng: &mut Rng, objects: &[&AnyObject]) {
    let o = objects[rng.below(objects.len())];
    if rng.below(3) == 0 {
        store.remove(o.kind(), &o.key());
    } else {
        store.insert(o.clone());
    }
}

fn run(seed: u64, steps: usize, options: Options) -> (usize, usize) {
    run_with(seed, steps, options, Vec::new())
}

/// [`run`] over the golden objects and `extra` routing objects of other kinds (the Gateway
/// API's), added and removed as the routing objects are.
fn run_with(seed: u64, steps: usize, options: Options, extra: Vec<AnyObject>) -> (usize, usize) {
    let mut pool = pool();
    let extras = extra.len();
    pool.extend(extra);
    let extra = &pool[pool.len() - extras..];
    let routing: Vec<&AnyObject> = (pool.iter())
        .filter(|o| is_routing(o))
        .chain(extra)
        .collect();
    let slices: Vec<&AnyObject> = pool
        .iter()
        .filter(|o| o.kind() == Kind::EndpointSlice)
        .collect();
    let services: Vec<&AnyObject> = pool.iter().filter(|o| o.kind() == Kind::Service).collect();
    let secrets: Vec<&AnyObject> = pool.iter().filter(|o| o.kind() == Kind::Secret).collect();
    assert!(!secrets.is_empty(), "TLS Secrets in the golden cases");
    let mut rng = Rng(seed);
    let mut store = Snapshot::from_objects(
        pool.iter()
            .filter(|o| !is_routing(o) || rng.below(2) == 0)
            .cloned(),
    );
    let mut inc = Incremental::new(options.clone());
    let mut prev = (store.clone(), inc.build_full(&store));
    assert_eq!(prev.1, crate::dag::build(&store, &options));
    let (mut partial, mut full) = (0, 0);
    for step in 0..steps {
        let endpoints_only = rng.below(8) == 0;
        for _ in 0..=rng.below(3) {
            match rng.below(if endpoints_only { 1 } else { 13 }) {
                0 => add_or_remove(&mut store, &mut rng, &slices),
                1 => add_or_remove(&mut store, &mut rng, &services),
                2 => add_or_remove(&mut store, &mut rng, &secrets),
                3..=5 => {
                    let present: Vec<ObjectRef> = routing
                        .iter()
                        .filter(|o| is_routing(o) || gateway::snap_has(&store, o))
                        .map(|o| o.object_ref())
                        .filter(|r| !is_routing_ref(r) || object_links(&store, r, "").is_some())
                        .collect();
                    if !present.is_empty() {
                        let r = &present[rng.below(present.len())];
                        store.remove(r.kind, &r.key);
                    }
                }
                _ => store.insert(routing[rng.below(routing.len())].clone()),
            }
        }
        let want = crate::dag::build(&store, &options);
        if endpoints_only {
            let changes = prev.0.endpoint_only_changes(&store).expect("slices only");
            inc.endpoints_changed(&changes.services);
            prev.0 = store.clone();
            continue;
        }
        let (got, kind) = inc.build(Some((&prev.0, &prev.1)), &store);
        check(step, &got, &want);
        assert_index_exact(step, &inc);
        match kind {
            BuildKind::Full => full += 1,
            BuildKind::Partial { .. } => partial += 1,
        }
        prev = (store.clone(), got);
    }
    (partial, full)
}

#[test]
fn incremental_builds_equal_full_builds_over_random_changes() {
    let mut partial = 0;
    for seed in 1..=12u64 {
        let (p, f) = run(0x9e37_79b9_7f4a_7c15 ^ seed, 250, Options::default());
        assert!(p > f, "seed {seed}: {p} partial builds, {f} full");
        partial += p;
    }
    assert!(partial > 1000, "{partial} partial builds");
}

#[test]
fn incremental_builds_honour_root_namespaces() {
    let options = Options {
        root_namespaces: vec!["prod".into(), "default".into()],
        ..Options::default()
    };
    run(0xdead_beef, 300, options);
}

#[test]
fn a_change_rebuilds_only_the_objects_it_can_affect() {
    let pool = pool();
    let store = Snapshot::from_objects(pool.iter().cloned());
    let mut inc = Incremental::new(Options::default());
    let dag = inc.build_full(&store);
    // A root serving its host: touching it rebuilds what shares its host or its delegations,
    // not every object.
    let (key, root) = store
        .ingressroutes_v1beta1
        .iter()
        .find(|(k, o)| {
            o.spec.virtualhost.as_ref().is_some_and(|v| {
                dag.vhosts
                    .get(&v.fqdn)
                    .and_then(|v| v.owner.as_ref())
                    .map(|o| &o.key)
                    == Some(k)
            })
        })
        .expect("a root owning its host");
    let key = key.clone();
    let mut next = store.clone();
    let mut root = (**root).clone();
    root.metadata.generation = Some(7);
    let root = Prepared::new(&key, Arc::new(root));
    next.ingressroutes_v1beta1
        .insert(key.clone(), Arc::new(root));
    let (got, kind) = inc.build(Some((&store, &dag)), &next);
    assert_eq!(got, crate::dag::build(&next, &Options::default()));
    let BuildKind::Partial { objects } = kind else {
        panic!("{kind:?}");
    };
    assert!(objects < next.routing_objects() / 2, "{objects} rebuilt");
    let r = ObjectRef {
        kind: Kind::IngressRouteV1beta1,
        key: key.clone(),
    };
    assert_eq!(got.statuses[&r].generation, Some(7));
    // The generation is in the status only: the hosts rebuilt are equal to the previous
    // model's and stay its entries, as the hosts the change cannot reach do.
    let shared = |got: &Dag| {
        got.vhosts
            .iter()
            .filter(|(h, v)| dag.vhosts.get(*h).is_some_and(|old| Arc::ptr_eq(v, old)))
            .count()
    };
    assert_eq!(shared(&got), got.vhosts.len());
    // A change of its routes replaces its host, and only that.
    let mut changed = (*next.ingressroutes_v1beta1[&key]).clone();
    let fqdn = changed.spec.virtualhost.clone().unwrap().fqdn;
    changed.spec.routes[0].match_ = "/moved".into();
    let mut after = next.clone();
    after.ingressroutes_v1beta1.insert(
        key.clone(),
        Arc::new(Prepared::new(&key, Arc::new(changed))),
    );
    let (moved, _) = inc.build(Some((&next, &got)), &after);
    assert_eq!(moved, crate::dag::build(&after, &Options::default()));
    assert!(!Arc::ptr_eq(&moved.vhosts[&fqdn], &dag.vhosts[&fqdn]));
    assert_eq!(shared(&moved), moved.vhosts.len() - 1);
}

#[test]
fn a_service_or_secret_change_rebuilds_the_routing_objects_that_name_it() {
    // Twelve Ingresses in one namespace, each forwarding to a Service of its own, the first
    // three serving HTTPS with one Secret; a root in another namespace delegating to a vertex
    // in this one, whose route forwards to a Service of this namespace too.
    let mut yaml = String::new();
    for k in 0..12 {
        let tls = if k < 3 {
            format!("  tls: [{{hosts: [h{k}.example.com], secretName: cert}}]\n")
        } else {
            String::new()
        };
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: s{k}, namespace: shop}}\n\
             spec: {{ports: [{{port: 80}}]}}\n---\n\
             apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing-{k}, namespace: shop}}\n\
             spec:\n  ingressClassName: sluice\n{tls}  rules:\n  - host: h{k}.example.com\n    http:\n      paths:\n\
             \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: s{k}, port: {{number: 80}}}}}}}}\n---\n"
        ));
    }
    yaml.push_str(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\n\
         type: kubernetes.io/tls\nstringData: {tls.crt: not a certificate, tls.key: not a key}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: s-vertex, namespace: shop}\n\
         spec: {ports: [{port: 80}]}\n---\n\
         apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: root, namespace: web}\n\
         spec:\n  virtualhost: {fqdn: root.example.com}\n  routes:\n\
         \x20 - match: /\n    delegate: {name: vertex, namespace: shop}\n---\n\
         apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: vertex, namespace: shop}\n\
         spec:\n  routes:\n  - match: /\n    services: [{name: s-vertex, port: 80}]\n",
    );
    let store = with_other_roots(yaml);
    let options = Options::default();
    let mut inc = Incremental::new(options.clone());
    let mut prev = (store.clone(), inc.build_full(&store));
    let mut step = |what: &str, edit: &dyn Fn(&mut Snapshot), want: usize| {
        let mut next = prev.0.clone();
        edit(&mut next);
        let (got, kind) = inc.build(Some((&prev.0, &prev.1)), &next);
        assert_eq!(got, crate::dag::build(&next, &options), "{what}");
        assert_eq!(kind, BuildKind::Partial { objects: want }, "{what}");
        prev = (next, got);
        prev.1.clone()
    };
    let svc = |name: &str| ObjKey::new("shop", name);
    let ing = |k: usize| ObjectRef::new(Kind::Ingress, "shop", format!("ing-{k}"));

    // A Service changes its port: the one Ingress naming it is built again, not the namespace.
    let mut moved = (*store.services()[&svc("s5")]).clone();
    moved.ports[0].port = 8080;
    let moved = Arc::new(moved);
    step("s5's port", &|s| s.put_service(svc("s5"), moved.clone()), 1);
    // It goes: its route answers 503 and the Ingress's status says why.
    let dag = step("s5 removed", &|s| _ = s.remove_service(&svc("s5")), 1);
    assert!(
        dag.statuses[&ing(5)]
            .messages
            .iter()
            .any(|m| m.to_string().contains("s5")),
        "{:?}",
        dag.statuses[&ing(5)]
    );
    let back = store.services()[&svc("s5")].clone();
    step("s5 back", &|s| s.put_service(svc("s5"), back.clone()), 1);
    // The Secret of three Ingresses goes, then comes back.
    let cert = ObjKey::new("shop", "cert");
    step("cert removed", &|s| _ = s.secrets.remove(&cert), 3);
    let secret = store.secrets[&cert].clone();
    step(
        "cert back",
        &|s| _ = s.secrets.insert(cert.clone(), secret.clone()),
        3,
    );
    // The vertex's Service: the vertex and the root delegating to it.
    let dag = step(
        "s-vertex removed",
        &|s| _ = s.remove_service(&svc("s-vertex")),
        2,
    );
    let root = ObjectRef::new(Kind::IngressRouteV1beta1, "web", "root");
    assert!(
        dag.statuses[&root]
            .messages
            .iter()
            .chain(
                &dag.statuses[&ObjectRef::new(Kind::IngressRouteV1beta1, "shop", "vertex")]
                    .messages
            )
            .any(|m| m.to_string().contains("s-vertex")),
        "{:?}",
        dag.statuses[&root]
    );
    // A Service no routing object names: nothing to build again.
    let unused = Arc::new((*store.services()[&svc("s0")]).clone());
    step(
        "unnamed Service added",
        &|s| s.put_service(svc("unused"), unused.clone()),
        0,
    );
    // Back where it started, through partial builds only.
    let first = store.clone();
    let dag = step(
        "everything back",
        &|s| {
            s.set_services(first.services().clone());
            s.secrets = first.secrets.clone();
        },
        2,
    );
    assert_eq!(dag, crate::dag::build(&store, &options));
}

#[test]
fn an_ingress_class_change_builds_in_full() {
    let pool = pool();
    let store = Snapshot::from_objects(pool.iter().cloned());
    let mut inc = Incremental::new(Options::default());
    let dag = inc.build_full(&store);
    let mut next = store.clone();
    let key = next.ingress_classes.keys().next().unwrap().clone();
    next.ingress_classes.remove(&key);
    let (got, kind) = inc.build(Some((&store, &dag)), &next);
    assert_eq!(kind, BuildKind::Full);
    assert_eq!(got, crate::dag::build(&next, &Options::default()));
}

/// The snapshot of the objects of `yaml` (a stream of documents ending with one) and of eight
/// roots in another namespace, so that a change of those in `yaml` is a small part of the
/// routing objects (a partial build).
fn with_other_roots(mut yaml: String) -> Snapshot {
    for r in 0..8 {
        yaml.push_str(&format!(
            "---\napiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\n\
             metadata: {{name: other-{r}, namespace: other}}\n\
             spec:\n  virtualhost: {{fqdn: other-{r}.example.com}}\n  routes:\n\
             \x20 - match: /\n    services: [{{name: none, port: 80}}]\n"
        ));
    }
    Snapshot::from_test_yaml(&yaml)
}

#[test]
fn a_partial_build_resolves_several_services_of_a_namespace() {
    // A root forwarding to k Services of its namespace; every Service has an EndpointSlice, one
    // of them two, and slices of other Services sit between them in key order.
    let objects = |k: usize, path: &str| {
        let mut yaml = String::new();
        for s in 0..8 {
            yaml.push_str(&format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: s{s}, namespace: ns}}\n\
                 spec: {{ports: [{{name: http, port: 80}}]}}\n---\n"
            ));
            let slices: &[&str] = if s == 1 { &["a", "z"] } else { &["m"] };
            for (n, suffix) in slices.iter().enumerate() {
                yaml.push_str(&format!(
                    "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
                     metadata: {{name: {suffix}-s{s}, namespace: ns, labels: {{kubernetes.io/service-name: s{s}}}}}\n\
                     addressType: IPv4\nports: [{{name: http, port: 8080}}]\n\
                     endpoints: [{{addresses: [10.0.{s}.{n}], conditions: {{ready: true}}}}]\n---\n"
                ));
            }
        }
        let services: Vec<String> = (0..k)
            .map(|s| format!("{{name: s{s}, port: 80}}"))
            .collect();
        yaml.push_str(&format!(
            "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\n\
             metadata: {{name: root, namespace: ns}}\n\
             spec:\n  virtualhost: {{fqdn: one.example.com}}\n  routes:\n\
             \x20 - match: {path}\n    services: [{}]\n",
            services.join(", ")
        ));
        with_other_roots(yaml)
    };
    let options = Options::default();
    for k in [1, 3, 4, 5, 8] {
        let before = objects(k, "/");
        let after = objects(k, "/moved");
        let mut inc = Incremental::new(options.clone());
        let dag = inc.build_full(&before);
        let (got, kind) = inc.build(Some((&before, &dag)), &after);
        assert!(matches!(kind, BuildKind::Partial { .. }), "{k}: {kind:?}");
        let want = crate::dag::build(&after, &options);
        assert_eq!(got, want, "{k} Services");
        let endpoints: usize = got.clusters.values().map(|c| c.endpoints.len()).sum();
        assert_eq!(endpoints, k + usize::from(k > 1), "{k} Services");
    }
}

#[test]
fn a_partial_build_finds_the_slices_of_a_service_after_they_move_between_services() {
    // Two Services, each with a slice; between builds one slice is relabelled to the other
    // Service, another is added, and the root's route changes (so the root is rebuilt and
    // resolves both Services).
    let objects = |labels: &[(&str, &str)], path: &str| {
        let mut yaml = String::new();
        for s in ["s0", "s1"] {
            yaml.push_str(&format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: {s}, namespace: ns}}\n\
                 spec: {{ports: [{{name: http, port: 80}}]}}\n---\n"
            ));
        }
        for (n, (slice, service)) in labels.iter().enumerate() {
            yaml.push_str(&format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
                 metadata: {{name: {slice}, namespace: ns, labels: {{kubernetes.io/service-name: {service}}}}}\n\
                 addressType: IPv4\nports: [{{name: http, port: 8080}}]\n\
                 endpoints: [{{addresses: [10.0.0.{n}], conditions: {{ready: true}}}}]\n---\n"
            ));
        }
        yaml.push_str(&format!(
            "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\n\
             metadata: {{name: root, namespace: ns}}\n\
             spec:\n  virtualhost: {{fqdn: one.example.com}}\n  routes:\n\
             \x20 - match: {path}\n    services: [{{name: s0, port: 80}}]\n\
             \x20 - match: /one\n    services: [{{name: s1, port: 80}}]\n"
        ));
        with_other_roots(yaml)
    };
    let options = Options::default();
    let steps = [
        objects(&[("a", "s0"), ("b", "s1")], "/"),
        objects(&[("a", "s0"), ("b", "s1")], "/x"),
        objects(&[("a", "s1"), ("b", "s1"), ("c", "s0")], "/y"),
        objects(&[("a", "s0"), ("c", "s1")], "/z"),
        objects(&[("c", "s1")], "/"),
    ];
    let mut inc = Incremental::new(options.clone());
    let mut dag = inc.build_full(&steps[0]);
    for (n, pair) in steps.windows(2).enumerate() {
        let (got, kind) = inc.build(Some((&pair[0], &dag)), &pair[1]);
        assert!(
            matches!(kind, BuildKind::Partial { .. }),
            "step {n}: {kind:?}"
        );
        assert_eq!(got, crate::dag::build(&pair[1], &options), "step {n}");
        dag = got;
    }
}

#[path = "incremental_gateway_tests.rs"]
pub(crate) mod gateway;
