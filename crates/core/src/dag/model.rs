//! The routing model `dag::build` produces: virtual hosts → routes → weighted clusters → endpoints,
//! plus TLS secrets and a status for every routing object. Plain data, deterministic order
//! (BTreeMaps, routes sorted by precedence), no Envoy types: `translate` turns it into Envoy config,
//! `sluice routes` prints it, and `lookup` answers "which route takes this request".

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::api::{LbStrategy, ObjectRef, TlsVersion};
pub use crate::route_match::{HeaderMatch, HeaderOp, PathMatch, PathText, QueryMatch, QueryOp};
pub use crate::store::endpoints::{Endpoint, Endpoints, EndpointsIter};

/// A sorted map the model is made of: a persistent B-tree ([`crate::pmap::OrdMap`]), so a model
/// derived from the previous one (an incremental build) shares every entry it did not change,
/// cloning a model is cheap, comparing two models skips what they share, and a full build makes
/// each map from its sorted entries in one pass.
pub type Map<K, V> = crate::pmap::OrdMap<K, V>;

/// A cluster's name, shared by the cluster, its key in [`Dag::clusters`] and every route that
/// forwards to it (one allocation per cluster instead of one per use).
pub type ClusterName = Arc<str>;

/// The cluster a Gateway API route's weights send an invalid backend's share to, for an
/// HTTPRoute: no cluster has this name (no Kubernetes name has a `:`), and Envoy answers 500 for
/// the requests sent to it (`cluster_not_found_response_code`), as the Gateway API asks.
pub const INVALID_BACKEND_CLUSTER: &str = "sluice:invalid-backend";
/// The same for a GRPCRoute: Envoy answers 503, which a gRPC client gets as `UNAVAILABLE`.
pub const UNAVAILABLE_BACKEND_CLUSTER: &str = "sluice:unavailable-backend";

/// The virtual host of rules without a host, and of every Ingress's defaultBackend.
pub const CATCH_ALL_HOST: &str = "*";

/// The whole routing model plus statuses.
///
/// Virtual hosts and clusters are held in `Arc`s: a model built from the previous one shares the
/// unchanged ones, and the translation of the previous model can tell them apart by pointer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Dag {
    /// Virtual hosts by lowercase name: exact (`www.example.com`), wildcard (`*.example.com`;
    /// each route says how many labels it takes, [`Route::wildcard_spans_labels`]), or `*` for
    /// requests whose host matches no other virtual host.
    pub vhosts: Map<String, Arc<VirtualHost>>,
    /// Upstream clusters by name (stable, derived from service, port and settings): those the
    /// virtual hosts' routes use.
    pub clusters: Map<ClusterName, Arc<Cluster>>,
    /// TLS certificates by name (`namespace/secret`): those the virtual hosts use.
    pub secrets: Map<String, TlsSecret>,
    /// A status for every routing object seen.
    pub statuses: Map<ObjectRef, ObjectStatus>,
    /// Gateway `TCP` listeners carrying a TCPRoute, by the port Envoy listens on.
    pub tcp_listeners: Map<u16, Arc<TcpListener>>,
    /// The ports of the Gateways that have addresses of their own (`--gateway-addresses`): what
    /// Envoy serves at each Gateway's address and port, apart from every other Gateway and from
    /// the hosts above.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub entries: Map<EntryKey, Arc<Entry>>,
}

/// One port of a Gateway that has an address of its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EntryKey {
    /// The Gateway (`namespace/name`).
    pub gateway: crate::api::ObjKey,
    pub port: u16,
}

impl EntryKey {
    /// The name of the Envoy listener of this port, and of its plain-HTTP route configuration:
    /// `gateway/<namespace>/<name>/<port>` (no Kubernetes name has a `/`).
    pub fn name(&self) -> String {
        format!(
            "gateway/{}/{}/{}",
            self.gateway.namespace, self.gateway.name, self.port
        )
    }
}

