//! The route table: a readable, serializable view of the model ("why did my request go there"),
//! printed by `sluice routes` and recorded by the golden tests.

use serde::Serialize;

use super::model::{Dag, Route, RouteAction, State};
use crate::validate::common::Timeout;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableHost {
    pub host: String,
    /// Where a Gateway with an address of its own serves the host: `Gateway <ns>/<name> at
    /// <address>:<port>` (none: on Envoy's shared listeners).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// TCP proxying (IngressRoute v1 `tcp` backends): `cluster (weight)` entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_proxy: Option<Vec<String>>,
    /// TLS passthrough (a TLSRoute): `cluster (weight)` entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_passthrough: Option<Vec<String>>,
    pub routes: Vec<TableRoute>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableRoute {
    #[serde(rename = "match")]
    pub match_: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// Query parameter conditions: `?name="value"` or `?name=~/regex/`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<String>,
    /// `cluster (weight)` entries, or `503 (reason)` / `500 (reason)`.
    pub backends: Vec<String>,
    /// Mirrors: `cluster` or `cluster (12.5%)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// The CORS policy, when set: `origins A, B; methods GET, PUT; headers H; expose E;
    /// max age 5s` and `; credentials` when they are allowed (empty lists left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<String>,
    /// On TLS hosts: `redirect` (HTTP gets a 301) or `permitted` (served over HTTP too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Request timeout, when set (`infinity` or e.g. `1s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Retries, when set: `N` or `N (per try 150ms)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<String>,
    pub source: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableStatus {
    pub object: String,
    pub status: State,
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The route table of a model, hosts sorted by name, routes in precedence order, then the
/// Gateway TCP listeners as hosts `tcp:<port>` owned by their TCPRoute.
pub fn route_table(dag: &Dag) -> Vec<TableHost> {
    let weighted = |cs: &crate::dag::Clusters| -> Vec<String> {
        (cs.iter())
            .map(|c| format!("{} ({})", c.cluster, c.weight))
            .collect()
    };
    let tcp = dag.tcp_listeners.values().map(|l| TableHost {
        host: format!("tcp:{}", l.port),
        gateway: None,
        tls: None,
        owner: Some(l.route.to_string()),
        tcp_proxy: Some(weighted(&l.clusters)),
        tls_passthrough: None,
        routes: Vec::new(),
    });
    let host = |v: &crate::dag::VirtualHost, gateway: Option<String>| TableHost {
        host: v.host.clone(),
        gateway,
        tls: v
            .tls
            .as_ref()
            .map(|t| format!("{} (min TLS {})", t.secret, tls_version(t.min_version))),
        owner: v.owner.as_ref().map(|o| o.to_string()),
        tcp_proxy: v.tcp_proxy.as_ref().map(weighted),
        tls_passthrough: v.tls_passthrough.as_ref().map(weighted),
        routes: v
            .routes
            .iter()
            .map(|r| table_route(r, v.tls.is_some()))
            .collect(),
    };
    // The Gateways with addresses of their own, each port's hosts, and its TCPRoute.
    let entries = dag.entries.iter().flat_map(|(key, e)| {
        let at = format!(
            "Gateway {} at {}",
            key.gateway,
            std::net::SocketAddr::new(e.address, key.port)
        );
        let tcp = e.tcp.as_ref().map(|(clusters, route)| TableHost {
            host: format!("tcp:{}", key.port),
            gateway: Some(at.clone()),
            tls: None,
            owner: Some(route.to_string()),
            tcp_proxy: Some(weighted(clusters)),
            tls_passthrough: None,
            routes: Vec::new(),
        });
        (e.vhosts.values())
            .map(move |v| host(v, Some(at.clone())))
            .chain(tcp)
    });
    dag.vhosts
        .values()
        .map(|v| host(v, None))
        .chain(tcp)
        .chain(entries)
        .collect()
}

/// A CORS policy as a table shows it ([`TableRoute::cors`]).
fn cors(c: &crate::dag::Cors) -> String {
    let mut parts = Vec::new();
    for (what, list) in [
        ("origins", &c.allow_origins),
        ("methods", &c.allow_methods),
        ("headers", &c.allow_headers),
        ("expose", &c.expose_headers),
    ] {
        if !list.is_empty() {
            parts.push(format!("{what} {}", list.join(", ")));
        }
    }
    parts.push(format!("max age {}s", c.max_age));
    if c.allow_credentials {
        parts.push("credentials".to_string());
    }
    parts.join("; ")
}

fn tls_version(v: crate::api::TlsVersion) -> &'static str {
    match v {
        crate::api::TlsVersion::V1_1 => "1.1",
        crate::api::TlsVersion::V1_2 => "1.2",
        crate::api::TlsVersion::V1_3 => "1.3",
    }
}

/// One route as a table row.
pub fn table_route(r: &Route, tls: bool) -> TableRoute {
    TableRoute {
        match_: r.path.to_string(),
        headers: r.headers.iter().map(|h| h.to_string()).collect(),
        query: r.query().iter().map(|q| q.to_string()).collect(),
        backends: backends(r),
        mirrors: r.mirrors().iter().map(mirror).collect(),
        cors: r.cors().map(cors),
        http: tls.then(|| {
            if r.permit_insecure {
                "permitted"
            } else {
                "redirect"
            }
            .to_string()
        }),
        timeout: r.timeout.map(|t| match t {
            Timeout::Infinite => "infinity".to_string(),
            Timeout::After(d) => format!("{d:?}"),
        }),
        retries: r.retry.as_ref().map(|p| match p.per_try_timeout {
            Some(d) => format!("{} (per try {d:?})", p.count),
            None => p.count.to_string(),
        }),
        source: r.source.to_string(),
    }
}

/// A mirror as `cluster`, or `cluster (share%)` when it copies a share of the requests.
fn mirror(m: &crate::dag::Mirror) -> String {
    match m.per_million {
        1_000_000 => m.cluster.to_string(),
        n => format!("{} ({}%)", m.cluster, f64::from(n) / 10_000.0),
    }
}

/// A route's backends as `cluster (weight)`, `503 (reason)` or `500 (reason)`.
pub fn backends(r: &Route) -> Vec<String> {
    match &r.action {
        RouteAction::Forward(cs) => cs
            .iter()
            .map(|c| format!("{} ({})", c.cluster, c.weight))
            .collect(),
        RouteAction::Unavailable(why) => vec![format!("503 ({why})")],
        RouteAction::Invalid(why) => vec![format!("500 ({why})")],
        RouteAction::Redirect(r) => vec![format!(
            "{} to {}{}{}{}",
            r.status,
            r.scheme
                .as_deref()
                .map_or(String::new(), |s| format!("{s}://")),
            r.hostname.as_deref().unwrap_or("(same host)"),
            r.port.map_or(String::new(), |p| format!(":{p}")),
            match (&r.path, &r.prefix) {
                (Some(path), _) => path.clone(),
                (None, Some(prefix)) => format!("{prefix} (in place of the matched prefix)"),
                (None, None) => String::new(),
            }
        )],
    }
}

/// Every status, sorted by object.
pub fn status_table(dag: &Dag) -> Vec<TableStatus> {
    dag.statuses
        .iter()
        .map(|(r, s)| TableStatus {
            object: format!("{} {} {}", r.kind.api_version(), r.kind.kind(), r.key),
            status: s.state,
            description: s.description.to_string(),
            messages: s
                .messages
                .iter()
                .map(|m| format!("[{}] {m}", m.reason))
                .collect(),
            warnings: s
                .warnings
                .iter()
                .map(|m| format!("[{}] {m}", m.reason))
                .collect(),
        })
        .collect()
}
