//! The ADS gRPC server (envoy.service.discovery.v3.AggregatedDiscoveryService). Each stream runs
//! one task that feeds requests and snapshot changes to its [`Stream`] state machine and sends
//! whatever it answers. Snapshots arrive over a `tokio::sync::watch` channel shared by every
//! stream, so any number of Envoys follow the same state.
//!
//! A server made [`AdsServer::after`] a readiness signal answers nothing before it: a stream
//! holds its requests until the first complete build is published, so an Envoy that reconnects
//! to a restarted sluice keeps the configuration it has instead of being sent an empty one.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use prost::bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tonic::codegen::{BoxFuture, StdError, http};
use tonic::{Request, Status, Streaming};

use super::cache::Snapshot;
use super::limits::{
    MAX_CONNECTIONS, MAX_STREAMS_PER_CONNECTION, MAX_SUBSCRIBED_NAMES, limit_connections,
};
use super::stream::{Mode, Response, Stats, Stream};
use super::wire::{DeltaResponse, Frames, GrpcMessage, SotwResponse};

/// The ADS service.
#[derive(Clone)]
pub struct AdsServer {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
    stats: Arc<Stats>,
    /// Streams answer once this is true (None: from the start).
    ready: Option<watch::Receiver<bool>>,
}

/// The most requests a stream holds while it waits for the first build (Envoy sends one per
/// type it subscribes to, a handful); a client that sends more is cut off.
const MAX_HELD_REQUESTS: usize = 64;

impl AdsServer {
    /// Serves the snapshots published on `snapshots`; every stream ends when `shutdown` turns true
    /// (or its sender goes away).
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        shutdown: watch::Receiver<bool>,
    ) -> AdsServer {
        AdsServer {
            snapshots,
            shutdown,
            stats: Arc::default(),
            ready: None,
        }
    }

    /// The server whose streams answer nothing until `ready` turns true: until then each stream
    /// reads and holds its client's requests, and answers them from the snapshot published by
    /// then. `sluice serve` turns it true once the first complete build is published (cluster
    /// mode: after every initial list; standalone: after the first good load of the manifests),
    /// so that an Envoy never receives the empty snapshot the pipeline starts with and drops the
    /// listeners and routes it holds. A stream whose `ready` sender goes away unready ends.
    pub fn after(mut self, ready: watch::Receiver<bool>) -> AdsServer {
        self.ready = Some(ready);
        self
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Starts the task of one stream of `mode`: `handle` answers a request, `names` counts the
    /// names a request subscribes to, `unwrap` takes the responses of this stream's kind.
    fn spawn<Req, Resp>(
        &self,
        mode: Mode,
        inbound: Streaming<Req>,
        handle: fn(&mut Stream, &Req, &Snapshot) -> Vec<Response>,
        names: fn(&Req) -> usize,
        unwrap: fn(Response) -> Option<Resp>,
    ) -> mpsc::Receiver<Result<Resp, Status>>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        Streaming<Req>: Send,
    {
        let (tx, rx) = mpsc::channel(32);
        let task = StreamTask {
            inbound,
            tx,
            snapshots: self.snapshots.clone(),
            shutdown: self.shutdown.clone(),
            sm: Stream::new(mode, self.stats.clone()),
            mode,
            handle,
            names,
            unwrap,
        };
        tokio::spawn(task.run(self.ready.clone()));
        rx
    }
}

/// One ADS stream's task: its [`Stream`] state machine, the client's requests, the snapshots
/// and the channel its responses go out on.
struct StreamTask<Req, Resp> {
    inbound: Streaming<Req>,
    tx: mpsc::Sender<Result<Resp, Status>>,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
    sm: Stream,
    mode: Mode,
    handle: fn(&mut Stream, &Req, &Snapshot) -> Vec<Response>,
    names: fn(&Req) -> usize,
    unwrap: fn(Response) -> Option<Resp>,
}