/// What Envoy serves at one port of a Gateway's own address ([`Dag::entries`]): hosts routed
/// over plain HTTP, hosts selected by SNI (TLS terminated for HTTP or for a stream, or passed
/// through), or every connection forwarded to a TCPRoute's backends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The address Envoy binds, the Gateway's.
    pub address: std::net::IpAddr,
    pub protocol: EntryProtocol,
    /// The hosts served here, by lowercase name, as in [`Dag::vhosts`] (the catch-all `*`
    /// included).
    pub vhosts: std::collections::BTreeMap<String, Arc<VirtualHost>>,
    /// A `TCP` port's backends and the TCPRoute they are of.
    pub tcp: Option<(Clusters, ObjectRef)>,
    /// A TLS port's certificate for connections whose SNI names no host here (or none at all):
    /// the Secret id of the port's first HTTPS listener without a hostname, else of its first.
    pub default_secret: Option<String>,
    /// A TLS port's HTTPS listeners by hostname (None: a listener without one), in the
    /// Gateway's order: which listener a TLS client's SNI picks and which one a request's Host
    /// picks, for answering 421 when they differ.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub https_listeners: Vec<Option<String>>,
    /// An HTTPS port's client certificate validation (the Gateway's `spec.tls.frontend`):
    /// every filter chain terminating TLS here asks the client for a certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_validation: Option<ClientValidation>,
}

/// How Envoy validates the certificates clients present on an HTTPS port of a Gateway
/// (`spec.tls.frontend.default` or `perPort`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ClientValidation {
    /// Key into [`Dag::secrets`] of the CA certificates (a [`SecretKind::TrustedCa`]) a client's
    /// certificate must chain to.
    pub ca_secret: String,
    /// `mode: AllowInsecureFallback`: a connection without a certificate, or with one that does
    /// not verify, is let in all the same (the backend decides); else (`AllowValidOnly`) only a
    /// client whose certificate verifies gets through.
    pub insecure_fallback: bool,
}

/// What a port of a Gateway's address speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum EntryProtocol {
    Http,
    /// HTTPS and TLS listeners: a filter chain per host, chosen by SNI.
    Tls,
    Tcp,
}

/// A port whose TCP connections are forwarded to a TCPRoute's backends: a Gateway listener of
/// protocol `TCP` with the route attached to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpListener {
    pub port: u16,
    /// The backends and their weights (a share whose backend does not resolve goes to a cluster
    /// of no endpoints: those connections are closed).
    pub clusters: Clusters,
    /// The TCPRoute.
    pub route: ObjectRef,
}

/// One virtual host and its routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VirtualHost {
    pub host: String,
    /// Present when the host is served over HTTPS; HTTP requests then get a 301 to HTTPS except on
    /// routes with `permit_insecure`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<VhostTls>,
    /// Routes in precedence order: the first that matches a request takes it.
    pub routes: Vec<Route>,
    /// TCP proxying: when set (IngressRoute v1 `tcp` backends), the HTTPS filter
    /// chain of this host terminates TLS and forwards the TCP stream to these clusters instead of
    /// routing HTTP. Requires `tls`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_proxy: Option<Clusters>,
    /// TLS passthrough (a Gateway API TLSRoute): the HTTPS listener forwards the connections
    /// whose SNI names this host, still encrypted, to these clusters. Never with `tls` (the host's
    /// TLS is its backends'); plain HTTP routes may come with it (an HTTP listener's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_passthrough: Option<Clusters>,
    /// The root object that owns this host exclusively (IngressRoute or Route); None for hosts merged
    /// from Ingresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<ObjectRef>,
    /// A wildcard host that a Gateway listener's hostname takes (the Gateway API's listener
    /// isolation): a request of more labels that none of its routes takes is answered 404, not
    /// handed on to the routes of the catch-all host `*` as other wildcard hosts' are.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
}

impl VirtualHost {
    /// Whether the host has a virtual host in the plain-HTTP route configuration: not a TCP proxy
    /// (served over TLS only), not a TLS passthrough without HTTP routes.
    pub fn serves_http(&self) -> bool {
        self.tcp_proxy.is_none() && (self.tls_passthrough.is_none() || !self.routes.is_empty())
    }
}

/// TLS settings of a virtual host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VhostTls {
    /// Key into [`Dag::secrets`].
    pub secret: String,
    pub min_version: TlsVersion,
}

/// One route: conditions on the request and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    pub path: PathMatch,
    /// All must hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
    pub action: RouteAction,
    /// Served over plain HTTP even when the virtual host has TLS.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub permit_insecure: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<crate::validate::common::Timeout>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// What few routes have, boxed so that the routes without it stay small: a full build
    /// writes, moves and sorts every route of the cluster.
    #[serde(flatten)]
    pub extras: Option<Box<RouteExtras>>,
    /// The object this route comes from.
    pub source: ObjectRef,
}

