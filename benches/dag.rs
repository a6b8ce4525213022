//! The full rebuild of the routing model and its Envoy resources over synthetic clusters, timed
//! whole and phase by phase so the profile is visible:
//!
//! - **`Pipeline::publish` of a full build** (the `dag_build_ms_10k` key): the production function
//!   itself, timed from its call to its return, when the model and its resources are on the
//!   watches the xDS server and the status writer read. At sluice's start: a new pipeline, whose
//!   previous state is the empty configuration (the key). In a running sluice: an IngressClass of
//!   another controller comes and goes, so each publication builds in full and replaces a whole
//!   model (key `full_rebuild_running_publish_ms_10k`). What a publication leaves behind, the
//!   index for the partial builds after it and the drop of what it replaced, runs on threads of
//!   its own; the benchmark waits for them (`Pipeline::settle`) outside the timing, as the next
//!   change in production usually comes long after.
//! - **sluice's path, phase by phase**: the same steps called one by one: `dag::build` (through
//!   `Incremental::build_model`), then `translate::incremental::Encoder::encode` from nothing
//!   (each resource is translated and encoded in turn, clusters on a second thread), then the
//!   drop of the previous iteration's model, snapshot and encoder, timed on the calling thread
//!   (key `dag_path_with_drop_ms_10k`; `dag_build_ms_10k` leaves the drop out: at a real start
//!   there is nothing to drop, and in a running sluice the drop is the drop thread's).
//!   After that total, `Incremental::index`: the index a full build leaves for the partial builds
//!   after it, which `Pipeline::publish` makes once the model and its resources are published
//!   (printed as "then index", key `dag_index_ms_10k`).
//! - **a full rebuild in a running sluice, phase by phase**: the same, with the encoder holding
//!   the previous model (what an IngressClass change causes): every resource is encoded again and
//!   compared with the bytes it replaces.
//! - **every proto at once**: `translate::build` (every resource as an envoy-types message) then
//!   `xds::Snapshot::from_resources`, the path of the tests and the empty start-up snapshot.
//!
//! Besides, the store's share, which it does as objects arrive and no build repeats: preparing the
//! IngressRoutes and Ingresses (`store_prepare_ms_10k`), and putting the Services and
//! EndpointSlices in (`store_services_ms_10k`), of which its index of them by Service name
//! (`store_service_index_ms_10k`), what every build resolves backends in.
//!
//! In the phase-by-phase loops each iteration replaces the previous iteration's results, which
//! are then dropped, as a long-running sluice drops the previous state when it publishes a new
//! one (on another thread); the drop is timed as its own phase. Prints the times at 1k and 10k
//! routing objects and the 10k/1k ratio (linear scaling gives ~10; O(n²) would give ~100). Writes
//! its keys into target/bench/results.json.
//!
//! `cargo bench --bench dag` runs the full sizes. Run any other way (`cargo test --all-targets` runs
//! it in the test profile) it does a small smoke run so the benchmark cannot rot, and records nothing.

mod common;

use std::sync::Arc;
use std::time::Instant;

use sluice::api::ObjKey;
use sluice::app::{Pipeline, PublishPath};
use sluice::dag::incremental::{BuildKind, Incremental};
use sluice::dag::{self, Dag, Options};
use sluice::store::{Objects, Prepare, Prepared, Snapshot};
use sluice::translate::incremental::Encoder;
use sluice::{translate, xds};

/// Per-phase times of one iteration, in ms.
#[derive(Clone, Copy, Default)]
struct Times {
    dag: f64,
    translate: f64,
    encode: f64,
    drop: f64,
    /// After the total: the index a full build leaves for the partial builds after it, which
    /// `Pipeline::publish` makes once the model and its resources are published (sluice's path).
    index: f64,
    total: f64,
}

/// Median of each phase on its own (so the phases need not add up to the total exactly).
#[derive(Clone, Copy, Default)]
struct Medians {
    dag: f64,
    translate: f64,
    encode: f64,
    drop: f64,
    index: f64,
    total: f64,
}

