//! Limits of the xDS server (`sluice::xds::limits`): HTTP/2 streams per connection and resource
//! names per stream, against the real server on loopback.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DiscoveryRequest,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient as Client,
};
use sluice::xds::limits::{MAX_STREAMS_PER_CONNECTION, MAX_SUBSCRIBED_NAMES};
use sluice::xds::{AdsServer, Snapshot};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

const CLUSTERS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// The xDS server on a free loopback port, serving an empty snapshot; a client of it (one
/// connection).
async fn server_and_client() -> (Client<tonic::transport::Channel>, watch::Sender<bool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (snapshots_tx, snapshots) = watch::channel(Arc::new(Snapshot::default()));
    let (stop, stopped) = watch::channel(false);
    let server = AdsServer::new(snapshots, stopped.clone());
    tokio::spawn(async move {
        let mut stopped = stopped;
        let _ = sluice::xds::serve(listener, server, None, async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await;
        drop(snapshots_tx);
    });
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5));
    let channel = endpoint.connect().await.expect("connect to the xDS server");
    (Client::new(channel), stop)
}

/// Opens a state-of-the-world stream subscribing to the clusters; returns its request sender
/// and its responses.
async fn open_stream(
    client: &mut Client<tonic::transport::Channel>,
) -> (
    mpsc::Sender<DiscoveryRequest>,
    tonic::Streaming<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse>,
) {
    let (tx, rx) = mpsc::channel(4);
    tx.send(DiscoveryRequest {
        type_url: CLUSTERS.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, responses)
}

/// A connection carries at most MAX_STREAMS_PER_CONNECTION streams at once: one more waits
/// until another ends.
#[tokio::test]
async fn a_connection_carries_a_bounded_number_of_streams() {
    let (client, _stop) = server_and_client().await;
    let mut open = Vec::new();
    for _ in 0..MAX_STREAMS_PER_CONNECTION {
        let mut c = client.clone();
        let (tx, mut responses) = open_stream(&mut c).await;
        let first = tokio::time::timeout(Duration::from_secs(10), responses.message()).await;
        assert!(matches!(first, Ok(Ok(Some(_)))), "{first:?}");
        open.push((tx, responses));
    }
    let mut c = client.clone();
    let one_more = tokio::spawn(async move {
        let (tx, mut responses) = open_stream(&mut c).await;
        let first = responses.message().await;
        (tx, first.map(|m| m.is_some()))
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !one_more.is_finished(),
        "a stream over the limit was answered"
    );
    drop(open.pop());
    let (_tx, first) = tokio::time::timeout(Duration::from_secs(10), one_more)
        .await
        .expect("the waiting stream is answered once another ends")
        .unwrap();
    assert!(first.unwrap(), "the waiting stream ended unanswered");
}

/// A stream may subscribe to MAX_SUBSCRIBED_NAMES resource names; asking for more ends it with
/// RESOURCE_EXHAUSTED, in one state-of-the-world request or over delta requests.
#[tokio::test]
async fn a_stream_that_subscribes_to_too_many_names_ends() {
    let (mut client, _stop) = server_and_client().await;
    let names = |from: usize, n: usize| -> Vec<String> {
        (from..from + n).map(|i| i.to_string()).collect()
    };

    // State of the world: the limit itself is served, one more ends the stream.
    let (tx, rx) = mpsc::channel(4);
    let mut sotw = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tx.send(DiscoveryRequest {
        type_url: ENDPOINTS.into(),
        resource_names: names(0, MAX_SUBSCRIBED_NAMES),
        ..Default::default()
    })
    .await
    .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(30), sotw.message()).await;
    assert!(matches!(answered, Ok(Ok(Some(_)))), "{answered:?}");
    tx.send(DiscoveryRequest {
        type_url: ENDPOINTS.into(),
        resource_names: names(0, MAX_SUBSCRIBED_NAMES + 1),
        ..Default::default()
    })
    .await
    .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(30), sotw.message()).await;
    let status = ended.expect("the stream ends").expect_err("with an error");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");

    // Delta: names add up over requests and types.
    let (tx, rx) = mpsc::channel(4);
    let mut delta = client
        .delta_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let half = MAX_SUBSCRIBED_NAMES / 2;
    for (type_url, from) in [(ENDPOINTS, 0), (CLUSTERS, half)] {
        tx.send(DeltaDiscoveryRequest {
            type_url: type_url.into(),
            resource_names_subscribe: names(from, half),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    tx.send(DeltaDiscoveryRequest {
        type_url: ENDPOINTS.into(),
        resource_names_subscribe: names(MAX_SUBSCRIBED_NAMES, 1),
        ..Default::default()
    })
    .await
    .unwrap();
    let status = loop {
        match tokio::time::timeout(Duration::from_secs(30), delta.message()).await {
            Ok(Ok(Some(_))) => continue,
            Ok(Err(status)) => break status,
            other => panic!("the delta stream did not end with an error: {other:?}"),
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
}
