//! `sluice serve --role webhook`: the admission webhook alone, in a process that cannot read
//! Secrets. It watches only the kinds the webhook's index reads ([`k8s::kinds::WEBHOOK_WATCHED`])
//! and swaps the index after every debounced change; it serves the webhook, its health port and
//! (with `--metrics-address`) /metrics. No xDS server, no routing model for Envoy, no leader
//! election, no status writes, no Events (docs/webhook.md, "Two layouts").

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use prometheus_client::registry::Registry;

use super::args::ServeArgs;
use crate::k8s::{self, Cluster, Publisher};
use crate::webhook::index::IndexHandle;

/// A [`Publisher`] that only brings the webhook's index to each snapshot. The rebuild loop wants
/// a model back: it gets an empty one, the same each time.
pub fn index_publisher(index: IndexHandle) -> Publisher {
    let empty = Arc::new(crate::dag::Dag::default());
    Arc::new(move |snapshot: &crate::store::Snapshot| {
        index.replace(snapshot);
        empty.clone()
    })
}

/// Runs the webhook role until `shutdown` resolves.
pub async fn serve(
    args: &ServeArgs,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let webhook_metrics = crate::webhook::Metrics::new();
    let webhook_config = super::args::webhook_config(args, webhook_metrics.clone())
        .context("--role webhook needs --webhook-address, --webhook-cert and --webhook-key")?;
    let config = super::cluster::config_from_args(args)?;
    let clients = super::cluster::connect_cluster().await?;
    let index = IndexHandle::new(args.dag_options());
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let webhook = crate::webhook::start(webhook_config, index.clone(), async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    })
    .await
    .context("admission webhook")?;
    tracing::info!(kinds = ?k8s::kinds::WEBHOOK_WATCHED, "starting the webhook role");
    let cluster = Cluster::start_watching(
        clients,
        config,
        &k8s::kinds::WEBHOOK_WATCHED,
        index_publisher(index),
    )
    .await?;
    let metrics_task = args.metrics_address.map(|addr| {
        let mut registry = Registry::default();
        cluster.metrics().register(&mut registry);
        webhook_metrics.register(&mut registry);
        tokio::spawn(super::serving::serve_metrics(addr, registry))
    });
    shutdown.await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    match tokio::time::timeout(std::time::Duration::from_secs(10), webhook).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "webhook stopped with an error"),
        Ok(_) => {}
        Err(_) => tracing::warn!("webhook did not stop within 10s"),
    }
    cluster.shutdown().await;
    if let Some(t) = metrics_task {
        t.abort();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publisher_feeds_the_index_and_builds_no_model() {
        let index = IndexHandle::new(crate::dag::Options::default());
        let publish = index_publisher(index.clone());
        assert!(!index.is_ready());
        let snapshot = crate::store::Snapshot::from_test_yaml(
            r#"
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: b, namespace: n}
spec: {virtualhost: {fqdn: b.example.com}, routes: [{backends: [{http: s, port: 80}]}]}
"#,
        );
        let dag = publish(&snapshot);
        assert!(index.is_ready());
        assert!(index.load().host_owner("b.example.com").is_some());
        assert_eq!(*dag, crate::dag::Dag::default());
    }

    /// The webhook's index of a snapshot holding only the kinds the webhook role watches is the
    /// index of the whole snapshot (but for the count of objects): it reads nothing else.
    #[test]
    fn the_webhook_index_needs_only_the_kinds_the_webhook_role_watches() {
        use crate::k8s::kinds::WEBHOOK_WATCHED;
        use crate::webhook::index::Index;
        let all = r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: a, namespace: n, creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {virtualhost: {fqdn: a.example.com, tls: {secretName: cert}}, routes: [{match: /, services: [{name: s, port: 80}]}]}
---
apiVersion: projectcontour.io/v1
kind: IngressRoute
metadata: {name: b, namespace: n}
spec: {virtualhost: {fqdn: b.example.com}, routes: [{backends: [{http: s, port: 80}]}]}
---
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {name: c, namespace: n}
spec: {host: c.example.com, routes: [{pathPrefix: /, upstreams: [{serviceName: s, servicePort: 80}]}]}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gc}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: n}
spec: {gatewayClassName: gc, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: v1
kind: Service
metadata: {name: s, namespace: n}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Secret
metadata: {name: cert, namespace: n}
type: kubernetes.io/tls
data: {tls.crt: "", tls.key: ""}
---
apiVersion: v1
kind: Namespace
metadata: {name: n}
"#;
        let watched: Vec<&str> = all
            .split("\n---\n")
            .filter(|doc| {
                WEBHOOK_WATCHED.iter().any(|k| {
                    doc.contains(&format!("apiVersion: {}\n", k.api_version()))
                        && doc.contains(&format!("kind: {}\n", k.kind()))
                })
            })
            .collect();
        assert_eq!(watched.len(), 6);
        let options = sluice_core::dag::Options::default();
        let full = Index::build(&sluice_core::store::Snapshot::from_test_yaml(all), &options);
        let narrow = Index::build(
            &sluice_core::store::Snapshot::from_test_yaml(&watched.join("\n---\n")),
            &options,
        );
        assert_eq!(full.owned_hosts(), narrow.owned_hosts());
        assert_eq!(full.owned_hosts().len(), 3);
        assert_eq!(
            full.default_ingress_classes(),
            narrow.default_ingress_classes()
        );
        assert!(narrow.has_ingress_class("sluice"));
        let gw = sluice_core::api::ObjKey::new("n", "gw");
        assert_eq!(narrow.gateway_class_of(&gw), Some("gc"));
        assert_eq!(full.gateway_class_of(&gw), narrow.gateway_class_of(&gw));
        assert_eq!(
            narrow.gateway_class_controller("gc"),
            Some("sluice.dev/gateway-controller")
        );
        assert_eq!(
            full.gateway_class_controller("gc"),
            narrow.gateway_class_controller("gc")
        );
        assert!(full.len() > narrow.len());
    }
}