impl Medians {
    fn of(times: &[Times]) -> Medians {
        let phase = |f: fn(&Times) -> f64| median(times.iter().map(f).collect());
        Medians {
            dag: phase(|t| t.dag),
            translate: phase(|t| t.translate),
            encode: phase(|t| t.encode),
            drop: phase(|t| t.drop),
            index: phase(|t| t.index),
            total: phase(|t| t.total),
        }
    }
}

/// The medians of one size.
struct Row {
    /// The store's preparation of every IngressRoute and Ingress (`store::Prepared`), which it
    /// does as each object arrives, not in a build.
    prepare: f64,
    /// The store's Services and EndpointSlices put in one at a time, as they arrive: its maps
    /// of them and its index of them by Service name (`store::ServiceIndex`). Not part of a
    /// build.
    services: f64,
    /// The index alone: made from the two maps whole, as `Snapshot::set_services` and
    /// `set_endpoint_slices` make it (an entry put per Service and per slice).
    service_index: f64,
    dag_only: f64,
    /// `dag::build` alone of the same cluster with a Gateway and 100 HTTPRoutes
    /// (`synth::gateway_api`), and the same on one thread.
    dag_only_gateway_api: f64,
    dag_only_gateway_api_one_thread: f64,
    /// `Pipeline::publish` of a full build at sluice's start (a new pipeline).
    publish_start: f64,
    /// `Pipeline::publish` of a full build in a running pipeline (an IngressClass changed).
    publish_running: f64,
    /// sluice's path, from nothing.
    sluice: Medians,
    /// sluice's path with the encoder holding the previous model.
    running: Medians,
    /// `translate::build` + `Snapshot::from_resources`.
    all_protos: Medians,
    /// The content hashes of the encoder's clusters and load assignments ([`Hashing`]).
    hashing: Hashing,
    /// The machine's speed in the same minute: the median time of the fixed reference workload
    /// (`common::reference`), run just before and just after sluice's path from nothing.
    reference: f64,
}

/// The content hashes of every cluster and load assignment sluice's path encodes (the small
/// resources a build from nothing makes by the thousand), each way, in ms (median).
#[derive(Clone, Copy)]
struct Hashing {
    resources: usize,
    /// The alternative to BLAKE2b that sluice's choice of hash is measured against: BLAKE3
    /// keyed, of the name, a zero byte and the bytes, one resource at a time (the hash alone;
    /// the two below also make each `Resource`, its version text included).
    blake3_one: f64,
    /// `Resource::new` of each: BLAKE2b-256, one at a time.
    one: f64,
    /// `Resource::new_many` of all: BLAKE2b-256, side by side in the SIMD lanes (the encoder's way).
    many: f64,
}