/// The conditions and changes of a route that only Gateway API routes have.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RouteExtras {
    /// Conditions on the query string (Gateway API `queryParams`); all must hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<QueryMatch>,
    /// Header changes on the request and the response (Gateway API HTTPRoute filters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers_edit: Option<HeaderEdits>,
    /// A rewrite of the request's host or path on its way to the backend (Gateway API
    /// `URLRewrite`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Rewrite>,
    /// Copies of the requests the route forwards, sent elsewhere (Gateway API `RequestMirror`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    /// Which cross-origin requests browsers may make (Gateway API `CORS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// Header changes of each backend of the route's [`RouteAction::Forward`], in its order, on
    /// the requests sent to that backend and their responses (Gateway API filters on a
    /// `backendRef`); empty when no backend has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub backend_edits: Vec<Option<HeaderEdits>>,
}

/// A route's CORS policy (Gateway API `CORS` filter): Envoy answers a preflight request from an
/// allowed origin itself, answers one from any other origin without the CORS headers, and adds
/// the headers to the answers of allowed origins' requests (docs/gateway-api.md, "CORS").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cors {
    /// The allowed origins as written: `*`, or `<scheme>://<host>[:<port>]` whose host may start
    /// with `*` (any labels to the left).
    pub allow_origins: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a browser may keep a preflight's answer, in seconds.
    pub max_age: i32,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_credentials: bool,
}

impl RouteExtras {
    /// These extras as a route holds them: none when there are none.
    pub fn boxed(self) -> Option<Box<RouteExtras>> {
        (self != RouteExtras::default()).then(|| Box::new(self))
    }
}

impl Route {
    /// On a wildcard host (`*.example.com`), whether the route takes requests for any number of
    /// labels in front of the suffix (`a.b.example.com` too), as the Gateway API's hostnames do,
    /// or for one label (`a.example.com`), as an Ingress's wildcard host does.
    pub fn wildcard_spans_labels(&self) -> bool {
        matches!(
            self.source.kind,
            crate::api::Kind::HttpRoute | crate::api::Kind::GrpcRoute
        )
    }

    /// The route's query parameter conditions.
    pub fn query(&self) -> &[QueryMatch] {
        self.extras.as_deref().map_or(&[], |e| &e.query)
    }

    /// The route's header changes.
    pub fn headers_edit(&self) -> Option<&HeaderEdits> {
        self.extras.as_deref()?.headers_edit.as_ref()
    }

    /// The route's rewrite.
    pub fn rewrite(&self) -> Option<&Rewrite> {
        self.extras.as_deref()?.rewrite.as_ref()
    }

    /// The route's mirrors.
    pub fn mirrors(&self) -> &[Mirror] {
        self.extras.as_deref().map_or(&[], |e| &e.mirrors)
    }

    /// The route's CORS policy.
    pub fn cors(&self) -> Option<&Cors> {
        self.extras.as_deref()?.cors.as_ref()
    }

    /// The header changes of the backend at `index` of the route's [`RouteAction::Forward`].
    pub fn backend_edits(&self, index: usize) -> Option<&HeaderEdits> {
        self.extras.as_deref()?.backend_edits.get(index)?.as_ref()
    }

    /// The route's extras, to change (made when it has none).
    pub fn extras_mut(&mut self) -> &mut RouteExtras {
        self.extras.get_or_insert_with(Box::default)
    }
}

/// A copy of the requests a route forwards, sent to another cluster whose answers are dropped
/// (Gateway API `RequestMirror`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    pub cluster: ClusterName,
    /// The share of the requests copied, in millionths (1,000,000: every request).
    pub per_million: u32,
}

/// A rewrite of a forwarded request: its `Host`, and its whole path or the prefix the route
/// matched.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rewrite {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The whole path replaced by this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path prefix the route matched (a segment-wise prefix) replaced by this one
    /// (Gateway API `ReplacePrefixMatch`): `/foo` → `/bar` takes `/foo/x` to `/bar/x` and `/foo`
    /// to `/bar`; `/foo` → `/` takes `/foo/x` to `/x` and `/foo` to `/`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// The header changes of a route: on the request on its way to the backend, and on the
/// response on its way back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderEdits {
    #[serde(skip_serializing_if = "HeaderEdit::is_empty")]
    pub request: HeaderEdit,
    #[serde(skip_serializing_if = "HeaderEdit::is_empty")]
    pub response: HeaderEdit,
}

