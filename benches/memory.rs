//! Where sluice's memory goes (not a test): live heap bytes of each part of a running control
//! plane, measured in-process with a counting allocator over jemalloc (the allocator the binary
//! uses), for the synthetic cluster of the cluster benchmark's size.
//!
//!     cargo bench --bench memory -- [--objects 10000]
//!
//! Run any other way (`cargo test --all-targets` runs it in the test profile) it does a smoke run
//! with 300 routing objects. It records nothing in target/bench/results.json: the memory target
//! (`rss_mib_10k`) is measured on the real process in cluster mode by `benches/cluster.rs`; this
//! one says which part holds how much.
//!
//! Parts, in the order a cluster-mode sluice builds them:
//! - the cluster state: every watched object, decoded (the store snapshot), plus per object the
//!   status as last seen (what the status writer compares with);
//! - the pipeline after its first publication: the routing model, the incremental builder's links,
//!   the encoder's per-resource caches and the xDS snapshot served to Envoy;
//! - the webhook's index;
//! - the same after one more change (both the old and new model share structure).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

use serde_json::{Value, json};
use sluice::api::Kind;
use sluice::app::Pipeline;
use sluice::dag::{self, Options};
use sluice::k8s::state::{ClusterState, prepare};
use sluice::store::{AnyObject, ServicePorts, SliceEndpoints};
use sluice::synth::{self, Shape};
use sluice::translate;
use sluice::webhook::IndexHandle;

/// Counts live heap bytes (allocated minus freed) over jemalloc.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static INNER: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// SAFETY: every call is forwarded unchanged to jemalloc; only a counter is updated besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { INNER.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { INNER.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { INNER.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// This process's resident set (VmRSS), MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// What `make` returns, and the live heap it added (MiB).
fn sized<T>(make: impl FnOnce() -> T) -> (T, f64) {
    let before = live();
    let value = make();
    (value, mib(live() - before))
}

/// The status sluice writes on a valid object (see `k8s::status`), as the watch returns it.
fn written_status() -> Value {
    let condition = |type_: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": "True", "reason": reason, "message": message,
               "lastTransitionTime": "2026-11-22T10:00:00Z", "observedGeneration": 1})
    };
    json!({
        "currentStatus": "valid",
        "description": "valid IngressRoute",
        "observedGeneration": 1,
        "conditions": [
            condition("Valid", "Valid", "valid IngressRoute"),
            condition("Ready", "Programmed", "routes are programmed into Envoy"),
        ],
    })
}