impl<Req, Resp> StreamTask<Req, Resp> {
    /// Runs the stream: the requests held until `ready`, then requests and snapshot changes
    /// until the client, the snapshots' sender or the server's shutdown ends it.
    async fn run(mut self, ready: Option<watch::Receiver<bool>>) {
        if self.answer_held(ready).await.is_none() {
            return;
        }
        if self.serve().await {
            tracing::info!(node = self.sm.node(), mode = ?self.mode, "xDS stream closed");
        }
    }

    /// Holds the client's requests until `ready` (if any) and answers them from the snapshot
    /// published by then. None when the stream ended.
    async fn answer_held(&mut self, ready: Option<watch::Receiver<bool>>) -> Option<()> {
        let held = match ready {
            Some(ready) => {
                match hold_until_ready(ready, &mut self.inbound, &mut self.shutdown).await {
                    Ok(held) => held,
                    Err(status) => {
                        if let Some(status) = status {
                            let _ = self.tx.send(Err(status)).await;
                        }
                        return None;
                    }
                }
            }
            None => Vec::new(),
        };
        let mut out = Vec::new();
        for req in &held {
            let snap = self.snapshots.borrow_and_update().clone();
            out.extend((self.handle)(&mut self.sm, req, &snap));
        }
        drop(held);
        if self.sm.subscribed_names() > MAX_SUBSCRIBED_NAMES {
            let _ = self.tx.send(Err(too_many_names())).await;
            return None;
        }
        self.send(out).await
    }

    /// Sends the responses of this stream's kind; None when the client is gone. (`&mut self`:
    /// the task is `Send` but not `Sync`, and a shared borrow held across an await would need
    /// `Sync`.)
    async fn send(&mut self, out: Vec<Response>) -> Option<()> {
        for r in out {
            if let Some(resp) = (self.unwrap)(r)
                && self.tx.send(Ok(resp)).await.is_err()
            {
                return None;
            }
        }
        Some(())
    }

    /// Answers requests and snapshot changes until the stream ends: true when it was closed
    /// (by the client, the snapshots' sender, the shutdown or too many names), false when the
    /// client is gone.
    async fn serve(&mut self) -> bool {
        while let Some((out, too_many)) = self.next().await {
            if too_many {
                let _ = self.tx.send(Err(too_many_names())).await;
                return true;
            }
            if self.send(out).await.is_none() {
                return false;
            }
        }
        true
    }

    /// The responses to the next request or snapshot change, and whether the stream now
    /// subscribes to more than [`MAX_SUBSCRIBED_NAMES`] names; None when the stream ends.
    async fn next(&mut self) -> Option<(Vec<Response>, bool)> {
        tokio::select! {
            msg = self.inbound.message() => match msg {
                Ok(Some(req)) if (self.names)(&req) > MAX_SUBSCRIBED_NAMES => Some((Vec::new(), true)),
                Ok(Some(req)) => {
                    let snap = self.snapshots.borrow_and_update().clone();
                    let out = (self.handle)(&mut self.sm, &req, &snap);
                    Some((out, self.sm.subscribed_names() > MAX_SUBSCRIBED_NAMES))
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::debug!(node = self.sm.node(), error = %e, "xDS stream error");
                    None
                }
            },
            changed = self.snapshots.changed() => {
                changed.ok()?;
                let snap = self.snapshots.borrow_and_update().clone();
                Some((self.sm.on_snapshot(&snap), false))
            }
            _ = self.shutdown.wait_for(|s| *s) => None,
        }
    }
}

/// How a stream that subscribed to more than [`MAX_SUBSCRIBED_NAMES`] names ends.
fn too_many_names() -> Status {
    Status::resource_exhausted(format!(
        "more than {MAX_SUBSCRIBED_NAMES} resource names subscribed on one xDS stream"
    ))
}

