//! Counters of cluster mode. They are plain prometheus-client metrics: the app registers them with
//! its registry (`/metrics`), and every status write is also logged with the running total
//! (`status written … writes_total=N`), which the e2e tests count.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub kind: String,
    pub outcome: String,
}

/// Cluster-mode metrics; cheap to clone (shared counters).
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// Status writes sent to the apiserver, by kind and outcome (ok, error).
    pub status_writes: Family<OutcomeLabel, Counter>,
    /// Watch events applied to the store, by kind.
    pub watch_events: Family<KindLabel, Counter>,
    /// Watched objects that do not decode (logged and skipped), by kind.
    pub rejected_objects: Family<KindLabel, Counter>,
    /// DAG rebuilds.
    pub rebuilds: Counter,
    /// 1 while this replica holds the leader Lease.
    pub leader: Gauge,
    writes_ok: Arc<AtomicU64>,
}

impl Metrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "sluice_status_writes",
            "Status writes sent to the apiserver, by kind and outcome",
            self.status_writes.clone(),
        );
        registry.register(
            "sluice_watch_events",
            "Watch events applied to the store, by kind",
            self.watch_events.clone(),
        );
        registry.register(
            "sluice_rejected_objects",
            "Watched objects that do not decode into sluice's types, by kind",
            self.rejected_objects.clone(),
        );
        registry.register("sluice_dag_rebuilds", "DAG rebuilds", self.rebuilds.clone());
        registry.register(
            "sluice_leader",
            "1 while this replica holds the leader Lease",
            self.leader.clone(),
        );
    }

    /// Counts one status write; returns the running total of successful writes.
    pub fn count_write(&self, kind: &str, ok: bool) -> u64 {
        self.status_writes
            .get_or_create(&OutcomeLabel {
                kind: kind.to_string(),
                outcome: if ok { "ok" } else { "error" }.to_string(),
            })
            .inc();
        if ok {
            self.writes_ok.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.writes_ok.load(Ordering::Relaxed)
        }
    }

    /// Successful status writes so far, all kinds.
    pub fn status_writes_ok(&self) -> u64 {
        self.writes_ok.load(Ordering::Relaxed)
    }
}