/// Every object of the synthetic cluster as the watches deliver it: JSON with generation, status
/// (on routing objects) and managedFields, then `prepare`d and applied as cluster mode does.
fn cluster_state(objects: &[AnyObject], statuses: bool) -> ClusterState {
    fn watched<T: serde::Serialize>(kind: Kind, obj: &T, status: bool) -> Value {
        let mut v = serde_json::to_value(obj).expect("objects serialize");
        v["metadata"]["generation"] = json!(1);
        v["metadata"]["resourceVersion"] = json!("123456");
        v["metadata"]["uid"] = json!("0b2f6c5e-7d1a-4c3b-9e8f-1a2b3c4d5e6f");
        v["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Update",
            "apiVersion": kind.api_version(), "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]);
        if status {
            v["status"] = written_status();
        }
        v
    }
    let mut state = ClusterState::default();
    for o in objects {
        let kind = o.kind();
        let v = match o {
            AnyObject::IngressRouteV1beta1(o) => watched(kind, o.as_ref(), statuses),
            AnyObject::Ingress(o) => watched(kind, o.as_ref(), statuses),
            AnyObject::Service(o) => watched(kind, o.as_ref(), false),
            AnyObject::EndpointSlice(o) => watched(kind, o.as_ref(), false),
            AnyObject::Secret(o) => watched(kind, o.as_ref(), false),
            other => panic!("the synthetic cluster has no {}", other.kind()),
        };
        let p = prepare(kind, v).expect("synthetic objects prepare");
        state.apply(p);
    }
    state
}

fn main() {
    let smoke = !std::env::args().any(|a| a == "--bench");
    let mut objects = if smoke { 300 } else { 10_000 };
    let argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match argv.as_slice() {
        [] => {}
        [flag, n] if flag == "--objects" => {
            objects = n
                .parse::<usize>()
                .expect("--objects needs a number")
                .clamp(10, 100_000)
        }
        _ => panic!("usage: cargo bench --bench memory -- [--objects N]"),
    }
    let shape = Shape {
        routing_objects: objects,
        endpoints_per_service: 5,
        // Cluster mode never holds Secrets that are not TLS certificates.
        unrelated_secrets: 0,
    };
    let synthetic = synth::objects(shape);
    // The decoded objects by kind (deep copies, measured and dropped), and EndpointSlices as the
    // store keeps them.
    fn deep<T: Clone>(
        objects: &[AnyObject],
        pick: impl Fn(&AnyObject) -> Option<&T>,
    ) -> (usize, f64) {
        let (copies, size) = sized(|| {
            objects
                .iter()
                .filter_map(|o| pick(o).cloned())
                .collect::<Vec<T>>()
        });
        (copies.len(), size)
    }
    // What the store keeps of them instead, where it reduces them.
    fn stored<T>(objects: &[AnyObject], reduce: impl Fn(&AnyObject) -> Option<T>) -> (usize, f64) {
        let (kept, size) = sized(|| objects.iter().filter_map(&reduce).collect::<Vec<T>>());
        (kept.len(), size)
    }
    let kinds = [
        (
            "IngressRoutes",
            deep(&synthetic, |o| match o {
                AnyObject::IngressRouteV1beta1(o) => Some(&**o),
                _ => None,
            }),
        ),
        (
            "Ingresses",
            deep(&synthetic, |o| match o {
                AnyObject::Ingress(o) => Some(&**o),
                _ => None,
            }),
        ),
        (
            "Services",
            deep(&synthetic, |o| match o {
                AnyObject::Service(o) => Some(&**o),
                _ => None,
            }),
        ),
        (
            "  as stored",
            stored(&synthetic, |o| match o {
                AnyObject::Service(o) => Some(ServicePorts::from(o.as_ref())),
                _ => None,
            }),
        ),
        (
            "EndpointSlices",
            deep(&synthetic, |o| match o {
                AnyObject::EndpointSlice(o) => Some(&**o),
                _ => None,
            }),
        ),
        (
            "  as stored",
            stored(&synthetic, |o| match o {
                AnyObject::EndpointSlice(o) => Some(SliceEndpoints::from(o.as_ref())),
                _ => None,
            }),
        ),
        (
            "TLS Secrets",
            deep(&synthetic, |o| match o {
                AnyObject::Secret(o) => Some(&**o),
                _ => None,
            }),
        ),
    ];
    let mut rows: Vec<(&str, f64)> = Vec::new();
    let (bare, bare_size) = sized(|| cluster_state(&synthetic, false));
    drop(bare);
    let (state, state_size) = sized(|| cluster_state(&synthetic, true));
    drop(synthetic);
    rows.push(("cluster state: decoded objects, bookkeeping", bare_size));
    rows.push((
        "cluster state: statuses as last seen",
        state_size - bare_size,
    ));
    // What is kept of a status is a digest and its timestamps, not the status (which, as a JSON
    // tree, took a third as much as the decoded objects).
    assert!(
        state_size - bare_size < 0.1 * bare_size,
        "statuses take {:.1} MiB next to {bare_size:.1} MiB of objects",
        state_size - bare_size
    );

    let options = Options::default();
    let (model, size) = sized(|| dag::build(state.snapshot(), &options));
    rows.push(("  (a routing model alone)", size));
    let (xds, size) = sized(|| {
        sluice::xds::Snapshot::from_resources(&translate::build(
            &model,
            &translate::Options::default(),
        ))
    });
    rows.push(("  (its xDS snapshot alone)", size));
    drop((model, xds));

    let (pipeline, size) = sized(|| {
        let pipeline = Pipeline::new(options.clone(), translate::Options::default());
        let dag = pipeline.publish(state.snapshot());
        // What a publication replaces is dropped on another thread; give it a moment.
        std::thread::sleep(std::time::Duration::from_millis(200));
        (pipeline, dag)
    });
    rows.push(("pipeline: model, links, encoder caches, xDS snapshot", size));
    let (index, size) = sized(|| IndexHandle::from_snapshot(state.snapshot(), options.clone()));
    rows.push(("webhook index", size));

    // One changed route: the previous and the new model, snapshot and xDS share structure.
    let mut changed = state.snapshot().clone();
    let first = changed.ingressroutes_v1beta1.values().next();
    if let Some(mut ir) = first.map(|ir| (**ir.object()).clone()) {
        if let Some(r) = ir.spec.routes.first_mut() {
            r.match_ = format!("{}changed", r.match_);
        }
        changed.insert(AnyObject::IngressRouteV1beta1(std::sync::Arc::new(ir)));
    }
    let (dag2, size) = sized(|| {
        let dag2 = pipeline.0.publish(&changed);
        index.replace(&changed);
        std::thread::sleep(std::time::Duration::from_millis(200));
        dag2
    });
    rows.push(("growth after one more change", size));
    let rss_busy = rss_mib();
    // jemalloc's background thread gives freed pages back over its dirty decay (1 s,
    // .cargo/config.toml).
    std::thread::sleep(std::time::Duration::from_millis(2500));

    println!(
        "memory benchmark: {objects} routing objects ({} in the store), live heap bytes per part",
        state.snapshot().len()
    );
    for (name, v) in &rows {
        println!("  {name:<58} {v:>8.1} MiB");
    }
    println!("  {:<58} {:>8.1} MiB", "total live", mib(live()),);
    println!(
        "process RSS: {rss_busy:.1} MiB right after the last publication, {:.1} MiB once quiet",
        rss_mib()
    );
    println!("decoded objects by kind (each a deep copy of the synthetic cluster's):");
    for (name, (n, v)) in &kinds {
        println!("  {name:<16} {n:>6} objects {v:>8.1} MiB");
    }
    std::hint::black_box((&state, &pipeline, &index, &dag2, &changed));
}