/// Reads and holds `inbound`'s requests until `ready` is true: Ok(the requests held), or Err
/// when the stream is to end before (the client went away, the server stops, or the client sent
/// more than [`MAX_HELD_REQUESTS`]: the status to end it with).
async fn hold_until_ready<Req>(
    mut ready: watch::Receiver<bool>,
    inbound: &mut Streaming<Req>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Vec<Req>, Option<Status>> {
    let mut held = Vec::new();
    if *ready.borrow_and_update() {
        return Ok(held);
    }
    tracing::info!("xDS stream waits for the first complete build");
    loop {
        tokio::select! {
            r = ready.wait_for(|r| *r) => return match r {
                Ok(_) => Ok(held),
                Err(_) => Err(Some(Status::unavailable("shutting down"))),
            },
            msg = inbound.message() => match msg {
                Ok(Some(_)) if held.len() >= MAX_HELD_REQUESTS => {
                    return Err(Some(Status::resource_exhausted(
                        "too many xDS requests before the first build",
                    )));
                }
                Ok(Some(req)) => held.push(req),
                Ok(None) => return Err(None),
                Err(e) => {
                    tracing::debug!(error = %e, "xDS stream error before the first build");
                    return Err(None);
                }
            },
            _ = shutdown.wait_for(|s| *s) => return Err(None),
        }
    }
}

impl AdsServer {
    fn stream_sotw(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> mpsc::Receiver<Result<SotwResponse, Status>> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (state of the world)");
        self.spawn(
            Mode::Sotw,
            request.into_inner(),
            Stream::on_sotw_request,
            |r| r.resource_names.len(),
            |r| match r {
                Response::Sotw(d) => Some(d),
                Response::Delta(_) => None,
            },
        )
    }

    fn stream_delta(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> mpsc::Receiver<Result<DeltaResponse, Status>> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (delta)");
        self.spawn(
            Mode::Delta,
            request.into_inner(),
            Stream::on_delta_request,
            |r| r.resource_names_subscribe.len(),
            |r| match r {
                Response::Delta(d) => Some(d),
                Response::Sotw(_) => None,
            },
        )
    }
}

/// The gRPC service `envoy.service.discovery.v3.AggregatedDiscoveryService` (ADS), both methods.
/// It is written here rather than generated so that responses go out as [`SotwResponse`] and
/// [`DeltaResponse`], which hold the snapshot's resources, in a response body of their own
/// ([`ResponseBody`]) that sends large resources as the snapshot's bytes: the generated service's
/// messages would need a copy of every resource per response, and its codec another
/// (docs/xds.md, "Cost per change").
#[derive(Clone)]
pub struct AdsService(AdsServer);

impl AdsService {
    pub fn new(server: AdsServer) -> AdsService {
        AdsService(server)
    }
}

const SERVICE_NAME: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

impl tonic::server::NamedService for AdsService {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> tonic::codegen::Service<http::Request<B>> for AdsService
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let server = self.0.clone();
        match req.uri().path() {
            SOTW_PATH => Box::pin(async move { Ok(respond(req, |r| server.stream_sotw(r))) }),
            DELTA_PATH => Box::pin(async move { Ok(respond(req, |r| server.stream_delta(r))) }),
            _ => Box::pin(async move { Ok(Status::unimplemented("").into_http()) }),
        }
    }
}

