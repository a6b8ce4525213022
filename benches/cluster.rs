//! sluice in cluster mode against a real kube-apiserver: memory, propagation to Envoy, status
//! write throughput and idle status writes.
//!
//! Runs inside the e2e control plane (etcd + kube-apiserver built from source, backends in a
//! network namespace, real Envoy): `e2e/run.sh --bench` runs it in full (`cargo bench --bench
//! cluster`), and `make e2e` runs the smoke sizes after the e2e tests. Without that environment
//! (plain `cargo test --all-targets`) there is no apiserver to measure and it says so and exits.
//!
//! What it does, in order:
//! 1. creates the synthetic cluster through the API (as many clients would): Services with
//!    EndpointSlices, `unrelated` Secrets that no route uses (sluice must never hold them), and
//!    half of the routes (root IngressRoutes, each with its own host and Service);
//! 2. starts sluice (leader, webhook installed, so every create below also passes admission) and
//!    an Envoy on its xDS, and waits until every route's status is valid at its generation;
//! 3. **propagation**: creates one new route at a time and times create → first 200 through
//!    Envoy (`propagation_p50_ms_5k`, `propagation_p99_ms_5k`). The first create, Envoy's first
//!    route configuration update since its start, is timed on its own before the series
//!    (`propagation_first_after_envoy_start_ms_5k`, with the pages Envoy faulted in for it). It
//!    splits each create's way by
//!    the two logs: sluice's build published, Envoy's route configuration received, its route
//!    table built, the update accepted (`propagation_*_p50_ms_5k`, ms after the create; every
//!    create in target/bench/cluster-propagation.tsv);
//! 4. **status throughput**: creates a burst of new routes and times the last create → every one
//!    of them has a valid status at its generation (`status_1000_s`), and first create → done;
//! 5. creates the rest of the routes (10k in all), waits for their statuses, then stays idle for
//!    60 s counting status writes (`status_writes_idle`) and sampling sluice's RSS
//!    (`rss_mib_10k`; `rss_peak_mib_10k` is the high-water mark of this process and of a fresh
//!    sluice started over the full cluster, whichever is higher).
//!
//! Every load is bounded; every wait has a deadline. During the burst it also prints the CPU time
//! each program used and the apiserver's latency histograms; `BENCH_PERF=FILE` records a CPU
//! profile of sluice during the burst (`perf record`). sluice runs with its default route shards
//! (`auto`: 16 from 2,000 hosts on; docs/xds.md, "Route shards"); `BENCH_HTTP_ROUTE_SHARDS=N`
//! runs it with N of them and records its keys as `shardsN_<key>` (1: one route configuration).

mod common;
#[allow(dead_code)]
#[path = "../e2e/tests/support/mod.rs"]
mod support;

#[path = "cluster/objects.rs"]
mod objects;
#[path = "cluster/readings.rs"]
mod readings;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use sluice::api::heptio_v1beta1::IngressRoute;

use common::apiserver::{create_all, create_namespaces, first_200, ms, obj, service};
use common::process::{cpu_by_name, minor_faults, rss_mib, status_mib};
use objects::{extras, host, ingresses, namespace_of, route_for, routes, tls_secrets, wait_valid};
use readings::{
    anon_breakdown, apiserver_latency, cpu_by_program, envoy_gauge, print_cpu_between,
    print_latency_between,
};

/// Sizes of one run.
struct Sizes {
    routes: usize,
    services: usize,
    unrelated_secrets: usize,
    propagation_samples: usize,
    burst: usize,
    idle: Duration,
}

const FULL: Sizes = Sizes {
    routes: 10_000,
    services: 1_000,
    unrelated_secrets: 30_000,
    propagation_samples: 50,
    burst: 1_000,
    idle: Duration::from_secs(60),
};

const SMOKE: Sizes = Sizes {
    routes: 300,
    services: 20,
    unrelated_secrets: 300,
    propagation_samples: 5,
    burst: 50,
    idle: Duration::from_secs(10),
};

