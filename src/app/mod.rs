//! Wiring: the [`Pipeline`] every source feeds (store snapshot → `dag::build` → `translate` → xDS
//! cache), and [`standalone`] mode (a manifest directory as the source). Cluster mode and the
//! webhook plug into the same pipeline: they call [`Pipeline::publish`] and read
//! [`Pipeline::dag`].

pub mod cluster;
pub mod standalone;

use std::sync::Arc;

use tokio::sync::watch;

use crate::dag::{self, Dag, State};
use crate::store::Snapshot;
use crate::{translate, xds};

/// The pure core between sources and outputs, with the latest result of each stage on a watch.
pub struct Pipeline {
    dag_options: dag::Options,
    translate_options: translate::Options,
    dag_tx: watch::Sender<Arc<Dag>>,
    xds_tx: watch::Sender<Arc<xds::Snapshot>>,
}

impl Pipeline {
    /// A pipeline serving an empty configuration until the first [`Pipeline::publish`].
    pub fn new(dag_options: dag::Options, translate_options: translate::Options) -> Pipeline {
        let empty = Dag::default();
        let resources = translate::build(&empty, &translate_options);
        let (dag_tx, _) = watch::channel(Arc::new(empty));
        let (xds_tx, _) = watch::channel(Arc::new(xds::Snapshot::from_resources(&resources)));
        Pipeline {
            dag_options,
            translate_options,
            dag_tx,
            xds_tx,
        }
    }

    /// Builds the routing model from a store snapshot and publishes it and its Envoy resources.
    /// Watchers are woken only when something changed. Returns the model.
    pub fn publish(&self, snapshot: &Snapshot) -> Arc<Dag> {
        let dag = dag::build(snapshot, &self.dag_options);
        let resources = translate::build(&dag, &self.translate_options);
        let xds_snapshot = xds::Snapshot::from_resources(&resources);
        let dag = Arc::new(dag);
        self.dag_tx.send_if_modified(|cur| {
            if **cur == *dag {
                return false;
            }
            *cur = dag.clone();
            true
        });
        self.xds_tx.send_if_modified(|cur| {
            if **cur == xds_snapshot {
                return false;
            }
            *cur = Arc::new(xds_snapshot);
            true
        });
        dag
    }

    /// The latest routing model (statuses included).
    pub fn dag(&self) -> watch::Receiver<Arc<Dag>> {
        self.dag_tx.subscribe()
    }

    /// The latest xDS resources.
    pub fn xds(&self) -> watch::Receiver<Arc<xds::Snapshot>> {
        self.xds_tx.subscribe()
    }
}

/// Logs every routing object that is not valid (standalone mode has no status writer).
pub fn log_statuses(dag: &Dag) {
    let mut valid = 0usize;
    for (obj, status) in &dag.statuses {
        match status.state {
            State::Valid => valid += 1,
            State::Ignored => {}
            State::Invalid => {
                tracing::warn!(object = %obj, description = %status.description, "invalid")
            }
            State::Orphaned => {
                tracing::warn!(object = %obj, description = %status.description, "orphaned")
            }
        }
    }
    tracing::info!(
        valid,
        objects = dag.statuses.len(),
        hosts = dag.vhosts.len(),
        clusters = dag.clusters.len(),
        "routing model built"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_wakes_watchers_only_on_change() {
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        let mut xds_rx = p.xds();
        let dag_rx = p.dag();
        p.publish(&Snapshot::default());
        assert!(!xds_rx.has_changed().unwrap());
        assert!(!dag_rx.has_changed().unwrap());
        let other = Pipeline::new(
            dag::Options::default(),
            translate::Options {
                http_port: 1,
                ..Default::default()
            },
        );
        // Different listener port: different resources for the same (empty) model.
        let a = xds_rx.borrow_and_update().clone();
        let b = other.xds().borrow().clone();
        assert_ne!(a, b);
    }
}
