//! What the benchmark reads on the side: the apiserver's latency histograms, CPU time by
//! program, a process's anonymous memory and Envoy's admin gauges.

use std::collections::BTreeMap;

use crate::common::process::cpu_by_name;

/// The apiserver's latency histograms for what the benchmark measures, as cumulative counts per
/// bucket bound and series: `apiserver_request_duration_seconds` of IngressRoutes (by verb and
/// subresource: the creates and sluice's status applies) and
/// `apiserver_admission_webhook_admission_duration_seconds` (by webhook and operation).
pub async fn apiserver_latency(client: &kube::Client) -> BTreeMap<String, Vec<(f64, f64)>> {
    let req = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = match client.request_text(req).await {
        Ok(t) => t,
        Err(e) => {
            println!("apiserver metrics not read: {e}");
            return BTreeMap::new();
        }
    };
    let label = |line: &str, name: &str| -> String {
        let pat = format!("{name}=\"");
        line.find(&pat)
            .and_then(|i| {
                let rest = &line[i + pat.len()..];
                rest.find('"').map(|j| rest[..j].to_string())
            })
            .unwrap_or_default()
    };
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines() {
        let key = if line.starts_with("apiserver_request_duration_seconds_bucket{")
            && line.contains("resource=\"ingressroutes\"")
        {
            let sub = label(line, "subresource");
            format!(
                "{} ingressroutes{}{sub}",
                label(line, "verb"),
                if sub.is_empty() { "" } else { "/" }
            )
        } else if line.starts_with("apiserver_admission_webhook_admission_duration_seconds_bucket{")
        {
            format!(
                "webhook {} {}",
                label(line, "name"),
                label(line, "operation")
            )
        } else {
            continue;
        };
        let le = label(line, "le");
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::NAN)
        };
        let count: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0.0);
        let buckets = series.entry(key).or_default();
        // The same series may appear once per other label (rejected, code…): add them up.
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += count,
            None => buckets.push((le, count)),
        }
    }
    for b in series.values_mut() {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    series
}

/// Prints, per series, the requests between two readings of [`apiserver_latency`] and the bucket
/// bounds their p50 and p99 fall under.
pub fn print_latency_between(
    what: &str,
    before: &BTreeMap<String, Vec<(f64, f64)>>,
    after: &BTreeMap<String, Vec<(f64, f64)>>,
) {
    for (key, buckets) in after {
        let earlier = before.get(key);
        let diff: Vec<(f64, f64)> = buckets
            .iter()
            .map(|(le, c)| {
                let was = earlier
                    .and_then(|b| b.iter().find(|(l, _)| l == le))
                    .map_or(0.0, |(_, c)| *c);
                (*le, c - was)
            })
            .collect();
        let total = diff.last().map_or(0.0, |(_, c)| *c);
        if total < 1.0 {
            continue;
        }
        let bound = |q: f64| {
            let le = diff
                .iter()
                .find(|(_, c)| *c >= q * total)
                .map_or(f64::INFINITY, |(le, _)| *le);
            if le.is_finite() {
                format!("≤ {:.0} ms", le * 1e3)
            } else {
                "> largest bucket".into()
            }
        };
        println!(
            "apiserver {what}: {key}: {total} requests, p50 {}, p99 {}",
            bound(0.5),
            bound(0.99)
        );
    }
}

/// CPU seconds (user + system) used so far by each running program of the machine, by its
/// command name (`sluice`, `envoy`, `kube-apiserver`, `etcd`, the benchmark itself…), summed over
/// its processes. Clock ticks are taken as 100 per second, Linux's value on x86-64.
pub fn cpu_by_program() -> BTreeMap<String, f64> {
    cpu_by_name(std::path::Path::new("/proc"))
}

/// Prints the CPU seconds each program used between two readings of [`cpu_by_program`] (those
/// above 0.1 s).
pub fn print_cpu_between(
    what: &str,
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) {
    let mut used: Vec<(f64, &String)> = after
        .iter()
        .map(|(comm, t)| (t - before.get(comm).copied().unwrap_or(0.0), comm))
        .filter(|(d, _)| *d > 0.1)
        .collect();
    used.sort_by(|a, b| b.0.total_cmp(&a.0));
    let list: Vec<String> = used.iter().map(|(d, c)| format!("{c} {d:.1}")).collect();
    println!("CPU seconds {what}: {}", list.join(", "));
}

/// Where a process's anonymous resident memory is, from /proc/PID/smaps: anonymous mappings
/// (jemalloc's extents, its metadata and thread stacks), the brk heap (glibc's malloc, which C
/// code linked into sluice would use), and the thread count.
pub fn anon_breakdown(pid: u32) -> String {
    let Ok(smaps) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return "smaps not readable".into();
    };
    let kb = |l: &str, field: &str| {
        l.strip_prefix(field)
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
    };
    let (mut mapped, mut mapped_n, mut heap) = (0.0, 0, 0.0);
    let mut current: Option<String> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-')
            && u64::from_str_radix(a, 16).is_ok()
            && u64::from_str_radix(b, 16).is_ok()
        {
            current = Some(words.nth(4).unwrap_or("").to_string());
        } else if let (Some(anon), Some(path)) = (kb(line, "Anonymous:"), &current) {
            let mib = anon / 1024.0;
            if path == "[heap]" {
                heap += mib;
            } else if anon > 0.0 {
                mapped += mib;
                mapped_n += 1;
            }
        }
    }
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    format!(
        "anonymous in {mapped_n} mappings (jemalloc's extents and metadata, thread stacks) \
         {mapped:.1} MiB, brk heap {heap:.1} MiB; {threads} threads"
    )
}

/// One gauge of Envoy's admin statistics, if Envoy has it.
pub async fn envoy_gauge(http: &reqwest::Client, admin: u16, name: &str) -> Option<f64> {
    let text = http
        .get(format!("http://127.0.0.1:{admin}/stats"))
        .query(&[("filter", format!("^{}$", name.replace('.', "\\.")))])
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(": ")?
            .trim()
            .parse()
            .ok()
    })
}