fn main() {
    let smoke = common::smoke();
    if std::env::var_os("SLUICE_E2E_WORK").is_none() {
        println!(
            "cluster benchmark: no e2e control plane here; it runs inside `make e2e` (smoke) and \
             `e2e/run.sh --bench` (full)"
        );
        return;
    }
    let sizes = if smoke { SMOKE } else { FULL };
    assert_eq!(
        sizes.services % 20,
        0,
        "Services spread evenly over the 20 namespaces"
    );
    let rt = common::runtime(2);
    let env = support::env();
    let client = common::apiserver::admin_client(&rt);
    let run = std::process::id();
    let t_setup = Instant::now();

    // 1. The cluster before sluice starts.
    rt.block_on(async {
        create_namespaces(&client, (0..20).map(namespace_of)).await;
        let mut services = Vec::new();
        let mut slices = Vec::new();
        for s in 0..sizes.services {
            let port = env.backend_ports[s % env.backend_ports.len()];
            let (svc, eps) = service(&namespace_of(s), &format!("svc-{s}"), &env.backend_ip, port);
            services.push(svc);
            slices.push(eps);
        }
        create_all(&client, services).await;
        create_all(&client, slices).await;
        let secrets: Vec<Secret> = (0..sizes.unrelated_secrets)
            .map(|i| {
                obj(serde_json::json!({
                    "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": format!("unrelated-{i}"), "namespace": namespace_of(i)},
                    "stringData": {"config.yaml": "x".repeat(1024)},
                }))
            })
            .collect();
        create_all(&client, secrets).await;
        let half = sizes.routes / 2;
        create_all(&client, routes(0..half, sizes.services, "base")).await;
        create_all(&client, extras(0..half, sizes.services)).await;
        create_all(&client, ingresses(sizes.routes / 10, sizes.services)).await;
        create_all(&client, tls_secrets(0..half)).await;
    });
    println!(
        "created {} Services with EndpointSlices, {} unrelated Secrets, {} root IngressRoutes \
         (every tenth with TLS, every tenth delegating to a vertex) and {} Ingresses in {:.1} s",
        sizes.services,
        sizes.unrelated_secrets,
        sizes.routes / 2,
        sizes.routes / 10,
        t_setup.elapsed().as_secs_f64()
    );

    // 2. sluice (with its webhook in the apiserver's path) and an Envoy.
    let ports = support::Ports::new();
    let webhooks = support::Webhooks::new(&env);
    let (shards, key_prefix) = common::route_shards();
    let shard_flags = ["--http-route-shards".to_string(), shards.to_string()];
    let mut flags = ports.serve_flags();
    flags.extend(webhooks.serve_flags());
    flags.extend(shard_flags.clone());
    let sluice = support::Sluice::start(&env, &format!("bench-{run}"), &flags);
    let pid = sluice.pid().expect("sluice runs");
    webhooks.install();
    let envoy = support::Envoy::start_timing_updates(&env, &ports, &format!("bench-{run}"));
    let t = Instant::now();
    rt.block_on(wait_valid(
        client.clone(),
        "base",
        sizes.routes / 2,
        Duration::from_secs(600),
    ));
    println!(
        "sluice up: {} routes valid {:.1} s after start",
        sizes.routes / 2,
        t.elapsed().as_secs_f64()
    );

    // 3. Propagation: create → first 200 through Envoy, one route at a time.
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let base = sizes.routes / 2;
    let mut propagation = Vec::new();
    // The apiserver's answer to each create (admission included): the part of propagation before
    // sluice can see the object.
    let mut create_latency = Vec::new();
    // When Envoy had applied the route configuration holding the new route (ms after the
    // create), and the first 200 after that.
    let mut applied_ms = Vec::new();
    let mut served_after_applied_ms = Vec::new();
    // Per route: when its create was sent (Unix seconds), its host, the create's answer, Envoy's
    // update_time and the first 200 (ms after sending); the steps from the logs join them below.
    let mut rows: Vec<(f64, String, f64, f64, f64)> = Vec::new();
    // Envoy's CPU by thread over the series: its main thread applies each update (and answers the
    // statistics queries below); its worker serves the requests and frees what the update replaced.
    let envoy_pid = envoy.pid().expect("envoy runs");
    let envoy_threads = format!("/proc/{envoy_pid}/task");
    // The first create (Envoy's first route update since its start): ms, Envoy's page faults.
    let mut first_update = (f64::NAN, f64::NAN);
    let mut series_faults = Vec::new();
    let series_from = base + 1;
    let envoy_cpu_before = cpu_by_name(envoy_threads.as_ref());
    rt.block_on(async {
        // Envoy holds the routes that exist.
        first_200(&http, ports.http, &host(1)).await;
        // Envoy started moments ago: its main thread may still be taking in the first
        // configuration (10k clusters and their load assignments) when the first route answers.
        // The first create waits that out, as each later one waits out the statistics flush
        // below, so that the series measures a create's way through an idle Envoy. (Without
        // this wait the first create of a run took more than three times as long as any other.)
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Envoy's first route configuration update since its start is timed on its own, before
        // the series: it is the update that grows Envoy's memory to hold two route tables, the
        // one in use and the new one (thousands of pages touched for the first time, each a page
        // fault, where the updates after it reuse the memory the previous table freed). It is
        // once per Envoy process; the series measures a create's way through an Envoy past it.
        let faults_before = minor_faults(envoy_pid);
        let start = Instant::now();
        let api: Api<IngressRoute> = Api::namespaced(client.clone(), &namespace_of(base));
        (api.create(
            &PostParams::default(),
            &route_for(base, sizes.services, "prop"),
        ))
        .await
        .expect("create");
        let done = first_200(&http, ports.http, &host(base)).await;
        first_update = (ms(done - start), minor_faults(envoy_pid) - faults_before);
        tokio::time::sleep(Duration::from_millis(500)).await;
        for k in 0..sizes.propagation_samples {
            let i = series_from + k;
            let faults_before = minor_faults(envoy_pid);
            let ir = route_for(i, sizes.services, "prop");
            let api: Api<IngressRoute> = Api::namespaced(client.clone(), &namespace_of(i));
            let start = Instant::now();
            let wall = std::time::SystemTime::now();
            api.create(&PostParams::default(), &ir)
                .await
                .expect("create");
            create_latency.push(ms(start.elapsed()));
            let done = first_200(&http, ports.http, &host(i)).await;
            propagation.push(ms(done - start));
            series_faults.push(minor_faults(envoy_pid) - faults_before);
            let unix = wall
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            // When Envoy finished applying its last HTTP route configuration (its
            // `update_time` gauge, ms since the epoch), relative to the create: the update
            // holding the new route, or one Envoy applied after it before this query.
            let applied = envoy_gauge(
                &http,
                ports.admin,
                "http.ingress_http.rds.ingress_http.update_time",
            )
            .await
            .map_or(f64::NAN, |t| t - unix * 1e3);
            if applied.is_finite() {
                applied_ms.push(applied);
                served_after_applied_ms.push(ms(done - start) - applied);
            }
            rows.push((
                unix,
                host(i),
                create_latency.last().copied().unwrap_or(0.0),
                applied,
                ms(done - start),
            ));
            // The statistics query above has Envoy flush its statistics (the bootstrap's
            // `stats_flush_on_admin`): over 10k clusters its main thread is busy for up to
            // ~200 ms after the answer. The next create waits that out, so that the benchmark's
            // own query does not delay the update it measures.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let envoy_cpu_after = cpu_by_name(envoy_threads.as_ref());
    let sent: Vec<f64> = rows.iter().map(|r| r.0).collect();
    let steps = common::envoy::propagation_steps(&sent, &sluice.log_text(), &envoy.log());
    let mut timeline = String::from(
        "sent_unix_s\thost\tcreate_ms\tpublished_ms\tenvoy_received_ms\tenvoy_built_ms\t\
         envoy_accepted_ms\tenvoy_applied_ms\tfirst_200_ms\n",
    );
    for (k, (unix, host, create, applied, first)) in rows.iter().enumerate() {
        let [p, r, b, a] = steps.of(k);
        timeline.push_str(&format!(
            "{unix:.6}\t{host}\t{create:.3}\t{p:.3}\t{r:.3}\t{b:.3}\t{a:.3}\t{applied:.1}\t{first:.3}\n"
        ));
    }
    let per_create: Vec<String> = envoy_cpu_after
        .iter()
        .filter_map(|(thread, s)| {
            let before = envoy_cpu_before.get(thread).copied().unwrap_or(0.0);
            let each = (s - before) * 1e3 / propagation.len().max(1) as f64;
            (each >= 0.05).then(|| format!("{thread} {each:.1}"))
        })
        .collect();
    println!(
        "Envoy's CPU per create, by thread (ms; the main thread's includes a statistics query): {}",
        per_create.join(", ")
    );
    let prop_p50 = common::quantile(&propagation, 0.5);
    let prop_p99 = common::quantile(&propagation, 0.99);
    println!(
        "propagation with {base} routes: create → first 200 through Envoy p50 {prop_p50:.1} ms, \
         p99 {prop_p99:.1} ms, max {:.1} ms ({} routes)",
        common::quantile(&propagation, 1.0),
        propagation.len()
    );
    println!(
        "before the series, Envoy's first route update since its start: create → first 200 \
         {:.1} ms, {} pages faulted in by Envoy (in the series: p50 {}, max {})",
        first_update.0,
        first_update.1,
        common::quantile(&series_faults, 0.5),
        common::quantile(&series_faults, 1.0),
    );
    println!(
        "of which the create's answer (apiserver with admission): p50 {:.1} ms, p99 {:.1} ms",
        common::quantile(&create_latency, 0.5),
        common::quantile(&create_latency, 0.99),
    );
    let step_p50 = |v: &[f64]| common::quantile(v, 0.5);
    println!(
        "step by step, p50 of each (ms after the create was sent): apiserver answered {:.1}, \
         sluice logged the build {:.1}, Envoy received {:.1}, built its route table {:.1}, accepted {:.1}, \
         first 200 {prop_p50:.1}",
        common::quantile(&create_latency, 0.5),
        step_p50(&steps.published),
        step_p50(&steps.received),
        step_p50(&steps.built),
        step_p50(&steps.accepted),
    );
    // Every create found in both logs, so the split cannot rot (the smoke run checks it too).
    let missing = steps.missing();
    assert_eq!(
        missing, 0,
        "{missing} steps of the creates not found in the logs"
    );
    if !applied_ms.is_empty() {
        println!(
            "Envoy had applied the route configuration p50 {:.1} ms after the create (its \
             update_time gauge, ms resolution); the first 200 came p50 {:.1} ms after that",
            common::quantile(&applied_ms, 0.5),
            common::quantile(&served_after_applied_ms, 0.5),
        );
    }
    // Envoy's own time applying listeners, clusters and the HTTP route configuration (its
    // `update_duration` histograms: percentiles over every update since it started, most of them
    // the creates above). Envoy merges histograms at a flush of its statistics, which sluice's
    // bootstrap has it do when they are read (`stats_flush_on_admin`): the merge a first read
    // starts ends after that read's answer, so the histograms are read a second time.
    // Printed, not recorded.
    let envoy_stats = rt.block_on(async {
        let url = format!("http://127.0.0.1:{}/stats", ports.admin);
        let filter = r"(lds|cds|rds\.ingress_http)\.update_duration";
        let read = || {
            http.get(&url)
                .query(&[("usedonly", ""), ("filter", filter)])
                .send()
        };
        read().await?.text().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        read().await?.text().await
    });
    match envoy_stats {
        Ok(text) => {
            for line in text.lines().filter(|l| l.contains("update_duration")) {
                println!("envoy {line}");
            }
        }
        Err(e) => println!("envoy statistics not read: {e}"),
    }

    // 4. Status throughput: a burst of new routes.
    let first = series_from + sizes.propagation_samples;
    let burst = routes(first..first + sizes.burst, sizes.services, "burst");
    let (status_s, status_total_s, create_s) = rt.block_on(async {
        let waiter = tokio::spawn(wait_valid(
            client.clone(),
            "burst",
            sizes.burst,
            Duration::from_secs(300),
        ));
        let latency_before = apiserver_latency(&client).await;
        let writes_before = sluice.writes();
        let cpu_before = cpu_by_program();
        // `BENCH_PERF=FILE`: a CPU profile of sluice during the burst (`perf report -i FILE`).
        let perf = std::env::var_os("BENCH_PERF").map(|out| {
            std::process::Command::new("perf")
                .args(["record", "-F", "499", "--call-graph", "dwarf,16384", "-p"])
                .arg(pid.to_string())
                .arg("-o")
                .arg(out)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("perf record")
        });
        let start = Instant::now();
        create_all(&client, burst).await;
        let created = Instant::now();
        let done = waiter.await.expect("status watcher");
        // Where the time went: the apiserver's side of the creates, the admission calls and
        // sluice's status applies during the burst (bucket bounds, so coarse).
        print_cpu_between("during the burst", &cpu_before, &cpu_by_program());
        if let Some(mut perf) = perf {
            // SIGINT makes perf write its file and exit.
            let _ = std::process::Command::new("kill")
                .args(["-INT", &perf.id().to_string()])
                .status();
            let _ = perf.wait();
        }
        print_latency_between(
            "during the burst",
            &latency_before,
            &apiserver_latency(&client).await,
        );
        println!(
            "status writes by sluice during the burst: {}",
            sluice.writes() - writes_before
        );
        (
            done.saturating_duration_since(created).as_secs_f64(),
            (done - start).as_secs_f64(),
            (created - start).as_secs_f64(),
        )
    });
    println!(
        "status: {} new routes created in {create_s:.2} s; every status written {status_s:.3} s after \
         the last create ({status_total_s:.2} s after the first)",
        sizes.burst
    );

    // 5. The rest, then idle.
    let rest_from = first + sizes.burst;
    rt.block_on(async {
        create_all(
            &client,
            routes(rest_from..sizes.routes, sizes.services, "rest"),
        )
        .await;
        wait_valid(
            client.clone(),
            "rest",
            sizes.routes - rest_from,
            Duration::from_secs(600),
        )
        .await;
    });
    // Let the last writes and watch events settle before counting.
    std::thread::sleep(Duration::from_secs(3));
    let writes_before = sluice.writes();
    let mut rss = Vec::new();
    let idle_end = Instant::now() + sizes.idle;
    while Instant::now() < idle_end {
        rss.push(rss_mib(pid).0);
        std::thread::sleep(Duration::from_secs(1));
    }
    let idle_writes = sluice.writes() - writes_before;
    let (_, peak_running) = rss_mib(pid);
    let steady = common::quantile(&rss, 0.5);
    println!(
        "{} routes, {} Services, {} unrelated Secrets: status writes in {:?} idle: {idle_writes}; \
         RSS steady {steady:.1} MiB (at the end: heap and other anonymous memory {:.1}, \
         mapped files such as the binary's code {:.1}), peak {peak_running:.1} MiB",
        sizes.routes,
        sizes.services,
        sizes.unrelated_secrets,
        sizes.idle,
        status_mib(pid, "RssAnon"),
        status_mib(pid, "RssFile"),
    );
    println!("sluice after the idle minute: {}", anon_breakdown(pid));
    drop(envoy);
    let mut sluice = sluice;
    sluice.terminate();
    // Its log (every build with its time and debounce window, every status write), for a look
    // at where the time went; the control plane's work directory is removed at the end.
    let _ = std::fs::write(
        common::results_path().with_file_name("cluster-propagation.tsv"),
        &timeline,
    );
    let log_copy = common::results_path().with_file_name("cluster-sluice.log");
    if std::fs::write(&log_copy, sluice.log_text()).is_ok() {
        println!("sluice's log: {}", log_copy.display());
    }

    // A fresh sluice over the full cluster: the initial list and first build are the peak.
    let ports2 = support::Ports::new();
    let mut flags2 = ports2.serve_flags();
    flags2.extend(shard_flags);
    let restarted = support::Sluice::start(&env, &format!("bench-{run}-2"), &flags2);
    let pid2 = restarted.pid().expect("sluice runs");
    restarted.wait_log("published a new build", Duration::from_secs(300));
    std::thread::sleep(Duration::from_secs(5));
    let (rss_restart, peak_restart) = rss_mib(pid2);
    println!(
        "fresh sluice over {} routes: RSS {rss_restart:.1} MiB, peak {peak_restart:.1} MiB",
        sizes.routes
    );
    println!("fresh sluice: {}", anon_breakdown(pid2));
    drop(restarted);
    drop(webhooks);

    assert_eq!(propagation.len(), sizes.propagation_samples);
    if !smoke {
        let mut r = serde_json::Map::new();
        r.insert("propagation_p50_ms_5k".into(), common::round3(prop_p50));
        r.insert("propagation_p99_ms_5k".into(), common::round3(prop_p99));
        r.insert(
            "propagation_first_after_envoy_start_ms_5k".into(),
            common::round3(first_update.0),
        );
        for (key, v) in [
            ("propagation_published_p50_ms_5k", &steps.published),
            ("propagation_envoy_received_p50_ms_5k", &steps.received),
            ("propagation_envoy_built_p50_ms_5k", &steps.built),
            ("propagation_envoy_accepted_p50_ms_5k", &steps.accepted),
        ] {
            r.insert(key.into(), common::round3(step_p50(v)));
        }
        r.insert("status_1000_s".into(), common::round3(status_s));
        r.insert("status_1000_total_s".into(), common::round3(status_total_s));
        r.insert("status_writes_idle".into(), serde_json::json!(idle_writes));
        r.insert("rss_mib_10k".into(), common::round3(steady));
        r.insert(
            "rss_peak_mib_10k".into(),
            common::round3(peak_running.max(peak_restart)),
        );
        r.insert(
            "rss_peak_restart_mib_10k".into(),
            common::round3(peak_restart),
        );
        common::write_results(common::prefixed(r, &key_prefix));
    }
}
