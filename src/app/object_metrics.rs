//! The routing objects on `/metrics`, counted from the statuses of the last build: seed 000's
//! `contour_ingressroute_*` gauges (IngressRoutes of both API versions, by namespace and by
//! virtual host) and `sluice_routing_objects` (every routing kind, by group, kind, namespace and
//! status). The names, labels and rules are in docs/observability.md, "sluice's metrics".
//!
//! The pipeline hands each rebuilt model over ([`ObjectMetrics::rebuilt`]): a few reference
//! counts, no counting. The counts are made on the first scrape after a build, in one pass over
//! its statuses (plus a look at the IngressRoutes of the snapshot the build read, for their
//! `virtualhost` and delegations), and kept until the next build: a burst of changes costs
//! nothing here, and the numbers on `/metrics` are always those of one build. Each scrape writes
//! the series of that build only, so a namespace or virtual host without objects has none.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::MetricType;

use crate::api::{Delegate, Kind, ObjKey, contour_v1, heptio_v1beta1};
use crate::dag::{Dag, State};
use crate::store::{Objects, Prepared, Snapshot};

/// The gauges of the routing objects; a [`Collector`] (register it with
/// [`prometheus_client::registry::Registry::register_collector`]). Cheap to clone (shared).
#[derive(Clone, Default)]
pub struct ObjectMetrics {
    latest: Arc<Mutex<Latest>>,
}

/// The last build handed over, and its counts once a scrape made them.
#[derive(Default)]
struct Latest {
    build: Option<Build>,
    /// When it was handed over (seconds since the Unix epoch).
    rebuilt_at: Option<f64>,
    counts: Option<Arc<Counts>>,
}

/// What the counts are made from: a model and the IngressRoutes of its snapshot.
#[derive(Clone)]
struct Build {
    dag: Arc<Dag>,
    v1beta1: Objects<Prepared<heptio_v1beta1::IngressRoute>>,
    v1: Objects<Prepared<contour_v1::IngressRoute>>,
}

