//! The clusters and load assignments of one encode: they depend on nothing else the encoder
//! makes, so when many changed (a build from nothing, a full rebuild that changed most of them)
//! a second thread encodes the clusters while the encoder's thread does the rest; then both
//! encode the load assignments, a chunk at a time, until none is left; then the second thread
//! puts the clusters in their map while the encoder's thread puts the load assignments in
//! theirs ([`ClusterJob`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Body, ClusterBytes, LoadAssignmentBytes, Patch, Resource, ResourceType, TypeSnapshot};
use sluice_core::dag::{Cluster, Dag};
use sluice_core::pmap::DiffItem;

/// When at least this many clusters changed, they and their load assignments are encoded on a
/// second thread (a thread costs tens of microseconds; encoding 1,000 clusters and their load
/// assignments, about 1.5 ms).
pub(super) const PARALLEL_CLUSTERS: usize = 1_000;

/// A cluster of the model that changed.
enum ClusterChange {
    Removed(Arc<Cluster>),
    /// Added or changed.
    Put(Arc<Cluster>),
}

/// Load assignments in chunks of this many changed clusters are taken by whichever thread is free.
const LOAD_ASSIGNMENT_CHUNK: usize = 128;

/// The load assignments of the changed clusters, encoded by whichever threads call
/// [`LoadAssignments::encode_chunks`], a chunk of changes at a time.
struct LoadAssignments {
    changes: Vec<ClusterChange>,
    /// The previous load assignments.
    prev: Option<Arc<TypeSnapshot>>,
    /// The first change no thread has taken yet.
    next: AtomicUsize,
}

/// The chunks of changes one thread encoded: each chunk's first position and edits.
type Chunks = Vec<(usize, Vec<ResourceEdit>)>;

impl LoadAssignments {
    /// Encodes chunks of changes until none is left.
    fn encode_chunks(&self) -> Chunks {
        let held = |name: &str| self.prev.as_ref()?.resources.get(name);
        let mut bytes = LoadAssignmentBytes::default();
        let mut out = Vec::new();
        loop {
            let start = self
                .next
                .fetch_add(LOAD_ASSIGNMENT_CHUNK, Ordering::Relaxed);
            let end = self.changes.len().min(start + LOAD_ASSIGNMENT_CHUNK);
            let Some(chunk) = self.changes.get(start..end).filter(|c| !c.is_empty()) else {
                return out;
            };
            let edits = edits_of(ResourceType::Endpoint, chunk, held, |c| bytes.encode(c));
            out.push((start, edits));
        }
    }

    /// The previous load assignments with every chunk's edits applied, in the order of the
    /// changes (whichever thread encoded them).
    fn finish(&self, mut chunks: Chunks) -> Arc<TypeSnapshot> {
        chunks.sort_unstable_by_key(|(start, _)| *start);
        debug_assert!(
            chunks
                .iter()
                .map(|(start, _)| *start)
                .eq((0..chunks.len()).map(|i| i * LOAD_ASSIGNMENT_CHUNK)),
            "every chunk once"
        );
        let edits = chunks.into_iter().flat_map(|(_, edits)| edits);
        apply_edits(
            ResourceType::Endpoint,
            self.prev.as_ref(),
            &self.changes,
            edits,
        )
    }
}

/// What one changed cluster does to one per-cluster type (clusters, or load assignments).
enum ResourceEdit {
    /// Nothing: the resource's bytes are those held.
    Same,
    Put(Arc<Resource>),
    Removed,
}

impl ClusterChange {
    fn cluster(&self) -> &Cluster {
        match self {
            ClusterChange::Removed(c) | ClusterChange::Put(c) => c,
        }
    }
}

/// How many changed clusters [`edits_of`] encodes before it hashes their resources together.
pub(super) const EDIT_BATCH: usize = 64;

/// The edits of `changes` (one each, in order) to a per-cluster type whose resources held so far
/// `held` finds: `encode` makes a changed cluster's resource; those whose bytes differ from the
/// held ones are hashed side by side, a batch at a time ([`Resource::new_many`]).
fn edits_of<'h>(
    t: ResourceType,
    changes: &[ClusterChange],
    held: impl Fn(&str) -> Option<&'h Arc<Resource>>,
    mut encode: impl FnMut(&Cluster) -> Vec<u8>,
) -> Vec<ResourceEdit> {
    let mut edits = Vec::with_capacity(changes.len());
    let mut changed = Vec::with_capacity(EDIT_BATCH.min(changes.len()));
    let mut at = Vec::with_capacity(EDIT_BATCH.min(changes.len()));
    for batch in changes.chunks(EDIT_BATCH) {
        for change in batch {
            let c = match change {
                ClusterChange::Removed(_) => {
                    edits.push(ResourceEdit::Removed);
                    continue;
                }
                ClusterChange::Put(c) => c,
            };
            let value = encode(c);
            if held(&c.name).is_some_and(|r| r.body.value == value) {
                edits.push(ResourceEdit::Same);
                continue;
            }
            // The resource shares its name with the model's cluster; its edit is put in place
            // once the batch is hashed.
            at.push(edits.len());
            edits.push(ResourceEdit::Same);
            changed.push((c.name.clone(), Body::new(t, value)));
        }
        let resources = Resource::new_many(std::mem::take(&mut changed));
        for (i, r) in at.drain(..).zip(resources) {
            edits[i] = ResourceEdit::Put(Arc::new(r));
        }
    }
    edits
}

