//! `sluice serve --manifests`: an xDS client is answered only once the manifests have loaded. A
//! directory that does not load at start (a file half written, a document that does not fit its
//! schema) keeps Envoys waiting, with the configuration they hold, instead of sending them the
//! empty configuration sluice starts with; the first good load is what they get.

#[path = "envoy_support/ports.rs"]
mod ports;

use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DiscoveryRequest,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient as Client,
};
use sluice::app::standalone::{StandaloneConfig, run};
use tokio_stream::wrappers::ReceiverStream;

const LISTENERS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

const ROUTE: &str = "apiVersion: v1
kind: Service
metadata: {name: app, namespace: ns}
spec: {ports: [{port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app, namespace: ns}
spec:
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
";

/// A client of the xDS server on `port`, once it accepts connections.
async fn client(port: u16) -> Client<tonic::transport::Channel> {
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        let endpoint = tonic::transport::Endpoint::from_shared(url.clone()).unwrap();
        if let Ok(channel) = endpoint.connect().await {
            return Client::new(channel);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the xDS server on port {port} did not accept connections within 10 s");
}

#[tokio::test]
async fn xds_waits_for_the_first_good_load_of_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    // Half written: the directory does not load.
    std::fs::write(manifests.join("app.yaml"), &ROUTE[..40]).unwrap();
    let port = ports::free_port();
    let cfg = StandaloneConfig {
        manifests: manifests.clone(),
        xds_address: format!("127.0.0.1:{port}").parse().unwrap(),
        xds_tls: None,
        dag_options: Default::default(),
        translate_options: Default::default(),
        debounce: Duration::from_millis(50),
        webhook: None,
        metrics_address: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sluice = tokio::spawn(run(cfg, async move {
        let _ = stopped.await;
    }));
    let mut client = client(port).await;

    let (sotw_tx, sotw_rx) = tokio::sync::mpsc::channel(4);
    let subscribe = DiscoveryRequest {
        type_url: LISTENERS.into(),
        ..Default::default()
    };
    sotw_tx.send(subscribe).await.unwrap();
    let mut sotw = client
        .stream_aggregated_resources(ReceiverStream::new(sotw_rx))
        .await
        .unwrap()
        .into_inner();
    let (delta_tx, delta_rx) = tokio::sync::mpsc::channel(4);
    let subscribe = DeltaDiscoveryRequest {
        type_url: LISTENERS.into(),
        ..Default::default()
    };
    delta_tx.send(subscribe).await.unwrap();
    let mut delta = client
        .delta_aggregated_resources(ReceiverStream::new(delta_rx))
        .await
        .unwrap()
        .into_inner();

    // Nothing while the directory does not load (without the wait: the empty start, at once).
    let quiet = Duration::from_secs(1);
    let early = tokio::time::timeout(quiet, sotw.message()).await;
    let answer = early.map(|m| m.map(|m| m.map(|m| m.resources.len())));
    assert!(
        answer.is_err(),
        "answered before a load: {answer:?} listeners"
    );
    let early = tokio::time::timeout(quiet, delta.message()).await;
    let answer = early.map(|m| m.map(|m| m.map(|m| m.resources.len())));
    assert!(
        answer.is_err(),
        "answered before a load: {answer:?} listeners"
    );

    // The file complete: both streams get the listeners of the loaded directory.
    let tmp = manifests.join(".app.yaml.tmp");
    std::fs::write(&tmp, ROUTE).unwrap();
    std::fs::rename(&tmp, manifests.join("app.yaml")).unwrap();
    let wait = Duration::from_secs(30);
    let got = tokio::time::timeout(wait, sotw.message()).await;
    let got = got.expect("answered after the load").unwrap().unwrap();
    assert_eq!(got.type_url, LISTENERS);
    assert!(!got.resources.is_empty(), "{got:?}");
    let got = tokio::time::timeout(wait, delta.message()).await;
    let got = got.expect("answered after the load").unwrap().unwrap();
    let mut names: Vec<&str> = got.resources.iter().map(|r| &r.name[..]).collect();
    names.sort();
    assert_eq!(names, ["ingress_http"]);

    let _ = stop.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(15), sluice).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}
