//! The ADS gRPC server (envoy.service.discovery.v3.AggregatedDiscoveryService). Each stream runs
//! one task that feeds requests and snapshot changes to its [`Stream`] state machine and sends
//! whatever it answers. Snapshots arrive over a `tokio::sync::watch` channel shared by every
//! stream, so any number of Envoys follow the same state.

use std::net::SocketAddr;
use std::sync::Arc;

use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::{BoxFuture, StdError, http};
use tonic::transport::ServerTlsConfig;
use tonic::{Request, Status, Streaming};

use super::cache::Snapshot;
use super::stream::{Mode, Response, Stats, Stream};
use super::wire::{DeltaResponse, SotwResponse};

/// The ADS service.
#[derive(Clone)]
pub struct AdsServer {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
    stats: Arc<Stats>,
}

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
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    fn spawn<Req, Resp>(
        &self,
        mode: Mode,
        mut inbound: Streaming<Req>,
        handle: fn(&mut Stream, &Req, &Snapshot) -> Vec<Response>,
        unwrap: fn(Response) -> Option<Resp>,
    ) -> ReceiverStream<Result<Resp, Status>>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        Streaming<Req>: Send,
    {
        let (tx, rx) = mpsc::channel(32);
        let mut snapshots = self.snapshots.clone();
        let mut shutdown = self.shutdown.clone();
        let stats = self.stats.clone();
        tokio::spawn(async move {
            let mut sm = Stream::new(mode, stats);
            loop {
                let out = tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(req)) => {
                            let snap = snapshots.borrow_and_update().clone();
                            handle(&mut sm, &req, &snap)
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::debug!(node = sm.node(), error = %e, "xDS stream error");
                            break;
                        }
                    },
                    changed = snapshots.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let snap = snapshots.borrow_and_update().clone();
                        sm.on_snapshot(&snap)
                    }
                    _ = shutdown.wait_for(|s| *s) => break,
                };
                for r in out {
                    if let Some(resp) = unwrap(r)
                        && tx.send(Ok(resp)).await.is_err()
                    {
                        return;
                    }
                }
            }
            tracing::info!(node = sm.node(), ?mode, "xDS stream closed");
        });
        ReceiverStream::new(rx)
    }
}

impl AdsServer {
    fn stream_sotw(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> ResponseStream<SotwResponse> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (state of the world)");
        self.spawn(
            Mode::Sotw,
            request.into_inner(),
            Stream::on_sotw_request,
            |r| match r {
                Response::Sotw(d) => Some(d),
                Response::Delta(_) => None,
            },
        )
    }

    fn stream_delta(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> ResponseStream<DeltaResponse> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (delta)");
        self.spawn(
            Mode::Delta,
            request.into_inner(),
            Stream::on_delta_request,
            |r| match r {
                Response::Delta(d) => Some(d),
                Response::Sotw(_) => None,
            },
        )
    }
}

type ResponseStream<T> = ReceiverStream<Result<T, Status>>;

/// The gRPC service `envoy.service.discovery.v3.AggregatedDiscoveryService` (ADS), both methods.
/// It is written here rather than generated so that responses go out as [`SotwResponse`] and
/// [`DeltaResponse`], which encode the snapshot's resources in place: the generated service's
/// messages would need a copy of every resource per response (docs/xds.md, "Cost per change").
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

struct SotwMethod(AdsServer);
struct DeltaMethod(AdsServer);

impl tonic::server::StreamingService<DiscoveryRequest> for SotwMethod {
    type Response = SotwResponse;
    type ResponseStream = ResponseStream<SotwResponse>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<DiscoveryRequest>>) -> Self::Future {
        let out = self.0.stream_sotw(request);
        Box::pin(async move { Ok(tonic::Response::new(out)) })
    }
}

impl tonic::server::StreamingService<DeltaDiscoveryRequest> for DeltaMethod {
    type Response = DeltaResponse;
    type ResponseStream = ResponseStream<DeltaResponse>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, Status>;

    fn call(&mut self, request: Request<Streaming<DeltaDiscoveryRequest>>) -> Self::Future {
        let out = self.0.stream_delta(request);
        Box::pin(async move { Ok(tonic::Response::new(out)) })
    }
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
            SOTW_PATH => Box::pin(async move {
                let codec = tonic_prost::ProstCodec::<SotwResponse, DiscoveryRequest>::default();
                let mut grpc = tonic::server::Grpc::new(codec);
                Ok(grpc.streaming(SotwMethod(server), req).await)
            }),
            DELTA_PATH => Box::pin(async move {
                let codec =
                    tonic_prost::ProstCodec::<DeltaResponse, DeltaDiscoveryRequest>::default();
                let mut grpc = tonic::server::Grpc::new(codec);
                Ok(grpc.streaming(DeltaMethod(server), req).await)
            }),
            _ => Box::pin(async move { Ok(Status::unimplemented("").into_http()) }),
        }
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
    #[error("xDS server TLS: {0}")]
    Tls(tonic::transport::Error),
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

/// Serves ADS on an already bound listener until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: AdsServer,
    tls: Option<ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)));
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).map_err(ServeError::Tls)?;
    }
    builder
        .add_service(AdsService::new(server))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    #[tokio::test]
    async fn an_unknown_method_is_unimplemented() {
        use std::sync::Arc;
        use tonic::codegen::{Service, http};
        let (_snapshots, rx) = tokio::sync::watch::channel(Arc::new(super::Snapshot::default()));
        let (_shutdown, stop) = tokio::sync::watch::channel(false);
        let mut service = super::AdsService::new(super::AdsServer::new(rx, stop));
        let request = http::Request::builder()
            .uri("/envoy.service.discovery.v3.AggregatedDiscoveryService/FetchAggregated")
            .body(tonic::body::Body::empty())
            .unwrap();
        let response = service.call(request).await.unwrap();
        let code = tonic::Code::Unimplemented as i32;
        assert_eq!(response.headers()["grpc-status"], code.to_string().as_str());
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