/// [`Hashing`] of the clusters and load assignments of `x`.
fn hashing(x: &xds::Snapshot, runs: usize) -> Hashing {
    let resources: Vec<(xds::cache::ResourceName, xds::cache::Body)> = [
        translate::ResourceType::Cluster,
        translate::ResourceType::Endpoint,
    ]
    .into_iter()
    .flat_map(|t| x.of(t).values())
    .map(|r| (r.name.clone(), r.body.clone()))
    .collect();
    let key = blake3::derive_key("sluice 2026-11-27 xDS resource content", b"small");
    let time = |f: &dyn Fn() -> usize| {
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(f());
                    ms_since(t)
                })
                .collect(),
        )
    };
    let blake3_one = time(&|| {
        (resources.iter())
            .map(|(name, body)| {
                let mut h = blake3::Hasher::new_keyed(&key);
                h.update(name.as_bytes()).update(&[0]).update(&body.value);
                h.finalize().as_bytes()[0] as usize
            })
            .sum()
    });
    // The copies of names and bodies the resources are made of are made outside the timings.
    let mut copies = (0..2 * runs).map(|_| resources.clone()).collect::<Vec<_>>();
    let mut time_made = |make: &dyn Fn(Vec<_>) -> Vec<xds::Resource>| {
        median(
            (0..runs)
                .map(|_| {
                    let batch = copies.pop().unwrap_or_default();
                    let t = Instant::now();
                    let made = std::hint::black_box(make(batch));
                    let ms = ms_since(t);
                    drop(made);
                    ms
                })
                .collect(),
        )
    };
    let one = time_made(&|batch| {
        (batch.into_iter())
            .map(|(name, body)| xds::Resource::new(name, body))
            .collect()
    });
    let many = time_made(&|batch| xds::Resource::new_many(batch));
    Hashing {
        resources: resources.len(),
        blake3_one,
        one,
        many,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median of `runs` times of `fill` putting objects into an empty store.
fn time_into_empty_store(runs: usize, fill: impl Fn(&mut Snapshot)) -> f64 {
    median(
        (0..runs)
            .map(|_| {
                let mut s = Snapshot::default();
                let t = Instant::now();
                fill(&mut s);
                let ms = ms_since(t);
                drop(std::hint::black_box(s));
                ms
            })
            .collect(),
    )
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn ms(a: Instant, b: Instant) -> f64 {
    (b - a).as_secs_f64() * 1e3
}

/// The times of a rebuild on sluice's path: started at `t0`, model built at `t1`, translated and
/// encoded (one phase there, timed as `encode`) at `t2`, previous state dropped at `t3`, indexed
/// for partial builds (after the total) at `t4`.
fn sluice_times(t0: Instant, t1: Instant, t2: Instant, t3: Instant, t4: Instant) -> Times {
    Times {
        dag: ms(t0, t1),
        translate: 0.0,
        encode: ms(t1, t2),
        drop: ms(t2, t3),
        index: ms(t3, t4),
        total: ms(t0, t3),
    }
}

/// Every object of `m` copied, with its key, in key order: the objects of one kind then lie in
/// memory in the order a build reads them.
fn in_key_order<T: Clone>(m: &Objects<T>) -> Objects<T> {
    m.iter()
        .map(|(k, v)| {
            let key = ObjKey::new(&*k.namespace, &*k.name);
            (key, Arc::new(T::clone(v)))
        })
        .collect()
}

/// [`in_key_order`] for objects the store keeps prepared: each prepared again from its copy.
fn prepared_in_key_order<T: Clone + Prepare>(m: &Objects<Prepared<T>>) -> Objects<Prepared<T>> {
    m.iter()
        .map(|(k, v)| {
            let key = ObjKey::new(&*k.namespace, &*k.name);
            let object = Arc::new(T::clone(v.object()));
            (key.clone(), Arc::new(Prepared::new(&key, object)))
        })
        .collect()
}

/// The snapshot with its objects laid out kind by kind, each kind in key order, as a cluster-mode
/// sluice decodes them from the lists that start its watches. The synthetic cluster is generated
/// object by object (a root, its vertex, their Services and EndpointSlices, ...), so its objects
/// of one kind are spread over the heap in an order unrelated to their keys; after hours of
/// updates a long-running sluice's store looks more like that.
fn laid_out_in_key_order(snap: &Snapshot) -> Snapshot {
    let mut s = snap.clone();
    s.ingresses = prepared_in_key_order(&snap.ingresses);
    s.ingress_classes = in_key_order(&snap.ingress_classes);
    s.ingressroutes_v1beta1 = prepared_in_key_order(&snap.ingressroutes_v1beta1);
    s.ingressroutes_v1 = prepared_in_key_order(&snap.ingressroutes_v1);
    s.routes_v1alpha1 = in_key_order(&snap.routes_v1alpha1);
    s.secrets = in_key_order(&snap.secrets);
    // Services and slices (and the index of them the store keeps) put in again, in key order.
    s.set_services(Default::default());
    s.set_endpoint_slices(Default::default());
    for (key, service) in &in_key_order(snap.services()) {
        s.put_service(key.clone(), service.clone());
    }
    for (key, slice) in &in_key_order(snap.endpoint_slices()) {
        s.put_endpoint_slice(key.clone(), slice.clone());
    }
    s
}

/// The medians of `runs` rebuilds of a synthetic cluster of `n` routing objects; `key_order`: the
/// snapshot laid out in key order first (`laid_out_in_key_order`).
fn row(n: usize, runs: usize, key_order: bool) -> Row {
    let generated = common::cluster(n);
    let snap = if key_order {
        let copy = laid_out_in_key_order(&generated);
        let options = Options::default();
        assert!(
            dag::build(&copy, &options) == dag::build(&generated, &options),
            "a snapshot laid out in key order builds the same model"
        );
        drop(generated);
        copy
    } else {
        generated
    };
    let options = Options::default();
    let translate_options = translate::Options::default();
    let endpoints: usize = snap.endpoint_slices().values().map(|s| s.ready.len()).sum();

    // The store's share for Services and EndpointSlices: each put into an empty store, as the
    // watches' lists and events bring them; and the index alone.
    let services = time_into_empty_store(runs, |s| {
        for (k, v) in snap.services() {
            s.put_service(k.clone(), v.clone());
        }
        for (k, v) in snap.endpoint_slices() {
            s.put_endpoint_slice(k.clone(), v.clone());
        }
    });
    let service_index = time_into_empty_store(runs, |s| {
        s.set_services(snap.services().clone());
        s.set_endpoint_slices(snap.endpoint_slices().clone());
    });
    // The store's share: every IngressRoute and Ingress prepared again from its object, as the
    // store does when a watch event or a file brings one. Not part of a build.
    let prepare = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let v1beta1: Vec<_> = (snap.ingressroutes_v1beta1.iter())
                    .map(|(k, o)| Prepared::new(k, o.object().clone()))
                    .collect();
                let v1: Vec<_> = (snap.ingressroutes_v1.iter())
                    .map(|(k, o)| Prepared::new(k, o.object().clone()))
                    .collect();
                let ingresses: Vec<_> = (snap.ingresses.iter())
                    .map(|(k, o)| Prepared::new(k, o.object().clone()))
                    .collect();
                let ms = ms_since(t);
                drop(std::hint::black_box((v1beta1, v1, ingresses)));
                ms
            })
            .collect(),
    );

    // dag::build alone, the previous model dropped as it is replaced (outside the timing, as in
    // the benchmark's first version, so the number stays comparable).
    let mut prev: Dag = dag::build(&snap, &options);
    assert!(prev.vhosts.len() >= n / 2, "synthetic cluster routes");
    let dag_only = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let d = std::hint::black_box(dag::build(&snap, &options));
                let ms = ms_since(t);
                prev = d;
                ms
            })
            .collect(),
    );
    drop(prev);

    // The same beside Gateway API objects: built in two halves as well (the Gateway API objects
    // in one of them), and on one thread, as every build with a GatewayClass was before.
    let mut with_gateway = snap.clone();
    for o in sluice::synth::gateway_api(100.min(n / 5)) {
        with_gateway.insert(o);
    }
    let time_build = |build: fn(&Snapshot, &dag::Options) -> Dag| {
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    let d = std::hint::black_box(build(&with_gateway, &options));
                    let ms = ms_since(t);
                    drop(d);
                    ms
                })
                .collect(),
        )
    };
    let dag_only_gateway_api = time_build(dag::build);
    let dag_only_gateway_api_one_thread = time_build(dag::build_on_one_thread);
    drop(with_gateway);

    // sluice's path from nothing: a new encoder each time, as at start-up. (Translation and
    // encoding are one phase here, timed as `encode`.)
    let fresh = || {
        let d = Arc::new(dag::build(&snap, &options));
        let mut encoder = Encoder::new(translate_options.clone());
        let (x, retired) = encoder.encode(&d);
        (encoder, x, retired)
    };
    let mut prev = fresh();
    assert!(
        !prev.1.of(translate::ResourceType::Cluster).is_empty(),
        "synthetic cluster has clusters"
    );
    // The model is built as `Pipeline::publish` builds it in full, and indexed after the rest.
    let mut incremental = Incremental::new(options.clone());
    // The reference workload just before and just after, in the same minute of the machine.
    let mut reference = common::reference::times(runs);
    // `Pipeline::publish` itself, a full build each time. At sluice's start: a new pipeline, whose
    // previous state is the empty configuration. In a running sluice: an IngressClass of another
    // controller comes and goes, so each publication builds in full and replaces a whole model.
    // Each publication is timed to its return, when its resources are on the xDS server's watch;
    // what it leaves behind (the index, the drop of what it replaced) is waited for outside the
    // timing, as the next change in production usually comes long after.
    let start: Vec<f64> = (0..runs)
        .map(|_| {
            let pipeline = Pipeline::new(options.clone(), translate_options.clone());
            let t = Instant::now();
            let (_, path) = pipeline.publish_counted(&snap);
            let ms = ms_since(t);
            assert_eq!(path, PublishPath::Full);
            pipeline.settle();
            ms
        })
        .collect();
    let sluice: Vec<Times> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            let (d, kind) = incremental.build_model(None, &snap);
            assert_eq!(kind, BuildKind::Full);
            let d = Arc::new(d);
            let t1 = Instant::now();
            let mut encoder = Encoder::new(translate_options.clone());
            let (x, retired) = encoder.encode(&d);
            let t2 = Instant::now();
            prev = std::hint::black_box((encoder, x, retired));
            let t3 = Instant::now();
            incremental.index(&snap, &d);
            sluice_times(t0, t1, t2, t3, Instant::now())
        })
        .collect();
    reference.extend(common::reference::times(runs));

    let hashing = hashing(&prev.1, runs);

    // `Pipeline::publish` in a running sluice: a full build each time (see `start` above).
    let other_class = {
        let mut s = snap.clone();
        let class = k8s_openapi::api::networking::v1::IngressClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("another-controllers".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        (s.ingress_classes).insert(ObjKey::new("", "another-controllers"), Arc::new(class));
        s
    };
    let pipeline = Pipeline::new(options.clone(), translate_options.clone());
    pipeline.publish(&snap);
    pipeline.settle();
    let published_running: Vec<f64> = (0..runs)
        .map(|i| {
            let next = if i % 2 == 0 { &other_class } else { &snap };
            let t = Instant::now();
            let (_, path) = pipeline.publish_counted(next);
            let ms = ms_since(t);
            assert_eq!(path, PublishPath::Full);
            pipeline.settle();
            ms
        })
        .collect();
    drop((pipeline, other_class));

    // A full rebuild in a running sluice: the encoder holds the previous model.
    let (mut encoder, mut prev_xds, _) = prev;
    let running: Vec<Times> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            let d = Arc::new(incremental.build_model(None, &snap).0);
            let t1 = Instant::now();
            let (x, retired) = encoder.encode(&d);
            let t2 = Instant::now();
            drop(retired);
            prev_xds = std::hint::black_box(x);
            let t3 = Instant::now();
            incremental.index(&snap, &d);
            sluice_times(t0, t1, t2, t3, Instant::now())
        })
        .collect();
    drop((encoder, prev_xds));

    // Every proto at once, replacing (and so dropping) the previous result.
    let mut prev_dag = dag::build(&snap, &options);
    let mut prev_xds =
        xds::Snapshot::from_resources(&translate::build(&prev_dag, &translate_options));
    let all_protos: Vec<Times> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            let d = dag::build(&snap, &options);
            let t1 = Instant::now();
            let resources = translate::build(&d, &translate_options);
            let t2 = Instant::now();
            let x = xds::Snapshot::from_resources(&resources);
            let t3 = Instant::now();
            drop(resources);
            prev_dag = std::hint::black_box(d);
            prev_xds = std::hint::black_box(x);
            let t4 = Instant::now();
            Times {
                dag: ms(t0, t1),
                translate: ms(t1, t2),
                encode: ms(t2, t3),
                drop: ms(t3, t4),
                index: 0.0,
                total: ms(t0, t4),
            }
        })
        .collect();
    drop((prev_dag, prev_xds));

    let r = Row {
        prepare,
        services,
        service_index,
        dag_only,
        dag_only_gateway_api,
        dag_only_gateway_api_one_thread,
        publish_start: median(start),
        publish_running: median(published_running),
        sluice: Medians::of(&sluice),
        running: Medians::of(&running),
        all_protos: Medians::of(&all_protos),
        hashing,
        reference: median(reference),
    };
    println!(
        "{n:>6} routing objects, {:>6} services, {:>6} endpoints (median of {runs}):",
        snap.services().len(),
        endpoints
    );
    println!(
        "  the store's preparation of {:>5} IngressRoutes and {:>5} Ingresses {:8.2} ms (as they arrive, not in a build)",
        snap.ingressroutes_v1beta1.len() + snap.ingressroutes_v1.len(),
        snap.ingresses.len(),
        r.prepare
    );
    println!(
        "  the store's puts of {:>5} Services and {:>5} EndpointSlices         {:8.2} ms (as they arrive, not in a build; {:.2} ms of it the index by Service name)",
        snap.services().len(),
        snap.endpoint_slices().len(),
        r.services,
        r.service_index
    );
    println!(
        "  dag::build alone                              {:8.2} ms",
        r.dag_only
    );
    println!(
        "  dag::build alone, beside a Gateway and {} HTTPRoutes {:8.2} ms (on one thread {:.2} ms)",
        100.min(n / 5),
        r.dag_only_gateway_api,
        r.dag_only_gateway_api_one_thread
    );
    println!(
        "  Pipeline::publish of a full build, at sluice's start {:8.2} ms; in a running sluice {:.2} ms",
        r.publish_start, r.publish_running
    );
    for (what, m) in [
        ("full rebuild, sluice's path, from nothing    ", r.sluice),
        ("full rebuild, sluice's path, running         ", r.running),
    ] {
        println!(
            "  {what}{:8.2} ms = dag {:.2} + translate and encode {:.2} + drop previous {:.2}; then index {:.2}",
            m.total, m.dag, m.encode, m.drop, m.index
        );
    }
    println!(
        "  machine reference (a fixed workload, no sluice code, before and after) {:.2} ms: Pipeline::publish at start = {:.2} of it, sluice's path from nothing with the drop {:.2}",
        r.reference,
        r.publish_start / r.reference,
        r.sluice.total / r.reference
    );
    let h = r.hashing;
    println!(
        "  content hashes of {} clusters and load assignments: BLAKE3 (the hash alone) {:.2} ms; Resource::new one at a time {:.2} ms, Resource::new_many {:.2} ms",
        h.resources, h.blake3_one, h.one, h.many
    );
    let m = r.all_protos;
    println!(
        "  full rebuild, every proto at once             {:8.2} ms = dag {:.2} + translate {:.2} + encode {:.2} + drop previous {:.2}",
        m.total, m.dag, m.translate, m.encode, m.drop
    );
    r
}