/// Headers to set (replacing any value), to add (beside any value) and to remove, by name in
/// lower case.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HeaderEdit {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<(String, String)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderEdit {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// What a route does with a request it takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RouteAction {
    /// Balance over these clusters by weight (weights are relative; at least one is > 0).
    Forward(Clusters),
    /// Answer 503: the route's backends cannot be resolved (the reason is in the source's status).
    Unavailable(String),
    /// Answer 500: an HTTPRoute rule has no valid backend (none, or every backendRef invalid),
    /// as the Gateway API asks (the reason is in the route's status).
    Invalid(String),
    /// Answer with a redirect (Gateway API `RequestRedirect`).
    Redirect(Box<Redirect>),
}

/// A redirect: the request's URL with the parts that are set replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// The whole path replaced by this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The path prefix the route matched replaced by this one, as a [`Rewrite`]'s `prefix`
    /// (Gateway API `ReplacePrefixMatch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// 301, 302, 303, 307 or 308.
    pub status: u16,
}

/// The clusters of a [`RouteAction::Forward`]: most routes have one backend, held in the route
/// itself rather than in a heap block of its own (one allocation, and one pointer to follow, less
/// per route; a route with more backends keeps them on the heap as a vector would).
pub type Clusters = smallvec::SmallVec<[WeightedCluster; 1]>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct WeightedCluster {
    pub cluster: ClusterName,
    pub weight: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    pub count: u32,
    #[serde(skip_serializing_if = "Option::is_none", with = "opt_duration")]
    pub per_try_timeout: Option<Duration>,
    /// What is retried.
    #[serde(skip_serializing_if = "RetryOn::is_default")]
    pub on: RetryOn,
    /// The least time between tries (Envoy's exponential backoff starts there); None: Envoy's
    /// default (25 ms).
    #[serde(skip_serializing_if = "Option::is_none", with = "opt_duration")]
    pub backoff: Option<Duration>,
}

impl RetryPolicy {
    /// `count` retries on the default conditions, each try bounded by `per_try_timeout`.
    pub fn new(count: u32, per_try_timeout: Option<Duration>) -> Self {
        Self {
            count,
            per_try_timeout,
            on: RetryOn::Default,
            backoff: None,
        }
    }
}

/// The conditions under which a request to a backend is tried again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RetryOn {
    /// Any 5xx answer, a connection failure or a reset (IngressRoute's `failurePolicy`).
    #[default]
    Default,
    /// An HTTPRoute rule's `retry`: an answer with one of these status codes, a connection
    /// failure, a refused stream, a reset, or a try that ran out of its `backendRequest` time.
    Codes(Vec<u16>),
}

impl RetryOn {
    fn is_default(&self) -> bool {
        *self == RetryOn::Default
    }
}

/// The protocol Envoy speaks to an upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamProtocol {
    #[default]
    Http,
    /// HTTP/1.1 over TLS.
    Https,
    /// Cleartext HTTP/2.
    H2c,
    /// HTTP/2 over TLS.
    H2,
    /// TLS-encapsulated TCP.
    Tcp,
}

/// An upstream cluster: one Service port with one set of settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    pub name: ClusterName,
    /// Where the name holds the cluster's Service ([`Cluster::service`]).
    #[serde(skip)]
    pub service: ServiceSpan,
    /// The Service port number routes refer to.
    pub port: i32,
    pub protocol: UpstreamProtocol,
    pub lb: LbStrategy,
    /// Boxed: few clusters have one, and inline it would make every cluster a third larger.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<Box<HealthCheckPolicy>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// TLS backends (`https`, `https2`): the SNI Envoy sends and how it verifies the backend's
    /// certificate. None for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_tls: Option<Arc<UpstreamTls>>,
    /// Ready endpoints, sorted.
    pub endpoints: Endpoints,
}

/// What Envoy does on its TLS connections to a backend (docs/ingressroute.md, "Secure
/// backends").
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamTls {
    /// The server name sent: the validation's subject name, else the Service's in-cluster name
    /// `<service>.<namespace>.svc`.
    pub sni: String,
    /// None: any certificate is accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<UpstreamValidation>,
    /// The certificate and key Envoy presents to the backend, a key into [`Dag::secrets`] (a
    /// Gateway's `spec.tls.backend.clientCertificateRef`). None: Envoy presents none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

/// A subject alternative name a backend's certificate may carry (BackendTLSPolicy
/// `validation.subjectAltNames`), compared exactly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SubjectAltName {
    Dns(String),
    Uri(String),
}

