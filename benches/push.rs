//! One object changes → the delta xDS push reaches a connected client (`change_push_ms_10k`).
//!
//! A real ADS server (the production `xds::serve` over loopback gRPC) serves the pipeline's
//! snapshots of a synthetic cluster with 10k routing objects (`crates/core/src/synth.rs`). A delta client
//! subscribes to every resource, ACKs every response, and timestamps each response as it is
//! decoded. Then, one at a time, a change is handed to the pipeline — as the cluster-mode rebuild
//! loop does once its debounce window has passed — and the time until the client holds the
//! resulting push is measured, split into the rebuild (`Pipeline::publish`: dag::build, translate,
//! encode) and the push (diff against what the client holds, encode, HTTP/2, decode).
//!
//! Three kinds of change: a routing object (a root IngressRoute's route changes → the route
//! configuration is pushed), an EndpointSlice (a pod address changes → one load assignment is
//! pushed), and a Service (a vertex's Service is deleted, then created again → its route answers
//! 503, then routes again: the route configuration is pushed each time; keys
//! `change_push_service_{deleted,created}_*`).
//!
//! Then the cluster takes Gateway API objects (`synth::gateway_api`: a GatewayClass, a Gateway
//! and 100 HTTPRoutes on hosts of their own), and two more series run: a root IngressRoute's
//! change as before, now beside the Gateway API objects (`change_push_beside_gateway_api_*`),
//! and an HTTPRoute's change (`change_push_httproute_*`). Each prints how many routing
//! objects its builds rebuilt. A last series of routing changes comes back to back, with no pause
//! before each (`change_push_back_to_back_ms_10k`); its ratio to the first series
//! (`change_push_per_back_to_back_10k`) is what coming back from idle costs a change.
//!
//! `cargo bench --bench push` runs 10k objects; any other way (`cargo test --all-targets`) a smoke
//! run with 500 objects that records nothing. sluice's default route shards (`auto`: 16 at 10k
//! objects; docs/xds.md, "Route shards": a routing change pushes its shard's configuration
//! only); `BENCH_HTTP_ROUTE_SHARDS=N` fixes N of them and records the keys as `shardsN_<key>`
//! (1: one route configuration). `BENCH_HTTP_ROUTES=N` runs the Gateway API series with N
//! HTTPRoutes instead of 100 and records nothing (how an HTTPRoute's change grows with them).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
};
use sluice::api::ObjKey;
use sluice::app::{Pipeline, PublishPath};
use sluice::store::{AnyObject, Snapshot};
use sluice::translate::ResourceType;
use sluice::{dag, translate};
use tokio::sync::mpsc;

/// The pause after each timed change: the next one comes to a quiet process, as a change to a
/// cluster whose objects change now and then does.
const PAUSE: Duration = Duration::from_millis(20);

/// One response as the client saw it.
struct Push {
    t: ResourceType,
    at: Instant,
    names: Vec<String>,
}

/// A delta ADS client that subscribes to `subscribe` and ACKs every response; each response is
/// reported on the returned channel. Like an Envoy started with `sluice bootstrap`, it takes
/// HTTP/2 frames of up to `XDS_MAX_FRAME_SIZE`.
async fn client(
    port: u16,
    subscribe: Vec<(ResourceType, Vec<String>)>,
) -> mpsc::UnboundedReceiver<Push> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .max_frame_size(sluice::cli::bootstrap::XDS_MAX_FRAME_SIZE)
        .connect()
        .await
        .expect("connect to the ADS server");
    let (req_tx, req_rx) = mpsc::unbounded_channel::<DeltaDiscoveryRequest>();
    for (i, (t, names)) in subscribe.into_iter().enumerate() {
        req_tx
            .send(DeltaDiscoveryRequest {
                node: (i == 0).then(|| Node {
                    id: "bench".into(),
                    cluster: "bench".into(),
                    ..Default::default()
                }),
                type_url: t.type_url().into(),
                resource_names_subscribe: names,
                ..Default::default()
            })
            .unwrap();
    }
    let mut inbound = AggregatedDiscoveryServiceClient::new(channel)
        .max_decoding_message_size(256 << 20)
        .delta_aggregated_resources(tokio_stream::wrappers::UnboundedReceiverStream::new(req_rx))
        .await
        .expect("delta stream")
        .into_inner();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(resp)) = inbound.message().await {
            let at = Instant::now();
            let t = ResourceType::from_type_url(&resp.type_url).expect("a type sluice serves");
            let _ = req_tx.send(DeltaDiscoveryRequest {
                type_url: resp.type_url.clone(),
                response_nonce: resp.nonce.clone(),
                ..Default::default()
            });
            let names = resp.resources.iter().map(|r| r.name.clone()).collect();
            if tx.send(Push { t, at, names }).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for the next push of type `t` (other types are skipped); panics after 60 s.
async fn next_push(rx: &mut mpsc::UnboundedReceiver<Push>, t: ResourceType) -> Push {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(p)) if p.t == t => return p,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the xDS stream ended"),
            Err(_) => panic!("no {} push within 60 s", t.short()),
        }
    }
}