/// `Pipeline::publish` at sluice's start, `runs` times on a cluster of `n` routing objects, with
/// nothing else timed (the profiling knob `DAG_BENCH_PUBLISH`); prints the median.
fn publish_only(n: usize, runs: usize) {
    let snap = common::cluster(n);
    let (options, translate_options) = (Options::default(), translate::Options::default());
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let pipeline = Pipeline::new(options.clone(), translate_options.clone());
            let t = Instant::now();
            pipeline.publish(&snap);
            let ms = ms_since(t);
            pipeline.settle();
            ms
        })
        .collect();
    println!(
        "Pipeline::publish at sluice's start, {n} routing objects: {:.2} ms (median of {runs})",
        median(times)
    );
}

fn main() {
    let smoke = common::smoke();
    let (small, large, runs) = if smoke {
        (100, 1_000, 3)
    } else {
        (1_000, 10_000, 9)
    };
    // Exploration knobs (profiling one size): DAG_BENCH_ONLY=10000 [DAG_BENCH_RUNS=1] runs that size
    // alone and records nothing; with DAG_BENCH_KEY_ORDER=1 as well, on the snapshot laid out in
    // key order (`laid_out_in_key_order`), to see what memory locality is worth.
    // DAG_BENCH_PUBLISH=<objects>:<runs> runs `Pipeline::publish` at sluice's start alone, for a
    // profiler (`perf record`): the cluster is made, then published that many times, nothing else.
    if let Ok(spec) = std::env::var("DAG_BENCH_PUBLISH") {
        let (n, runs) = spec
            .split_once(':')
            .and_then(|(n, r)| Some((n.parse().ok()?, r.parse().ok()?)))
            .expect("DAG_BENCH_PUBLISH is <objects>:<runs>");
        publish_only(n, runs);
        return;
    }
    if let Ok(n) = std::env::var("DAG_BENCH_ONLY") {
        let runs = std::env::var("DAG_BENCH_RUNS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(runs);
        let key_order = std::env::var_os("DAG_BENCH_KEY_ORDER").is_some();
        row(
            n.parse().expect("DAG_BENCH_ONLY is a number"),
            runs,
            key_order,
        );
        return;
    }
    if smoke {
        // The key-order layout of the exploration knob, so it cannot rot.
        row(small, runs, true);
    }
    let a = row(small, runs, false);
    let b = row(large, runs, false);
    let factor = large / small;
    let ratio = b.publish_start / a.publish_start;
    let dag_ratio = b.dag_only / a.dag_only;
    println!(
        "scaling {large}/{small} ({factor}x objects): Pipeline::publish of a full build {ratio:.1}x time, dag::build alone {dag_ratio:.1}x"
    );
    // What the reference workload does not tell: how long this machine makes a build wait on
    // memory (`common::reference::memory_latency_ns`).
    let latency = common::reference::memory_latency_ns();
    println!(
        "machine memory latency (a load depending on the one before, over 64 MiB, no sluice code) {latency:.1} ns"
    );
    if !smoke {
        let r2 = |v: f64| serde_json::json!((v * 100.0).round() / 100.0);
        let mut results = serde_json::Map::new();
        results.insert("dag_build_ms_10k".into(), r2(b.publish_start));
        results.insert("dag_path_with_drop_ms_10k".into(), r2(b.sluice.total));
        results.insert(
            "full_rebuild_running_publish_ms_10k".into(),
            r2(b.publish_running),
        );
        results.insert("dag_only_build_ms_10k".into(), r2(b.dag_only));
        results.insert(
            "dag_only_build_gateway_api_ms_10k".into(),
            r2(b.dag_only_gateway_api),
        );
        results.insert(
            "dag_only_build_gateway_api_one_thread_ms_10k".into(),
            r2(b.dag_only_gateway_api_one_thread),
        );
        results.insert("machine_reference_ms".into(), r2(b.reference));
        results.insert("machine_memory_latency_ns".into(), r2(latency));
        results.insert(
            "dag_build_per_reference_10k".into(),
            common::round3(b.publish_start / b.reference),
        );
        results.insert("store_prepare_ms_10k".into(), r2(b.prepare));
        results.insert("store_services_ms_10k".into(), r2(b.services));
        results.insert("store_service_index_ms_10k".into(), r2(b.service_index));
        results.insert("translate_ms_10k".into(), r2(b.sluice.encode));
        results.insert("dag_index_ms_10k".into(), r2(b.sluice.index));
        results.insert("full_rebuild_running_ms_10k".into(), r2(b.running.total));
        results.insert(
            "full_rebuild_all_protos_ms_10k".into(),
            r2(b.all_protos.total),
        );
        results.insert(
            "hash_small_blake3_one_ms_10k".into(),
            r2(b.hashing.blake3_one),
        );
        results.insert("hash_small_one_ms_10k".into(), r2(b.hashing.one));
        results.insert("hash_small_many_ms_10k".into(), r2(b.hashing.many));
        results.insert("dag_scaling_ratio_10k_1k".into(), r2(ratio));
        results.insert("dag_only_scaling_ratio_10k_1k".into(), r2(dag_ratio));
        common::write_results(results);
    }
}