/// The resources of one per-cluster type: the previous ones (`prev`) with the edits of
/// `changes` (one each, in the same order) applied.
fn apply_edits(
    t: ResourceType,
    prev: Option<&Arc<TypeSnapshot>>,
    changes: &[ClusterChange],
    edits: impl IntoIterator<Item = ResourceEdit>,
) -> Arc<TypeSnapshot> {
    let mut patch = Patch::new(t, prev);
    let mut applied = 0;
    for (change, edit) in changes.iter().zip(edits) {
        applied += 1;
        match edit {
            ResourceEdit::Same => {}
            ResourceEdit::Put(r) => patch.edit().insert(r),
            ResourceEdit::Removed => patch.remove(&change.cluster().name),
        }
    }
    debug_assert_eq!(applied, changes.len(), "an edit for every change");
    patch.finish()
}

/// The clusters and load assignments of one encode, started by [`ClusterJob::start`] before
/// the encoder's thread makes the other types and finished by [`ClusterJob::finish`].
pub(super) struct ClusterJob {
    load_assignments: Arc<LoadAssignments>,
    /// The load assignments the clusters' thread encoded, handed over before it puts the
    /// clusters in their map.
    theirs: std::sync::mpsc::Receiver<Chunks>,
    clusters: ClustersOn,
}

/// Where the clusters are encoded: on a thread of their own, or on the encoder's thread when
/// it finishes the job.
enum ClustersOn {
    Thread(std::thread::JoinHandle<Arc<TypeSnapshot>>),
    Here(Box<dyn FnOnce() -> Arc<TypeSnapshot> + Send>),
}

impl ClusterJob {
    /// Finds the clusters that changed from `prev_dag` to `dag` and, when there are at least
    /// [`PARALLEL_CLUSTERS`], starts encoding them on a second thread. `prev_clusters` and
    /// `prev_endpoints` are the previous snapshot's clusters and load assignments.
    pub(super) fn start(
        prev_dag: &Dag,
        dag: &Dag,
        prev_clusters: Option<Arc<TypeSnapshot>>,
        prev_endpoints: Option<Arc<TypeSnapshot>>,
    ) -> ClusterJob {
        let changes: Vec<ClusterChange> = prev_dag
            .clusters
            .diff(&dag.clusters)
            .map(|item| match item {
                DiffItem::Remove(_, c) => ClusterChange::Removed(c.clone()),
                DiffItem::Add(_, c) | DiffItem::Update { new: (_, c), .. } => {
                    ClusterChange::Put(c.clone())
                }
            })
            .collect();
        let parallel = changes.len() >= PARALLEL_CLUSTERS;
        let load_assignments = Arc::new(LoadAssignments {
            changes,
            prev: prev_endpoints,
            next: AtomicUsize::new(0),
        });
        let (their_chunks, theirs) = std::sync::mpsc::channel();
        let job = {
            let load_assignments = load_assignments.clone();
            move || {
                let changes = &load_assignments.changes;
                let held = |name: &str| prev_clusters.as_ref()?.resources.get(name);
                let mut bytes = ClusterBytes::default();
                let edits = edits_of(ResourceType::Cluster, changes, held, |c| bytes.encode(c));
                // Sent before the map inserts below: the receiver is alive until it has it.
                let _ = their_chunks.send(load_assignments.encode_chunks());
                apply_edits(
                    ResourceType::Cluster,
                    prev_clusters.as_ref(),
                    changes,
                    edits,
                )
            }
        };
        let clusters = if parallel {
            ClustersOn::Thread(std::thread::spawn(job))
        } else {
            ClustersOn::Here(Box::new(job))
        };
        ClusterJob {
            load_assignments,
            theirs,
            clusters,
        }
    }

    /// Encodes load assignments until none is left, then waits for the clusters: the load
    /// assignments and the clusters, each type with its changes applied.
    pub(super) fn finish(self) -> (Arc<TypeSnapshot>, Arc<TypeSnapshot>) {
        let ClusterJob {
            load_assignments,
            theirs,
            clusters,
        } = self;
        let mut endpoint_chunks = load_assignments.encode_chunks();
        match clusters {
            ClustersOn::Thread(thread) => {
                // Nothing to receive means the thread failed: its join says how.
                if let Ok(theirs) = theirs.recv() {
                    endpoint_chunks.extend(theirs);
                }
                let endpoints = load_assignments.finish(endpoint_chunks);
                let clusters = thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (endpoints, clusters)
            }
            ClustersOn::Here(job) => {
                let clusters = job();
                endpoint_chunks.extend(theirs.try_iter().flatten());
                (load_assignments.finish(endpoint_chunks), clusters)
            }
        }
    }
}
