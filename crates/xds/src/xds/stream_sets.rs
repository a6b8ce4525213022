//! The set computations of a stream: subscribed names walked beside a type's resources, what a
//! response carries against what the client holds, and a set's version.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::Basis;
use crate::xds::cache::{Resource, ResourceMap, ResourceName, set_version};
use sluice_core::pmap::DiffItem;

/// One step of a walk over subscribed names and resources sorted by the same names ([`join`]): a
/// name with no resource, a resource whose name is not subscribed, or both (name, resource).
pub(super) enum Joined<'a, K, B> {
    NameOnly,
    ResourceOnly,
    Both(&'a K, &'a B),
}

/// Walks sorted names and a map sorted by name side by side: each name once.
pub(super) fn join<'a, N: AsRef<str> + 'a, K: AsRef<str> + 'a, B: 'a>(
    names: impl Iterator<Item = &'a N>,
    map: impl Iterator<Item = (&'a K, &'a B)>,
) -> impl Iterator<Item = Joined<'a, K, B>> {
    let (mut a, mut b) = (names.peekable(), map.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(an), Some((bn, _))) => Some(match (*an).as_ref().cmp((*bn).as_ref()) {
            std::cmp::Ordering::Less => a.next().map(|_| Joined::NameOnly)?,
            std::cmp::Ordering::Greater => b.next().map(|_| Joined::ResourceOnly)?,
            std::cmp::Ordering::Equal => {
                a.next()?;
                let (n, y) = b.next()?;
                Joined::Both(n, y)
            }
        }),
        (Some(_), None) => a.next().map(|_| Joined::NameOnly),
        (None, Some(_)) => b.next().map(|_| Joined::ResourceOnly),
        (None, None) => None,
    })
}

/// What a response carries against what the client holds: the resources of `desired` whose
/// content differs from `sent`'s (or that `sent` lacks), and the names of `sent` that `desired`
/// lacks, in name order. The maps' shared nodes are skipped: the cost is what changed.
pub(super) fn diff(
    desired: &ResourceMap,
    sent: &ResourceMap,
) -> (Vec<Arc<Resource>>, BTreeSet<String>) {
    let mut changed = Vec::new();
    let mut removed = BTreeSet::new();
    for d in sent.diff(desired) {
        match d {
            DiffItem::Add(_, r) => changed.push(Arc::clone(r)),
            DiffItem::Update {
                old: (_, old),
                new: (_, r),
            } if !old.same_content(r) => changed.push(Arc::clone(r)),
            DiffItem::Update { .. } => {}
            DiffItem::Remove(n, _) => {
                removed.insert(n.to_string());
            }
        }
    }
    (changed, removed)
}

/// The names held in both `before` and `after` with different contents.
pub(super) fn changed_versions(before: &ResourceMap, after: &ResourceMap) -> Vec<ResourceName> {
    before
        .diff(after)
        .filter_map(|d| match d {
            DiffItem::Update {
                old: (n, a),
                new: (_, b),
            } if !a.same_content(b) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

/// The version of a set of resources ([`set_version`]): when the set is exactly the snapshot's
/// resources of the type (same count, nothing kept, every name in scope), the snapshot's own
/// version, which is the same sum already kept.
pub(super) fn set_version_of(desired: &ResourceMap, basis: &Basis) -> String {
    match &basis.snapshot {
        Some(s) if !basis.kept && s.resources.len() == desired.len() => {
            debug_assert_eq!(s.version, set_version(desired.values()));
            s.version.clone()
        }
        _ => set_version(desired.values()),
    }
}