/// The synthetic root `i` with its first route's prefix set to `prefix`.
fn change_route(snap: &mut Snapshot, i: usize, prefix: &str) {
    let key = ObjKey::new(format!("team-{}", i % 100), format!("root-{i}"));
    let mut root = (**snap
        .ingressroutes_v1beta1
        .get(&key)
        .expect("synthetic root exists"))
    .clone();
    root.spec.routes[0].match_ = prefix.to_string();
    snap.insert(AnyObject::IngressRouteV1beta1(Arc::new(root)));
}

/// The synthetic HTTPRoute `i` with its rule's path prefix set to `prefix`.
fn change_http_route(snap: &mut Snapshot, i: usize, prefix: &str) {
    let key = ObjKey::new(format!("team-{}", i % 100), format!("gw-route-{i}"));
    let mut route = (***snap.http_routes.get(&key).expect("synthetic HTTPRoute")).clone();
    let rule = &mut route.spec.rules.as_mut().expect("a rule")[0];
    let path = rule.matches.as_mut().expect("a match")[0].path.as_mut();
    path.expect("a path match").value = Some(prefix.to_string());
    snap.insert(AnyObject::HttpRoute(Arc::new(route)));
}

/// Times `changes` changes made by `change(snap, n)`, each published and its route
/// configuration's push awaited, with `pause` after each; also the routing objects each build
/// rebuilt (None: a full build).
fn route_changes(
    rt: &tokio::runtime::Runtime,
    rx: &mut mpsc::UnboundedReceiver<Push>,
    pipeline: &Pipeline,
    snap: &mut Snapshot,
    (changes, pause): (usize, Duration),
    mut change: impl FnMut(&mut Snapshot, usize),
) -> (Vec<Sample>, Vec<Option<usize>>) {
    let mut samples = Vec::new();
    let mut rebuilt = Vec::new();
    for n in 0..changes {
        let start = Instant::now();
        change(snap, n);
        let (_, path) = pipeline.publish_counted(snap);
        let built = Instant::now();
        let push = rt.block_on(next_push(rx, ResourceType::Route));
        samples.push(Sample {
            build_ms: (built - start).as_secs_f64() * 1e3,
            total_ms: (push.at - start).as_secs_f64() * 1e3,
        });
        rebuilt.push(match path {
            PublishPath::Partial { objects } => Some(objects),
            _ => None,
        });
        std::thread::sleep(pause);
    }
    (samples, rebuilt)
}

/// "N partial builds of up to M objects, F full".
fn describe_builds(rebuilt: &[Option<usize>]) -> String {
    let partial: Vec<usize> = rebuilt.iter().flatten().copied().collect();
    format!(
        "{} partial builds of up to {} routing objects, {} full",
        partial.len(),
        partial.iter().max().unwrap_or(&0),
        rebuilt.len() - partial.len()
    )
}

/// The first endpoint of the synthetic slice `name` in `ns` moved to `address`.
fn change_endpoint(snap: &mut Snapshot, ns: &str, name: &str, address: &str) {
    let key = ObjKey::new(ns, format!("{name}-abc"));
    let mut slice = (**snap.endpoint_slices().get(&key).expect("synthetic slice")).clone();
    let mut ready = slice.ready.to_vec();
    ready[0] = address.parse().expect("an IP address");
    slice.ready = ready.into();
    snap.put_endpoint_slice(key, Arc::new(slice));
}

struct Sample {
    build_ms: f64,
    total_ms: f64,
}

fn report(what: &str, samples: &[Sample]) -> (f64, f64) {
    let total: Vec<f64> = samples.iter().map(|s| s.total_ms).collect();
    let build: Vec<f64> = samples.iter().map(|s| s.build_ms).collect();
    let (p50, p99) = (
        common::quantile(&total, 0.5),
        common::quantile(&total, 0.99),
    );
    // Pipeline::publish returns after it dropped the previous build, which can be after the client
    // already holds the push; so the publish call is reported on its own, not subtracted.
    println!(
        "{what:<22} change → push received: p50 {p50:8.3} ms  p99 {p99:8.3} ms   \
         (Pipeline::publish call p50 {:.3} ms; {} changes)",
        common::quantile(&build, 0.5),
        samples.len()
    );
    (p50, p99)
}

