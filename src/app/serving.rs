//! What every role serves beside its own work: the xDS server's TLS from its PEM files, and
//! `/metrics`.

use std::net::SocketAddr;
use std::path::Path;

use prometheus_client::registry::Registry;

use crate::xds::XdsTls;

/// The xDS server's TLS from PEM files: server identity (reloaded when the files change), plus
/// client verification with a CA.
pub fn build_xds_tls(
    ca: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> anyhow::Result<Option<XdsTls>> {
    let (Some(cert), Some(key)) = (cert, key) else {
        return Ok(None);
    };
    Ok(Some(XdsTls::load(cert, key, ca)?))
}

/// `/metrics` in the Prometheus text format.
pub async fn serve_metrics(addr: SocketAddr, registry: Registry) {
    let registry = std::sync::Arc::new(registry);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move {
                let mut out = String::new();
                match prometheus_client::encoding::text::encode(&mut out, &registry) {
                    Ok(()) => (axum::http::StatusCode::OK, out),
                    Err(e) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                }
            }
        }),
    );
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => {
            tracing::info!(address = %addr, "serving metrics");
            if let Err(e) = axum::serve(l, app).await {
                tracing::warn!(error = %e, "metrics server stopped");
            }
        }
        Err(e) => tracing::warn!(address = %addr, error = %e, "cannot bind the metrics address"),
    }
}
