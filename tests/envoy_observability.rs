//! Real Envoy fed by sluice standalone: what it tells its operators. Envoy's access log (JSON, a
//! line per request), request tracing to an OTLP/gRPC collector, and the statistics listener of
//! `sluice bootstrap --stats-address` (docs/observability.md).

mod envoy_support;

use std::time::{Duration, Instant};

use envoy_support::harness::Harness;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use sluice::translate::trace::Tracing;

/// Envoy writes a JSON access log line per request, with the fields docs/observability.md lists:
/// a routed request names its host, path, method, status, upstream cluster, the client's user
/// agent and the request id Envoy gave it (an edge proxy does not trust a client's own
/// `x-request-id`); a request for a host nobody serves is a 404 with Envoy's `NR` (no route) flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_gets_a_json_access_log_line() {
    let (h, app) = Harness::start_one_host("log", "logged.example.com", |_| {}).await;
    h.expect("logged.example.com", "/", &[], "log/app").await;
    let headers = [
        ("user-agent", "access-log-test/1.0"),
        ("x-request-id", "3f1c7a52-access-log-test"),
    ];
    assert_eq!(
        h.get("logged.example.com", "/hello?x=1", &headers).await,
        "log/app"
    );
    assert_eq!(h.get("nowhere.example.com", "/gone", &[]).await, "404");
    let find =
        |lines: &[serde_json::Value], want: &str| lines.iter().find(|l| l["path"] == want).cloned();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (routed, missed) = loop {
        let lines = h.access_log();
        if let (Some(a), Some(b)) = (find(&lines, "/hello?x=1"), find(&lines, "/gone")) {
            break (a, b);
        }
        assert!(
            Instant::now() < deadline,
            "no access log lines for both requests; the log holds {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(routed["authority"], "logged.example.com");
    assert_eq!(routed["path"], "/hello?x=1");
    assert_eq!(routed["method"], "GET");
    assert_eq!(routed["protocol"], "HTTP/1.1");
    assert_eq!(routed["response_code"], 200, "a number: {routed}");
    assert_eq!(routed["response_flags"], "-");
    assert_eq!(routed["user_agent"], "access-log-test/1.0");
    let id = routed["request_id"].as_str().unwrap_or_default();
    assert!(
        id.len() == 36 && id != "3f1c7a52-access-log-test",
        "{routed}"
    );
    let cluster = routed["upstream_cluster"].as_str().unwrap_or_default();
    assert!(cluster.starts_with("log/app/80"), "{routed}");
    let upstream = routed["upstream_host"].as_str().unwrap_or_default();
    assert_eq!(upstream, format!("127.0.0.1:{}", app.port), "{routed}");
    assert!(routed["duration"].is_u64(), "{routed}");
    assert!(
        routed["@timestamp"]
            .as_str()
            .is_some_and(|t| t.starts_with("20"))
    );
    assert_eq!(missed["response_code"], 404, "{missed}");
    assert_eq!(missed["response_flags"], "NR", "{missed}");
    assert_eq!(missed["authority"], "nowhere.example.com");
    assert!(missed["upstream_cluster"].is_null(), "{missed}");
}

/// An OTLP/gRPC trace collector on loopback that keeps every export it receives.
#[derive(Clone, Default)]
struct Collector(std::sync::Arc<std::sync::Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Collector {
    /// Starts one on a free loopback port; returns it and the port.
    async fn start() -> (Collector, u16) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let collector = Collector::default();
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
        tokio::spawn(server);
        (collector, port)
    }

    /// Every span received so far, with the `service.name` of its resource.
    fn spans(&self) -> Vec<(String, Span)> {
        let mut out = Vec::new();
        for export in self.0.lock().unwrap().iter() {
            for rs in &export.resource_spans {
                let service = rs
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .map(|a| attribute_text(a.value.as_ref()))
                    .unwrap_or_default();
                for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
                    out.push((service.clone(), span.clone()));
                }
            }
        }
        out
    }
}

fn attribute_text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn span_attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| attribute_text(a.value.as_ref()))
}