fn main() {
    let smoke = common::smoke();
    let (objects, changes) = if smoke { (500, 5) } else { (10_000, 50) };
    let rt = common::runtime(2);
    let mut snap = common::cluster(objects);
    let (shards, key_prefix) = common::route_shards();
    let pipeline = Pipeline::new(
        dag::Options::default(),
        translate::Options {
            route_shards: shards,
            ..Default::default()
        },
    );
    let dag = pipeline.publish(&snap);
    println!(
        "{objects} routing objects: {} virtual hosts, {} clusters; route shards {shards}: {}",
        dag.vhosts.len(),
        dag.clusters.len(),
        shards.count(dag.vhosts.len(), None)
    );
    let (port, _stop_xds) = common::serve_xds(&rt, &pipeline);

    // Subscribe to everything the snapshot holds, and wait until the client has all of it.
    let current = pipeline.xds().borrow().clone();
    let names = |t: ResourceType| {
        current
            .of(t)
            .keys()
            .map(|k| k.to_string())
            .collect::<Vec<String>>()
    };
    let subscribe = vec![
        (ResourceType::Cluster, vec![]),
        (ResourceType::Endpoint, names(ResourceType::Endpoint)),
        (ResourceType::Listener, vec![]),
        (ResourceType::Route, names(ResourceType::Route)),
    ];
    let t0 = Instant::now();
    let mut rx = rt.block_on(async {
        let mut rx = client(port, subscribe).await;
        let mut missing: BTreeSet<ResourceType> = [
            ResourceType::Cluster,
            ResourceType::Endpoint,
            ResourceType::Listener,
            ResourceType::Route,
        ]
        .into();
        while !missing.is_empty() {
            let p = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .expect("initial sync within 60 s")
                .expect("stream open");
            missing.remove(&p.t);
        }
        rx
    });
    println!(
        "initial delta sync of {} resources: {:.1} ms",
        ResourceType::ALL
            .iter()
            .map(|t| current.of(*t).len())
            .sum::<usize>(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    // Let the ACKs settle.
    std::thread::sleep(Duration::from_millis(200));

    let mut route_samples = Vec::new();
    let mut endpoint_samples = Vec::new();
    // [deleted, created]
    let mut service_samples = [Vec::new(), Vec::new()];
    for n in 0..changes {
        // A routing object changes.
        let i = (n * 7919) % (objects * 2 / 5);
        // Timed from the store's insert of the changed object: the store prepares an
        // IngressRoute (its rules' verdict, its routes lowered) as it takes it in.
        let start = Instant::now();
        change_route(&mut snap, i, &format!("/changed-{n}"));
        pipeline.publish(&snap);
        let built = Instant::now();
        let push = rt.block_on(next_push(&mut rx, ResourceType::Route));
        route_samples.push(Sample {
            build_ms: (built - start).as_secs_f64() * 1e3,
            total_ms: (push.at - start).as_secs_f64() * 1e3,
        });
        std::thread::sleep(PAUSE);

        // A pod moves.
        let svc = format!("root-svc-{i}");
        let ns = format!("team-{}", i % 100);
        change_endpoint(
            &mut snap,
            &ns,
            &svc,
            &format!("10.254.{}.{}", n / 250, n % 250 + 1),
        );
        let start = Instant::now();
        pipeline.publish(&snap);
        let built = Instant::now();
        let push = rt.block_on(next_push(&mut rx, ResourceType::Endpoint));
        assert_eq!(
            push.names.len(),
            1,
            "one endpoint change pushes one load assignment: {:?}",
            push.names
        );
        endpoint_samples.push(Sample {
            build_ms: (built - start).as_secs_f64() * 1e3,
            total_ms: (push.at - start).as_secs_f64() * 1e3,
        });
        std::thread::sleep(PAUSE);

        // A Service goes (its route answers 503), then comes back: the route configuration
        // changes both times. A vertex's Service, in another namespace than its root.
        let key = ObjKey::new(format!("app-{}", i % 100), format!("vertex-svc-{i}"));
        let svc = snap
            .services()
            .get(&key)
            .expect("synthetic Service")
            .clone();
        for present in [false, true] {
            if present {
                snap.put_service(key.clone(), svc.clone());
            } else {
                snap.remove_service(&key);
            }
            let start = Instant::now();
            pipeline.publish(&snap);
            let built = Instant::now();
            let push = rt.block_on(next_push(&mut rx, ResourceType::Route));
            service_samples[usize::from(present)].push(Sample {
                build_ms: (built - start).as_secs_f64() * 1e3,
                total_ms: (push.at - start).as_secs_f64() * 1e3,
            });
            std::thread::sleep(PAUSE);
        }
    }
    let (route_p50, route_p99) = report("routing object change", &route_samples);
    let (ep_p50, ep_p99) = report("endpoint change", &endpoint_samples);
    let (gone_p50, gone_p99) = report("Service deleted", &service_samples[0]);
    let (back_p50, back_p99) = report("Service created", &service_samples[1]);
    // Routing changes again, back to back: each comes as soon as the one before is pushed, while
    // the caches (and the TLB) still hold what that one touched. The series above comes after a
    // pause, as a change to a quiet cluster does; the ratio of the two is what the return from
    // idle costs on this machine (docs/benchmarks.md, "Reading the numbers").
    let (warm, _) = route_changes(
        &rt,
        &mut rx,
        &pipeline,
        &mut snap,
        (changes, Duration::ZERO),
        |snap, n| {
            let i = (n * 7919 + 3) % (objects * 2 / 5);
            change_route(snap, i, &format!("/again-{n}"));
        },
    );
    let (warm_p50, _) = report("back to back", &warm);
    let idle_ratio = route_p50 / warm_p50;
    println!(
        "{:<22} a routing change after {} ms idle / back to back (p50): {idle_ratio:.2}",
        "",
        PAUSE.as_millis()
    );

    // The same cluster with Gateway API objects. Exploration knob: `BENCH_HTTP_ROUTES=N` takes
    // N HTTPRoutes (at most 2/5 of the objects) instead of 100, and records nothing.
    let explored = std::env::var("BENCH_HTTP_ROUTES").ok().map(|n| {
        let n: usize = n.parse().expect("BENCH_HTTP_ROUTES is a number");
        assert!(
            n * 5 / 2 <= objects,
            "BENCH_HTTP_ROUTES={n}: at most {}",
            objects * 2 / 5
        );
        n
    });
    let http_routes = explored.unwrap_or(if smoke { 10 } else { 100 });
    for o in sluice::synth::gateway_api(http_routes) {
        snap.insert(o);
    }
    pipeline.publish(&snap);
    rt.block_on(next_push(&mut rx, ResourceType::Route));
    std::thread::sleep(Duration::from_millis(200));
    let (beside, beside_builds) = route_changes(
        &rt,
        &mut rx,
        &pipeline,
        &mut snap,
        (changes, PAUSE),
        |snap, n| {
            let i = (n * 7919 + 1) % (objects * 2 / 5);
            change_route(snap, i, &format!("/beside-{n}"));
        },
    );
    let (http_route, http_route_builds) = route_changes(
        &rt,
        &mut rx,
        &pipeline,
        &mut snap,
        (changes, PAUSE),
        |snap, n| {
            change_http_route(snap, (n * 37) % http_routes, &format!("/moved-{n}"));
        },
    );
    let (beside_p50, beside_p99) = report("beside Gateway API", &beside);
    println!("{:<22} {}", "", describe_builds(&beside_builds));
    let (hr_p50, hr_p99) = report("HTTPRoute change", &http_route);
    println!("{:<22} {}", "", describe_builds(&http_route_builds));
    // Not a timing: which path the builds took. A root away from the Gateway API hosts is
    // rebuilt on its own, beside them as without them.
    assert!(
        beside_builds.iter().all(Option::is_some),
        "a root's change beside Gateway API objects is built in part: {beside_builds:?}"
    );
    if !smoke && explored.is_none() {
        let mut r = serde_json::Map::new();
        r.insert("change_push_ms_10k".into(), common::round3(route_p50));
        r.insert("change_push_p99_ms_10k".into(), common::round3(route_p99));
        r.insert(
            "change_push_back_to_back_ms_10k".into(),
            common::round3(warm_p50),
        );
        r.insert(
            "change_push_per_back_to_back_10k".into(),
            common::round3(idle_ratio),
        );
        r.insert("change_push_endpoint_ms_10k".into(), common::round3(ep_p50));
        r.insert(
            "change_push_endpoint_p99_ms_10k".into(),
            common::round3(ep_p99),
        );
        for (what, p50, p99) in [
            ("deleted", gone_p50, gone_p99),
            ("created", back_p50, back_p99),
        ] {
            r.insert(
                format!("change_push_service_{what}_ms_10k"),
                common::round3(p50),
            );
            r.insert(
                format!("change_push_service_{what}_p99_ms_10k"),
                common::round3(p99),
            );
        }
        for (what, p50, p99) in [
            ("beside_gateway_api", beside_p50, beside_p99),
            ("httproute", hr_p50, hr_p99),
        ] {
            r.insert(format!("change_push_{what}_ms_10k"), common::round3(p50));
            r.insert(
                format!("change_push_{what}_p99_ms_10k"),
                common::round3(p99),
            );
        }
        common::write_results(common::prefixed(r, &key_prefix));
    }
}