/// How Envoy verifies a backend's certificate: it must chain to the CA certificates of a
/// secret and carry a DNS subject alternative name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamValidation {
    /// The secret of the CA certificates, a key into [`Dag::secrets`]
    /// (`namespace/name/ca.crt`, see [`ca_secret_id`]).
    pub ca_secret: String,
    /// Lowercase. The DNS name the certificate must carry, unless `subject_alt_names` is set.
    pub subject_name: String,
    /// When not empty, the certificate must carry one of these instead of `subject_name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<SubjectAltName>,
}

/// The secrets a cluster uses: the CA certificates it verifies its backends with and the
/// client certificate it presents to them (keys into [`Dag::secrets`]).
pub fn cluster_secrets(c: &Cluster) -> impl Iterator<Item = &str> {
    let tls = c.upstream_tls.as_deref();
    let ca = tls
        .and_then(|t| t.validation.as_ref())
        .map(|v| v.ca_secret.as_str());
    let client = tls.and_then(|t| t.client_secret.as_deref());
    ca.into_iter().chain(client)
}

/// The id of the CA certificates of the Secret `namespace/name` among [`Dag::secrets`]:
/// `namespace/name/ca.crt`, apart from the id of its certificate and key (`namespace/name`; no
/// Kubernetes name has a `/`).
pub fn ca_secret_id(namespace: &str, name: &str) -> String {
    let mut id = String::with_capacity(namespace.len() + name.len() + 8);
    id.push_str(namespace);
    id.push('/');
    id.push_str(name);
    id.push_str("/ca.crt");
    id
}

/// The lengths of the namespace and the Service name a cluster's name begins with
/// (`namespace/service/port...`): the cluster's Service, read from its name rather than held
/// as a key of its own (two shared texts, whose reference counts every cluster made and freed
/// touched).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceSpan {
    namespace: u32,
    name: u32,
}

impl ServiceSpan {
    /// The span of a name that begins with `namespace`, `/`, `service`, `/`.
    pub fn new(namespace: &str, service: &str) -> ServiceSpan {
        let len = |s: &str| u32::try_from(s.len()).unwrap_or(u32::MAX);
        ServiceSpan {
            namespace: len(namespace),
            name: len(service),
        }
    }
}

impl Cluster {
    /// The namespace and name of the cluster's Service (empty where the name is shorter than
    /// its span says, which no cluster sluice builds is).
    pub fn service(&self) -> (&str, &str) {
        let ns = self.service.namespace as usize;
        let name_start = ns.saturating_add(1);
        let name_end = name_start.saturating_add(self.service.name as usize);
        (
            self.name.get(..ns).unwrap_or_default(),
            self.name.get(name_start..name_end).unwrap_or_default(),
        )
    }
}

/// Active HTTP health checking with the seed defaults applied.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckPolicy {
    pub path: String,
    pub host: String,
    #[serde(with = "duration")]
    pub interval: Duration,
    #[serde(with = "duration")]
    pub timeout: Duration,
    pub unhealthy_threshold: u32,
    pub healthy_threshold: u32,
}

/// Passive health checking: eject hosts after consecutive 5xx answers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutlierDetection {
    pub consecutive_5xx: u32,
}

/// A secret Envoy gets by SDS: a TLS certificate and key, or CA certificates, PEM-encoded (the
/// texts the store holds, shared rather than copied: a build of a thousand TLS hosts would
/// otherwise copy about a megabyte).
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TlsSecret {
    pub name: String,
    pub kind: SecretKind,
    /// The certificate chain; of a [`SecretKind::TrustedCa`], the CA certificates.
    #[serde(skip)]
    pub cert_pem: Arc<str>,
    /// Empty for a [`SecretKind::TrustedCa`].
    #[serde(skip)]
    pub key_pem: Arc<str>,
}

/// What a [`TlsSecret`] holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SecretKind {
    /// A certificate and key Envoy serves TLS with.
    #[default]
    Certificate,
    /// CA certificates Envoy verifies a backend's certificate with (a Secret's or a
    /// ConfigMap's `ca.crt`).
    TrustedCa,
    /// A certificate and key Envoy presents to TLS backends (a Gateway's
    /// `spec.tls.backend.clientCertificateRef`), apart from the listeners' certificates.
    ClientCertificate,
}

impl std::fmt::Debug for TlsSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSecret")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

// The statuses of the routing objects: `status.rs`, re-exported here.
pub use super::status::*;

mod duration {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }
}

mod opt_duration {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::duration::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}
