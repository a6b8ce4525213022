//! The API server's side: real AdmissionReviews over HTTP/2 and HTTP/1.1 from another address,
//! timed, and the percentiles of their latencies.

use super::*;

#[derive(Debug, Default)]
pub struct Reviews {
    pub latencies: Vec<Duration>,
    pub failures: Vec<String>,
}

/// An IngressRoute review of about `bytes` bytes (many routes), allowed.
pub fn large_review(bytes: usize) -> Vec<u8> {
    let mut review = fixture("ir_v1beta1_valid");
    let route = |i: usize| json!({"match": format!("/r/{i:07}"), "services": [{"name": "web", "port": 80, "weight": 1}]});
    let per_route = serde_json::to_vec(&route(0)).unwrap().len() + 1;
    review["request"]["object"]["spec"]["routes"] =
        Value::Array((0..bytes / per_route).map(route).collect());
    serde_json::to_vec(&review).unwrap()
}

pub async fn api_server(
    client: reqwest::Client,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> Reviews {
    let cases: Vec<(String, Vec<u8>, bool)> = vec![
        (
            "ir_v1beta1_valid".into(),
            fixture_bytes("ir_v1beta1_valid"),
            true,
        ),
        (
            "gateway_conflicting_listeners".into(),
            fixture_bytes("gateway_conflicting_listeners"),
            false,
        ),
        (
            "ir_v1_bad_regex".into(),
            fixture_bytes("ir_v1_bad_regex"),
            false,
        ),
        ("ir_v1_valid".into(), fixture_bytes("ir_v1_valid"), true),
        ("1 MiB IngressRoute".into(), large_review(1024 * 1024), true),
    ];
    let url = format!("https://127.0.0.1:{}/validate", addr.port());
    let mut out = Reviews::default();
    for i in 0..10_000 {
        if Instant::now() >= until || *stop.borrow() {
            break;
        }
        let (name, body, allowed) = &cases[i % cases.len()];
        let sent = Instant::now();
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let verdict = match resp {
            Ok(r) if r.status() == 200 => r
                .json::<Value>()
                .await
                .map(|v| v["response"]["allowed"].as_bool())
                .map_err(|e| e.to_string()),
            Ok(r) => Err(format!("HTTP {}", r.status())),
            Err(e) => Err(e.to_string()),
        };
        let took = sent.elapsed();
        match verdict {
            Ok(Some(a)) if a == *allowed && took <= REQUEST_TIMEOUT => out.latencies.push(took),
            other => out
                .failures
                .push(format!("{name}: {other:?} after {took:?}")),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = over(&mut stop, until) => break,
        }
    }
    out
}

pub fn api_server_client(ca: &Ca, http1: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .local_address(IpAddr::from(API_SERVER))
        .timeout(REQUEST_TIMEOUT);
    if http1 {
        b = b.http1_only();
    }
    b.build().unwrap()
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