/// With `--tracing-otlp-address`, Envoy continues the trace a client started (its `traceparent`)
/// with a span of its own, exported over OTLP/gRPC to the collector: the client's trace id, the
/// client's span as parent, the service name given, the status and the upstream cluster; the
/// access log line carries the `traceparent` the backend received, Envoy's span in it. A trace
/// its client did not sample gets no span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_traced_to_an_otlp_collector() {
    let (collector, port) = Collector::start().await;
    let tracing = Tracing {
        collector: format!("127.0.0.1:{port}"),
        service_name: "edge-test".into(),
        sampling_per_million: 1_000_000,
    };
    let (h, _app) =
        Harness::start_one_host("trace", "traced.example.com", |o| o.tracing = Some(tracing)).await;
    h.expect("traced.example.com", "/", &[], "trace/app").await;
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    // A client that decided not to sample its trace: Envoy follows it and exports no span.
    const UNSAMPLED: &str = "0af7651916cd43dd8448eb211c80319c";
    let unsampled = format!("00-{UNSAMPLED}-b7ad6b7169203331-00");
    assert_eq!(
        h.get(
            "traced.example.com",
            "/quiet",
            &[("traceparent", &unsampled)]
        )
        .await,
        "trace/app"
    );
    assert_eq!(
        h.get(
            "traced.example.com",
            "/traced",
            &[("traceparent", &traceparent)]
        )
        .await,
        "trace/app"
    );
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    // Envoy exports its spans in batches, at least every 5 s.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (service, span) = loop {
        let spans = collector.spans();
        if let Some(found) = spans.iter().find(|(_, s)| hex(&s.trace_id) == TRACE) {
            break found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no span of trace {TRACE} among {} received; Envoy's log:\n{}",
            spans.len(),
            h.envoy_log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Sent before the sampled request: had it been exported, it would be here by now.
    let spans = collector.spans();
    assert!(
        spans.iter().all(|(_, s)| hex(&s.trace_id) != UNSAMPLED),
        "a span of the unsampled trace was exported"
    );
    assert_eq!(service, "edge-test");
    assert_eq!(hex(&span.parent_span_id), PARENT, "{span:?}");
    assert_eq!(span.span_id.len(), 8, "{span:?}");
    assert_eq!(
        span_attribute(&span, "http.status_code").as_deref(),
        Some("200"),
        "{span:?}"
    );
    let cluster = span_attribute(&span, "upstream_cluster").unwrap_or_default();
    assert!(cluster.starts_with("trace/app/80"), "{span:?}");
    let url = span_attribute(&span, "http.url").unwrap_or_default();
    assert!(url.ends_with("traced.example.com/traced"), "{span:?}");
    // The access log line of the request names the same trace.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = h.access_log();
        if let Some(line) = lines.iter().find(|l| l["path"] == "/traced") {
            // What the backend received: the client's trace, Envoy's span as the parent.
            let sent_on = format!("00-{TRACE}-{}-01", hex(&span.span_id));
            assert_eq!(line["traceparent"], sent_on.as_str(), "{line}");
            break;
        }
        assert!(Instant::now() < deadline, "no access log line for /traced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `sluice bootstrap --stats-address`: Envoy's statistics (Prometheus text and Envoy's own) and
/// readiness on a listener of their own, which serves none of the admin interface's other pages
/// (the configuration dump, stopping the server) and nothing but GET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_listener_serves_statistics_and_nothing_else_of_the_admin_interface() {
    let (h, _app) = Harness::start_one_host("stats", "stats.example.com", |_| {}).await;
    h.expect("stats.example.com", "/", &[], "stats/app").await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = |path: &str| format!("http://127.0.0.1:{}{path}", h.stats_port);
    let get = |path: &str| {
        let req = client.get(url(path));
        async move {
            let r = req.send().await.expect("the stats listener answers");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    let (code, text) = get("/stats/prometheus").await;
    assert_eq!(code, 200, "{text}");
    // The routed request above, counted for its cluster, in Prometheus's text format.
    let counted = text.lines().any(|l| {
        l.starts_with("envoy_cluster_upstream_rq_total{")
            && l.contains("envoy_cluster_name=\"stats/app/80")
    });
    assert!(counted, "no upstream request count for stats/app:\n{text}");
    let (code, text) = get("/stats/prometheus?usedonly").await;
    assert!(
        code == 200 && text.contains("# TYPE envoy_"),
        "{code} {text}"
    );
    let (code, text) = get("/stats?filter=server.live").await;
    assert_eq!((code, text.trim()), (200, "server.live: 1"));
    assert_eq!(get("/ready").await, (200, "LIVE\n".to_string()));
    for path in [
        "/config_dump",
        "/clusters",
        "/certs",
        "/",
        "/stats/../config_dump",
    ] {
        assert_eq!(get(path).await.0, 404, "{path} is not served");
    }
    let post = client.post(url("/quitquitquit")).send().await.unwrap();
    assert_eq!(post.status().as_u16(), 404);
    let post = client.post(url("/stats")).send().await.unwrap();
    assert_eq!(post.status().as_u16(), 404, "only GET");
    // Envoy still runs and serves.
    assert_eq!(h.get("stats.example.com", "/", &[]).await, "stats/app");
}