/// Answers one ADS call: the request body decoded as a stream of `Req` for `open`, whose messages
/// become the response body ([`ResponseBody`]).
fn respond<B, Req, Resp>(
    req: http::Request<B>,
    open: impl FnOnce(Request<Streaming<Req>>) -> mpsc::Receiver<Result<Resp, Status>>,
) -> http::Response<tonic::body::Body>
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
    Req: prost::Message + Default + Send + 'static,
    Resp: GrpcMessage + Send + 'static,
{
    if let Some(encoding) = req.headers().get("grpc-encoding")
        && encoding != "identity"
    {
        return Status::unimplemented(format!(
            "xDS requests compressed with {encoding:?} are not supported: send them uncompressed"
        ))
        .into_http();
    }
    let (parts, body) = req.into_parts();
    // Requests uncompressed; no limit given: tonic's default for a received message (4 MiB).
    let inbound = Streaming::new_request(
        tonic_prost::ProstDecoder::<Req>::default(),
        body,
        None,
        None,
    );
    let request = Request::from_parts(
        tonic::metadata::MetadataMap::from_headers(parts.headers),
        parts.extensions,
        inbound,
    );
    let body = ResponseBody {
        messages: open(request),
        chunks: VecDeque::new(),
        done: false,
    };
    let mut response = http::Response::new(tonic::body::Body::new(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// The body of an ADS response: each message of the stream's task as the chunks of
/// [`Frames::of`] (large resource bodies go out as the snapshot holds them, not copied per
/// client as a codec would), then the trailers with the call's `grpc-status`.
struct ResponseBody<T> {
    messages: mpsc::Receiver<Result<T, Status>>,
    chunks: VecDeque<Bytes>,
    done: bool,
}

impl<T: GrpcMessage> http_body::Body for ResponseBody<T> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        loop {
            if let Some(chunk) = this.chunks.pop_front() {
                return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let status = match std::task::ready!(this.messages.poll_recv(cx)) {
                Some(Ok(message)) => match Frames::of(&message) {
                    Ok(chunks) => {
                        this.chunks.extend(chunks);
                        continue;
                    }
                    Err(e) => Status::internal(e.to_string()),
                },
                Some(Err(status)) => status,
                None => Status::ok(""),
            };
            this.done = true;
            let mut trailers = http::HeaderMap::new();
            if status.add_header(&mut trailers).is_err() {
                // Only a message that cannot be a header value fails; the code alone then.
                trailers.insert("grpc-status", http::HeaderValue::from(status.code() as i32));
            }
            return Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.chunks.is_empty()
    }
}

/// Why the xDS server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("xDS server on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("xDS server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The connections of `listener`, with Nagle's algorithm off (tonic's own `tcp_nodelay` applies
/// only to listeners it binds). With it on, the last segment of a large push (a route
/// configuration of hundreds of KB) waited for the client's delayed ACK: ~40 ms added to about
/// a third of the pushes.
fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Serves ADS on an already bound listener until `shutdown` completes, within the limits of
/// [`super::limits`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: AdsServer,
    tls: Option<super::XdsTls>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let router = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(AdsService::new(server));
    match tls {
        None => {
            let connections = limit_connections(incoming(listener), MAX_CONNECTIONS);
            router
                .serve_with_incoming_shutdown(connections, shutdown)
                .await?
        }
        Some(tls) => {
            let connections = tls.incoming(incoming(listener), super::tls::RELOAD_INTERVAL);
            let connections = limit_connections(connections, MAX_CONNECTIONS);
            router
                .serve_with_incoming_shutdown(connections, shutdown)
                .await?
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    /// The `grpc-status` header of the service's immediate answer to a call with no body.
    async fn immediate_status(request: tonic::codegen::http::request::Builder) -> String {
        use std::sync::Arc;
        use tonic::codegen::Service;
        let (_snapshots, rx) = tokio::sync::watch::channel(Arc::new(super::Snapshot::default()));
        let (_shutdown, stop) = tokio::sync::watch::channel(false);
        let mut service = super::AdsService::new(super::AdsServer::new(rx, stop));
        let request = request.body(tonic::body::Body::empty()).unwrap();
        let response = service.call(request).await.unwrap();
        response.headers()["grpc-status"]
            .to_str()
            .unwrap()
            .to_string()
    }

    #[tokio::test]
    async fn an_unknown_method_is_unimplemented() {
        let request = tonic::codegen::http::Request::builder()
            .uri("/envoy.service.discovery.v3.AggregatedDiscoveryService/FetchAggregated");
        let code = tonic::Code::Unimplemented as i32;
        assert_eq!(immediate_status(request).await, code.to_string());
    }

    /// Every frame of a response body until it ends: the data joined, then the trailers.
    async fn frames(
        mut body: super::ResponseBody<super::DeltaResponse>,
    ) -> (Vec<u8>, Option<tonic::codegen::http::HeaderMap>) {
        use http_body_util::BodyExt;
        let (mut data, mut trailers) = (Vec::new(), None);
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            assert!(trailers.is_none(), "a frame after the trailers");
            match frame.into_data() {
                Ok(chunk) => data.extend_from_slice(&chunk),
                Err(frame) => trailers = frame.into_trailers().ok(),
            }
        }
        assert!(http_body::Body::is_end_stream(&body));
        (data, trailers)
    }

    fn body(
        messages: Vec<Result<super::DeltaResponse, tonic::Status>>,
    ) -> super::ResponseBody<super::DeltaResponse> {
        let (tx, rx) = tokio::sync::mpsc::channel(messages.len().max(1));
        for m in messages {
            tx.try_send(m).unwrap();
        }
        super::ResponseBody {
            messages: rx,
            chunks: Default::default(),
            done: false,
        }
    }

    #[tokio::test]
    async fn a_response_body_is_its_messages_then_status_ok() {
        use prost::Message;
        let message = |nonce: &str| super::DeltaResponse {
            nonce: nonce.into(),
            type_url: "t",
            ..Default::default()
        };
        let (data, trailers) = frames(body(vec![Ok(message("1")), Ok(message("2"))])).await;
        let mut expected = Vec::new();
        for m in [message("1"), message("2")] {
            let bytes = m.encode_to_vec();
            expected.push(0);
            expected.extend((bytes.len() as u32).to_be_bytes());
            expected.extend(bytes);
        }
        assert_eq!(data, expected);
        assert_eq!(trailers.unwrap()["grpc-status"], "0");
    }

    #[tokio::test]
    async fn a_response_body_ends_with_the_status_of_an_error() {
        let failed = tonic::Status::unavailable("shutting down");
        let (data, trailers) = frames(body(vec![Err(failed)])).await;
        assert!(data.is_empty());
        let trailers = trailers.unwrap();
        let code = tonic::Code::Unavailable as i32;
        assert_eq!(trailers["grpc-status"], code.to_string().as_str());
        assert_eq!(trailers["grpc-message"], "shutting%20down");
    }

    #[tokio::test]
    async fn a_compressed_request_is_refused() {
        let request = tonic::codegen::http::Request::builder()
            .uri(super::DELTA_PATH)
            .header("grpc-encoding", "gzip");
        let code = tonic::Code::Unimplemented as i32;
        assert_eq!(immediate_status(request).await, code.to_string());
    }

    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryRequest, DiscoveryRequest,
        aggregated_discovery_service_client::AggregatedDiscoveryServiceClient as Client,
    };
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::{mpsc, watch};
    use tokio_stream::wrappers::ReceiverStream;

    const CLUSTERS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    /// A snapshot of one cluster `name` (its body: the name's bytes).
    fn one_cluster(name: &str) -> super::Snapshot {
        use envoy_types::pb::google::protobuf::Any;
        let clusters = [(
            name.to_string(),
            Any {
                type_url: CLUSTERS.into(),
                value: name.as_bytes().to_vec(),
            },
        )];
        let t = crate::translate::ResourceType::Cluster;
        super::Snapshot::from_encoded([(t, clusters.into_iter().collect())].into())
    }

    /// The production server, answering after `ready`, on a free loopback port: a client of it,
    /// and the senders of its snapshots and of its stop.
    async fn gated_server(
        ready: watch::Receiver<bool>,
    ) -> (
        Client<tonic::transport::Channel>,
        watch::Sender<Arc<super::Snapshot>>,
        watch::Sender<bool>,
    ) {
        let (snapshots, rx) = watch::channel(Arc::new(super::Snapshot::default()));
        let (stop, stop_rx) = watch::channel(false);
        let server = super::AdsServer::new(rx, stop_rx.clone()).after(ready);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut stopped = stop_rx;
        tokio::spawn(super::serve(listener, server, None, async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
        let channel = tonic::transport::Endpoint::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap();
        (Client::new(channel), snapshots, stop)
    }

    /// What a client that connected before the first build sees: nothing until the first build
    /// is published and `ready` turns true, then that build (not the empty snapshot the server
    /// held before it), for a state-of-the-world and a delta stream.
    #[tokio::test]
    async fn streams_answer_nothing_before_the_first_build_then_the_build() {
        let quiet = Duration::from_millis(700);
        let (ready_tx, ready) = watch::channel(false);
        let (mut client, snapshots, _stop) = gated_server(ready).await;
        let (sotw_tx, sotw_rx) = mpsc::channel(4);
        sotw_tx
            .send(DiscoveryRequest {
                type_url: CLUSTERS.into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut sotw = client
            .stream_aggregated_resources(ReceiverStream::new(sotw_rx))
            .await
            .unwrap()
            .into_inner();
        let (delta_tx, delta_rx) = mpsc::channel(4);
        delta_tx
            .send(DeltaDiscoveryRequest {
                type_url: CLUSTERS.into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut delta = client
            .delta_aggregated_resources(ReceiverStream::new(delta_rx))
            .await
            .unwrap()
            .into_inner();
        let early = tokio::time::timeout(quiet, sotw.message()).await;
        assert!(early.is_err(), "answered before the first build: {early:?}");
        let early = tokio::time::timeout(quiet, delta.message()).await;
        assert!(early.is_err(), "answered before the first build: {early:?}");
        // A snapshot published before ready is not sent either.
        snapshots.send_replace(Arc::new(one_cluster("a")));
        let early = tokio::time::timeout(quiet, sotw.message()).await;
        assert!(early.is_err(), "answered before ready: {early:?}");
        snapshots.send_replace(Arc::new(one_cluster("b")));
        ready_tx.send_replace(true);
        let wait = Duration::from_secs(10);
        let got = tokio::time::timeout(wait, sotw.message()).await;
        let got = got.expect("answered once ready").unwrap().unwrap();
        let names: Vec<&[u8]> = got.resources.iter().map(|r| &r.value[..]).collect();
        assert_eq!(names, [b"b"]);
        let got = tokio::time::timeout(wait, delta.message()).await;
        let got = got.expect("answered once ready").unwrap().unwrap();
        let names: Vec<&str> = got.resources.iter().map(|r| &r.name[..]).collect();
        assert_eq!(names, ["b"]);
        // Later changes flow as without the gate (once the client has acknowledged).
        let ack = DeltaDiscoveryRequest {
            type_url: CLUSTERS.into(),
            response_nonce: got.nonce,
            ..Default::default()
        };
        delta_tx.send(ack).await.unwrap();
        snapshots.send_replace(Arc::new(one_cluster("c")));
        let got = tokio::time::timeout(wait, delta.message()).await;
        let got = got.expect("a change after ready").unwrap().unwrap();
        let names: Vec<&str> = got.resources.iter().map(|r| &r.name[..]).collect();
        assert_eq!(
            (names, got.removed_resources),
            (vec!["c"], vec!["b".into()])
        );
    }

    #[tokio::test]
    async fn a_stream_waiting_for_the_first_build_ends_when_it_cannot_come() {
        let (ready_tx, ready) = watch::channel(false);
        let (mut client, _snapshots, _stop) = gated_server(ready).await;
        let (tx, rx) = mpsc::channel(1);
        tx.send(DiscoveryRequest::default()).await.unwrap();
        let mut stream = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        drop(ready_tx);
        let end = tokio::time::timeout(Duration::from_secs(10), stream.message()).await;
        let status = end.expect("the stream ends").unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
    }

    #[tokio::test]
    async fn a_client_holds_only_so_many_requests_before_the_first_build() {
        let (_ready_tx, ready) = watch::channel(false);
        let (mut client, _snapshots, _stop) = gated_server(ready).await;
        let (tx, rx) = mpsc::channel(super::MAX_HELD_REQUESTS + 1);
        for _ in 0..=super::MAX_HELD_REQUESTS {
            tx.send(DiscoveryRequest::default()).await.unwrap();
        }
        let mut stream = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let end = tokio::time::timeout(Duration::from_secs(10), stream.message()).await;
        let status = end.expect("the stream ends").unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    }

    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut incoming = super::incoming(listener);
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let accepted = incoming.next().await.unwrap().unwrap();
        assert!(accepted.nodelay().unwrap());
    }
}