/// A build [`ObjectMetrics::rebuilt`] replaced, for the caller to drop where it drops the
/// rest of the old model (freeing a model takes a while).
pub struct Replaced(#[allow(dead_code)] Option<Build>);

impl ObjectMetrics {
    /// Takes the model of a rebuild (full or partial) and the snapshot it was built from; the
    /// rebuild timestamp is now. Returns what it replaced.
    pub fn rebuilt(&self, dag: &Arc<Dag>, snapshot: &Snapshot) -> Replaced {
        let build = Build {
            dag: dag.clone(),
            v1beta1: snapshot.ingressroutes_v1beta1.clone(),
            v1: snapshot.ingressroutes_v1.clone(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut latest = self.lock();
        latest.rebuilt_at = Some(now);
        latest.counts = None;
        Replaced(latest.build.replace(build))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latest> {
        self.latest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counts of the last build (made now if no scrape made them yet) and its timestamp.
    fn counts(&self) -> (Option<Arc<Counts>>, Option<f64>) {
        let (build, rebuilt_at) = {
            let latest = self.lock();
            if let Some(counts) = &latest.counts {
                return (Some(counts.clone()), latest.rebuilt_at);
            }
            (latest.build.clone(), latest.rebuilt_at)
        };
        let Some(build) = build else {
            return (None, rebuilt_at);
        };
        // Counted without the lock: a publication does not wait for a scrape.
        let counts = Arc::new(Counts::of(&build.dag, &build.v1beta1, &build.v1));
        {
            let mut latest = self.lock();
            if latest
                .build
                .as_ref()
                .is_some_and(|b| Arc::ptr_eq(&b.dag, &build.dag))
            {
                latest.counts = Some(counts.clone());
            }
        }
        // A newer build may have replaced this one meanwhile: the model is then freed on the
        // pipeline's drop thread, not on the scraping one.
        super::drop_later(build);
        (Some(counts), rebuilt_at)
    }
}

impl fmt::Debug for ObjectMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectMetrics").finish_non_exhaustive()
    }
}

/// The four states, in the order `Counts::objects` holds them.
const STATES: [State; 4] = [
    State::Valid,
    State::Invalid,
    State::Orphaned,
    State::Ignored,
];

fn state_index(s: State) -> usize {
    match s {
        State::Valid => 0,
        State::Invalid => 1,
        State::Orphaned => 2,
        State::Ignored => 3,
    }
}

/// The IngressRoutes of one namespace (both API versions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceCounts {
    /// valid + invalid + orphaned.
    pub total: u64,
    pub orphaned: u64,
    /// Those with `spec.virtualhost`, whatever their status.
    pub roots: u64,
}

/// What one build's statuses count.
#[derive(Debug, Default, PartialEq)]
pub struct Counts {
    /// Routing objects by kind and namespace, by state ([`STATES`]), in the statuses' order.
    objects: Vec<(Kind, Arc<str>, [u64; 4])>,
    /// IngressRoutes by namespace, sorted.
    ingressroutes: Vec<(Arc<str>, NamespaceCounts)>,
    /// Valid and invalid IngressRoutes by namespace and virtual host (its range in
    /// `vhost_names`), in the order of the first object of each in the statuses.
    vhosts: Vec<(Arc<str>, std::ops::Range<usize>, [u64; 2])>,
    /// The virtual hosts' names one after the other (one allocation for them all).
    vhost_names: String,
}

/// An IngressRoute of either version as the counts read it.
#[derive(Clone, Copy)]
enum IngressRoute<'a> {
    V1beta1(&'a heptio_v1beta1::IngressRoute),
    V1(&'a contour_v1::IngressRoute),
}

impl<'a> IngressRoute<'a> {
    fn fqdn(self) -> Option<&'a str> {
        match self {
            IngressRoute::V1beta1(o) => o.spec.virtualhost.as_ref(),
            IngressRoute::V1(o) => o.spec.virtualhost.as_ref(),
        }
        .map(|v| v.fqdn.as_str())
    }

    fn each_delegate(self, mut f: impl FnMut(&'a Delegate)) {
        match self {
            IngressRoute::V1beta1(o) => o.spec.routes.iter().for_each(|r| {
                r.delegate.as_ref().map(&mut f);
            }),
            IngressRoute::V1(o) => o.spec.routes.iter().for_each(|r| {
                r.delegate.as_ref().map(&mut f);
            }),
        }
    }
}

/// One IngressRoute's status with its object.
struct Entry<'a> {
    kind: Kind,
    key: &'a ObjKey,
    state: State,
    description: &'a str,
    /// None only if the snapshot does not hold it (a build's statuses are of its snapshot's
    /// objects: not expected).
    object: Option<IngressRoute<'a>>,
}

impl Entry<'_> {
    fn fqdn(&self) -> Option<&str> {
        self.object.and_then(IngressRoute::fqdn)
    }
}

/// The description the build gives a vertex a root reaches ("delegated from IngressRoute
/// ns/root", the first root in namespace/name order, `dag::delegation`).
const DELEGATED_FROM: &str = "delegated from IngressRoute ";

/// A host name as the model keys hosts: lower case.
fn lowercase(host: &str) -> Cow<'_, str> {
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// The objects of `objects` in key order, looked up in that order: each call to `get` moves
/// forward (the statuses of one kind come in key order too), so finding every object costs one
/// walk of the map.
struct Cursor<I: Iterator> {
    iter: std::iter::Peekable<I>,
}

impl<'a, T, I> Cursor<I>
where
    T: crate::store::Prepare + 'a,
    I: Iterator<Item = (&'a ObjKey, &'a Arc<Prepared<T>>)>,
{
    fn new(objects: I) -> Self {
        Cursor {
            iter: objects.peekable(),
        }
    }

    fn get(&mut self, key: &ObjKey) -> Option<&'a T> {
        while let Some((k, o)) = self.iter.peek() {
            // The statuses' keys are the snapshot's, shared: most compare by pointer.
            if Arc::ptr_eq(&k.name, &key.name) && Arc::ptr_eq(&k.namespace, &key.namespace) {
                return Some(o.object().as_ref());
            }
            match (*k).cmp(key) {
                std::cmp::Ordering::Less => {
                    self.iter.next();
                }
                std::cmp::Ordering::Equal => return Some(o.object().as_ref()),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

impl Counts {
    /// The counts of `dag`'s statuses; `v1beta1` and `v1` are the IngressRoutes of the snapshot
    /// it was built from.
    pub fn of(
        dag: &Dag,
        v1beta1: &Objects<Prepared<heptio_v1beta1::IngressRoute>>,
        v1: &Objects<Prepared<contour_v1::IngressRoute>>,
    ) -> Counts {
        let mut objects: Vec<(Kind, Arc<str>, [u64; 4])> = Vec::new();
        let mut entries: Vec<Entry<'_>> = Vec::new();
        let (mut beta, mut one) = (Cursor::new(v1beta1.iter()), Cursor::new(v1.iter()));
        // Statuses come by kind, then namespace, then name: a kind and namespace's objects are
        // consecutive.
        for (obj, status) in &dag.statuses {
            let ns = &obj.key.namespace;
            match objects.last_mut() {
                Some((kind, last, counts))
                    if *kind == obj.kind && (Arc::ptr_eq(last, ns) || **last == **ns) =>
                {
                    counts[state_index(status.state)] += 1
                }
                _ => {
                    let mut counts = [0; 4];
                    counts[state_index(status.state)] = 1;
                    objects.push((obj.kind, ns.clone(), counts));
                }
            }
            let object = match obj.kind {
                Kind::IngressRouteV1beta1 => beta.get(&obj.key).map(IngressRoute::V1beta1),
                Kind::IngressRouteV1 => one.get(&obj.key).map(IngressRoute::V1),
                _ => continue,
            };
            entries.push(Entry {
                kind: obj.kind,
                key: &obj.key,
                state: status.state,
                description: &status.description,
                object,
            });
        }
        let vhosts = entry_vhosts(&entries);
        let (ingressroutes, vhosts, vhost_names) = ingressroute_counts(&entries, &vhosts);
        Counts {
            objects,
            ingressroutes,
            vhosts,
            vhost_names,
        }
    }
}

/// The index in `entries` (sorted as the statuses are) of an IngressRoute.
fn find(entries: &[Entry<'_>], kind: Kind, namespace: &str, name: &str) -> Option<usize> {
    entries
        .binary_search_by(|e| {
            (e.kind, &*e.key.namespace, &*e.key.name).cmp(&(kind, namespace, name))
        })
        .ok()
}

/// The virtual host of each entry, where it has one:
/// - a root (`spec.virtualhost`), whatever its status: its fqdn;
/// - a valid vertex: the fqdn of the root its status names (the first root, in namespace/name
///   order, whose delegations reach it);
/// - an invalid vertex: the virtual host of the first valid IngressRoute (in namespace/name
///   order) that delegates to it; none when no valid one does;
/// - an orphan: none.
///
/// In lower case, as the model keys hosts.
fn entry_vhosts<'a>(entries: &[Entry<'a>]) -> Vec<Option<Cow<'a, str>>> {
    // The roots' hosts by kind and key, for their vertices.
    let roots: hashbrown::HashMap<(Kind, &str, &str), Cow<'a, str>> = entries
        .iter()
        .filter_map(|e| {
            let fqdn = e.object.and_then(IngressRoute::fqdn)?;
            Some(((e.kind, &*e.key.namespace, &*e.key.name), lowercase(fqdn)))
        })
        .collect();
    let mut vhosts: Vec<Option<Cow<'a, str>>> = Vec::with_capacity(entries.len());
    let mut invalid_vertices = false;
    for e in entries {
        let root = |ns, name| roots.get(&(e.kind, ns, name)).cloned();
        let vhost = match (e.object.and_then(IngressRoute::fqdn), e.state) {
            (Some(fqdn), _) => Some(lowercase(fqdn)),
            (None, State::Valid) => e.description.strip_prefix(DELEGATED_FROM).and_then(|r| {
                let (ns, name) = r.split_once('/').unwrap_or(("", r));
                root(ns, name)
            }),
            (None, State::Invalid) => {
                invalid_vertices = true;
                None
            }
            (None, State::Orphaned | State::Ignored) => None,
        };
        vhosts.push(vhost);
    }
    if !invalid_vertices {
        return vhosts;
    }
    for (i, e) in entries.iter().enumerate() {
        if e.state != State::Valid || vhosts[i].is_none() {
            continue;
        }
        let Some(object) = e.object else { continue };
        object.each_delegate(|d| {
            let ns = d
                .namespace
                .as_deref()
                .filter(|ns| !ns.is_empty())
                .unwrap_or(&e.key.namespace);
            let Some(t) = find(entries, e.kind, ns, &d.name) else {
                return;
            };
            let target = &entries[t];
            if target.state == State::Invalid && target.fqdn().is_none() && vhosts[t].is_none() {
                vhosts[t] = vhosts[i].clone();
            }
        });
    }
    vhosts
}

type IngressRouteCounts = (
    Vec<(Arc<str>, NamespaceCounts)>,
    Vec<(Arc<str>, std::ops::Range<usize>, [u64; 2])>,
    String,
);

/// The IngressRoutes by namespace, and the valid and invalid ones by namespace and virtual host
/// (`""` for an invalid one whose virtual host is not known). Ignored ones (none so far: every
/// IngressRoute is sluice's) are not counted.
fn ingressroute_counts(
    entries: &[Entry<'_>],
    vhosts: &[Option<Cow<'_, str>>],
) -> IngressRouteCounts {
    let mut namespaces: std::collections::BTreeMap<&Arc<str>, NamespaceCounts> =
        std::collections::BTreeMap::new();
    // By namespace and virtual host, in the order of their first object (the statuses' order:
    // the same for the same build, with no sort).
    let mut by_vhost: Vec<(&Arc<str>, &str, [u64; 2])> = Vec::new();
    let mut index: hashbrown::HashMap<(&str, &str), usize> =
        hashbrown::HashMap::with_capacity(entries.len());
    // Runs of one kind and namespace, added to `namespaces` as a whole.
    let mut run: Option<(&Arc<str>, NamespaceCounts)> = None;
    for (e, vhost) in entries.iter().zip(vhosts) {
        let column = match e.state {
            State::Valid => Some(0),
            State::Invalid => Some(1),
            State::Orphaned => None,
            State::Ignored => continue,
        };
        let ns = &e.key.namespace;
        let counts = match &mut run {
            Some((run_ns, counts)) if **run_ns == *ns => counts,
            _ => {
                if let Some((run_ns, c)) = run.take() {
                    add(namespaces.entry(run_ns).or_default(), c);
                }
                &mut run.insert((ns, NamespaceCounts::default())).1
            }
        };
        counts.total += 1;
        counts.orphaned += u64::from(e.state == State::Orphaned);
        counts.roots += u64::from(e.fqdn().is_some());
        if let Some(column) = column {
            let vhost = vhost.as_deref().unwrap_or("");
            let i = *index.entry((&**ns, vhost)).or_insert_with(|| {
                by_vhost.push((ns, vhost, [0; 2]));
                by_vhost.len() - 1
            });
            by_vhost[i].2[column] += 1;
        }
    }
    if let Some((run_ns, c)) = run {
        add(namespaces.entry(run_ns).or_default(), c);
    }
    let namespaces = namespaces
        .into_iter()
        .map(|(ns, c)| (ns.clone(), c))
        .collect();
    let mut names = String::with_capacity(by_vhost.iter().map(|(_, v, _)| v.len()).sum());
    let vhosts = by_vhost
        .into_iter()
        .map(|(ns, vhost, c)| {
            let start = names.len();
            names.push_str(vhost);
            (ns.clone(), start..names.len(), c)
        })
        .collect();
    (namespaces, vhosts, names)
}

fn add(into: &mut NamespaceCounts, c: NamespaceCounts) {
    into.total += c.total;
    into.orphaned += c.orphaned;
    into.roots += c.roots;
}

/// A label value written as the text format asks: `\`, `"` and line feeds escaped (a host name
/// of an invalid object is whatever its author wrote).
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        let mut rest = self.0;
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

/// A gauge by namespace: its name, its help and what it counts.
type NamespaceGauge = (&'static str, &'static str, fn(&NamespaceCounts) -> u64);

impl Collector for ObjectMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let (counts, rebuilt_at) = self.counts();
        let counts = counts.unwrap_or_default();
        let per_namespace: [NamespaceGauge; 3] = [
            (
                "contour_ingressroute_total",
                "IngressRoutes (both API versions) by namespace, whatever their status: orphaned + valid + invalid.",
                |c| c.total,
            ),
            (
                "contour_ingressroute_orphaned_total",
                "Orphaned IngressRoutes (no root delegates to them) by namespace.",
                |c| c.orphaned,
            ),
            (
                "contour_ingressroute_root_total",
                "Root IngressRoutes (with spec.virtualhost) by namespace, whatever their status.",
                |c| c.roots,
            ),
        ];
        for (name, help, value) in per_namespace {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (ns, c) in &counts.ingressroutes {
                let labels = [("namespace", Escaped(ns))];
                m.encode_family(&labels)?.encode_gauge(&value(c))?;
            }
        }
        let per_vhost = [
            (
                "contour_ingressroute_valid_total",
                "Valid IngressRoutes by namespace and virtual host (the fqdn of the root that reaches them).",
                0,
            ),
            (
                "contour_ingressroute_invalid_total",
                "Invalid IngressRoutes by namespace and virtual host (\"\" when not known).",
                1,
            ),
        ];
        for (name, help, column) in per_vhost {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            // Only where there are some: a virtual host's valid and invalid objects are seldom
            // both there, and a series of zeros per host would double the series for nothing.
            for (ns, vhost, c) in counts.vhosts.iter().filter(|(_, _, c)| c[column] > 0) {
                let vhost = &counts.vhost_names[vhost.clone()];
                let labels = [("namespace", Escaped(ns)), ("vhost", Escaped(vhost))];
                m.encode_family(&labels)?.encode_gauge(&c[column])?;
            }
        }
        // None before the first build.
        if let Some(t) = rebuilt_at {
            encoder
                .encode_descriptor(
                    "contour_ingressroute_dagrebuild_timestamp",
                    "Time of the last DAG rebuild, in seconds since the Unix epoch.",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&t)?;
        }
        let mut m = encoder.encode_descriptor(
            "sluice_routing_objects",
            "Routing objects by API group, kind, namespace and status (valid, invalid, orphaned, ignored) in the last build.",
            None,
            MetricType::Gauge,
        )?;
        for (kind, ns, c) in &counts.objects {
            for (state, n) in STATES.iter().zip(c) {
                let labels = [
                    ("group", Escaped(kind.group())),
                    ("kind", Escaped(kind.kind())),
                    ("namespace", Escaped(ns)),
                    ("status", Escaped(state.as_str())),
                ];
                m.encode_family(&labels)?.encode_gauge(n)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "object_metrics_tests.rs"]
mod tests;
