//! A persistent ordered map that is built from sorted entries in one pass.
//!
//! The routing model ([`crate::dag::Dag`]) keeps its hosts, clusters, secrets and statuses in
//! ordered maps that must clone in constant time and share what two versions have in common: a
//! partial build edits a clone of the previous model, and the xDS translation and the status
//! writer walk only what differs between two models ([`OrdMap::diff`] skips the subtrees they
//! share). The xDS snapshot keeps its resources the same way
//! ([`crate::xds::cache::ResourceMap`]). A full build, though, makes these maps from nothing,
//! from entries already in key order;
//! inserting 30,000 sorted keys one by one into a persistent B-tree (comparing each key on the
//! way down, splitting nodes half empty) was a fifth of a 10k build's instructions. Here a map is
//! built from sorted entries by cutting them into full leaves and stacking branches over them.
//!
//! The tree is a B+tree: entries only in leaves, each branch holding for every child but the
//! first the smallest key it may hold. Nodes are reference counted; an edit copies the path from
//! the root to the entry it changes (`Arc::make_mut`), so the maps it was cloned from keep
//! theirs. All leaves are at the same depth.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// Entries of a leaf, children of a branch, at most.
const MAX: usize = 16;
/// Below this a node left by a removal is merged with a neighbour (when both fit in one).
const MIN: usize = MAX / 4;

/// A persistent ordered map (see the module's documentation).
pub struct OrdMap<K, V> {
    root: Option<Arc<Node<K, V>>>,
    len: usize,
}

#[derive(Clone)]
enum Node<K, V> {
    Leaf(Vec<(K, V)>),
    Branch(Branch<K, V>),
}

#[derive(Clone)]
struct Branch<K, V> {
    /// `keys[i]` is at most the smallest key of `children[i + 1]` and greater than every key of
    /// `children[..=i]`: one fewer than the children.
    keys: Vec<K>,
    children: Vec<Arc<Node<K, V>>>,
}

/// One difference between two maps ([`OrdMap::diff`]), in key order.
#[derive(Debug, PartialEq, Eq)]
pub enum DiffItem<'a, 'b, K, V> {
    /// The key is only in the new map.
    Add(&'b K, &'b V),
    /// The key is in both with different values.
    Update {
        old: (&'a K, &'a V),
        new: (&'b K, &'b V),
    },
    /// The key is only in the old map.
    Remove(&'a K, &'a V),
}

impl<K, V> Node<K, V> {
    fn size(&self) -> usize {
        match self {
            Node::Leaf(entries) => entries.len(),
            Node::Branch(b) => b.children.len(),
        }
    }
}

impl<K, V> Branch<K, V> {
    /// The child whose keys' range holds `key`.
    fn child_for<Q>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.keys.partition_point(|k| k.borrow() <= key)
    }
}

fn search<K, V, Q>(entries: &[(K, V)], key: &Q) -> Result<usize, usize>
where
    K: Borrow<Q>,
    Q: Ord + ?Sized,
{
    entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
}

impl<K, V> OrdMap<K, V> {
    pub fn new() -> Self {
        OrdMap { root: None, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether both maps are the same tree (a clone not edited since): equal without comparing.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.root, &other.root) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.get_key_value(key).map(|(_, v)| v)
    }

    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let mut node = self.root.as_deref()?;
        loop {
            match node {
                Node::Leaf(entries) => {
                    let (k, v) = &entries[search(entries, key).ok()?];
                    return Some((k, v));
                }
                Node::Branch(b) => node = &b.children[b.child_for(key)],
            }
        }
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.get_key_value(key).is_some()
    }

    /// The entries in key order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter {
            cursor: Cursor::new(self.root.as_ref()),
            remaining: self.len,
        }
    }

    /// The entries from the first key not below `start` on, in key order.
    pub fn range_from<Q>(&self, start: &Q) -> Range<'_, K, V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let mut cursor = Cursor::new(None);
        let mut node = self.root.as_deref();
        while let Some(n) = node {
            node = match n {
                Node::Leaf(entries) => {
                    cursor.leaf = entries;
                    cursor.at = entries.partition_point(|(k, _)| k.borrow() < start);
                    if cursor.at == entries.len() {
                        cursor.next_subtree(cursor.path.len());
                    }
                    None
                }
                Node::Branch(b) => {
                    let i = b.child_for(start);
                    cursor.path.push((b, i));
                    Some(&b.children[i])
                }
            };
        }
        Range { cursor }
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }

    /// What changed from `self` to `new`, in key order: keys added, removed, and kept with a
    /// different value. Subtrees both maps share (by pointer) are skipped without being read, so
    /// the diff of a map and an edited clone of it costs in proportion to the edits.
    pub fn diff<'a, 'b>(&'a self, new: &'b Self) -> DiffIter<'a, 'b, K, V> {
        let same = self.ptr_eq(new);
        DiffIter {
            old: Cursor::new(if same { None } else { self.root.as_ref() }),
            new: Cursor::new(if same { None } else { new.root.as_ref() }),
        }
    }
}

impl<K: Ord + Clone, V: Clone> OrdMap<K, V> {
    /// The map of `entries`, which must be in strictly increasing key order (checked: entries out
    /// of order are sorted, and of equal keys the last is kept, as inserting them would).
    pub fn from_sorted(mut entries: Vec<(K, V)>) -> Self {
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: of equal keys, the last one given is the last of its run.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.reverse();
            entries.dedup_by(|a, b| a.0 == b.0);
            entries.reverse();
        }
        let len = entries.len();
        OrdMap {
            root: build(entries),
            len,
        }
    }

    /// The map of `entries`, which must be in strictly increasing key order, as a build's
    /// sorted parts are by construction. [`OrdMap::from_sorted`] checks the order by comparing
    /// every key with the next, which for keys whose text lies all over the heap is a cache miss
    /// per entry; this checks it in debug builds (every test) only.
    pub fn from_distinct_sorted(entries: Vec<(K, V)>) -> Self {
        debug_assert!(
            entries.windows(2).all(|w| w[0].0 < w[1].0),
            "entries in strictly increasing key order"
        );
        let len = entries.len();
        OrdMap {
            root: build(entries),
            len,
        }
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        // A missing key copies no path.
        if !self.contains_key(key) {
            return None;
        }
        let mut node = Arc::make_mut(self.root.as_mut()?);
        loop {
            node = match node {
                Node::Leaf(entries) => {
                    let i = search(entries, key).ok()?;
                    return Some(&mut entries[i].1);
                }
                Node::Branch(b) => {
                    let i = b.child_for(key);
                    Arc::make_mut(&mut b.children[i])
                }
            };
        }
    }

    /// Inserts `value` at `key`, returning the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let Some(root) = self.root.as_mut() else {
            self.root = Some(Arc::new(Node::Leaf(vec![(key, value)])));
            self.len = 1;
            return None;
        };
        let (old, split) = insert(Arc::make_mut(root), key, value);
        if let Some((separator, right)) = split
            && let Some(left) = self.root.take()
        {
            self.root = Some(Arc::new(Node::Branch(Branch {
                keys: vec![separator],
                children: vec![left, right],
            })));
        }
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.remove_with_key(key).map(|(_, v)| v)
    }

    pub fn remove_with_key<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        if !self.contains_key(key) {
            return None;
        }
        let removed = remove(Arc::make_mut(self.root.as_mut()?), key)?;
        self.len -= 1;
        // A root left with one child gives way to it; an empty one to nothing.
        loop {
            let next = match self.root.as_deref() {
                Some(Node::Leaf(entries)) if entries.is_empty() => None,
                Some(Node::Branch(b)) if b.children.len() <= 1 => b.children.first().cloned(),
                _ => break,
            };
            self.root = next;
        }
        Some(removed)
    }
}

/// The tree of `entries` (sorted, distinct keys): full leaves, then branches over them, each
/// level's nodes as evenly filled as their number allows.
fn build<K: Clone, V>(entries: Vec<(K, V)>) -> Option<Arc<Node<K, V>>> {
    if entries.is_empty() {
        return None;
    }
    // Each node with the smallest key under it.
    let mut level: Vec<(K, Arc<Node<K, V>>)> = Vec::with_capacity(entries.len().div_ceil(MAX));
    let mut rest = entries.into_iter();
    for size in even_sizes(rest.len()) {
        let leaf: Vec<(K, V)> = rest.by_ref().take(size).collect();
        let first = leaf[0].0.clone();
        level.push((first, Arc::new(Node::Leaf(leaf))));
    }
    while level.len() > 1 {
        let mut up = Vec::with_capacity(level.len().div_ceil(MAX));
        let mut rest = level.into_iter();
        for size in even_sizes(rest.len()) {
            let mut keys = Vec::with_capacity(size - 1);
            let mut children = Vec::with_capacity(size);
            let mut first = None;
            for (key, node) in rest.by_ref().take(size) {
                if first.is_none() {
                    first = Some(key);
                } else {
                    keys.push(key);
                }
                children.push(node);
            }
            if let Some(first) = first {
                up.push((first, Arc::new(Node::Branch(Branch { keys, children }))));
            }
        }
        level = up;
    }
    level.pop().map(|(_, root)| root)
}

/// `n` items cut into the fewest nodes of at most [`MAX`], as even as can be (sizes ≥ 1).
fn even_sizes(n: usize) -> impl Iterator<Item = usize> {
    let nodes = n.div_ceil(MAX);
    (0..nodes).map(move |i| n / nodes + usize::from(i < n % nodes))
}

type Split<K, V> = Option<(K, Arc<Node<K, V>>)>;

/// Inserts into the subtree `node`; returns the replaced value and, when `node` overflowed, the
/// right half split off it with the smallest key it may hold.
fn insert<K: Ord + Clone, V: Clone>(
    node: &mut Node<K, V>,
    key: K,
    value: V,
) -> (Option<V>, Split<K, V>) {
    match node {
        Node::Leaf(entries) => match search(entries, &key) {
            Ok(i) => (Some(std::mem::replace(&mut entries[i].1, value)), None),
            Err(i) => {
                entries.insert(i, (key, value));
                if entries.len() <= MAX {
                    return (None, None);
                }
                let right = entries.split_off(entries.len() / 2);
                let separator = right[0].0.clone();
                (None, Some((separator, Arc::new(Node::Leaf(right)))))
            }
        },
        Node::Branch(b) => {
            let i = b.child_for(&key);
            let (old, split) = insert(Arc::make_mut(&mut b.children[i]), key, value);
            if let Some((separator, right)) = split {
                b.keys.insert(i, separator);
                b.children.insert(i + 1, right);
            }
            if b.children.len() <= MAX {
                return (old, None);
            }
            let mid = b.children.len() / 2;
            let children = b.children.split_off(mid);
            let keys = b.keys.split_off(mid);
            let split = b
                .keys
                .pop()
                .map(|separator| (separator, Arc::new(Node::Branch(Branch { keys, children }))));
            (old, split)
        }
    }
}

/// Removes `key` from the subtree `node` (which holds it); a child left small is merged with a
/// neighbour, one left empty is dropped.
fn remove<K, V, Q>(node: &mut Node<K, V>, key: &Q) -> Option<(K, V)>
where
    K: Borrow<Q> + Clone,
    V: Clone,
    Q: Ord + ?Sized,
{
    match node {
        Node::Leaf(entries) => {
            let i = search(entries, key).ok()?;
            Some(entries.remove(i))
        }
        Node::Branch(b) => {
            let i = b.child_for(key);
            let removed = remove(Arc::make_mut(&mut b.children[i]), key)?;
            rebalance(b, i);
            Some(removed)
        }
    }
}

fn rebalance<K: Clone, V: Clone>(b: &mut Branch<K, V>, i: usize) {
    let size = b.children[i].size();
    if size >= MIN {
        return;
    }
    if size == 0 {
        b.children.remove(i);
        if !b.keys.is_empty() {
            b.keys.remove(i.saturating_sub(1));
        }
        return;
    }
    // Merge children j and j + 1 when they fit in one.
    let j = if i + 1 < b.children.len() {
        i
    } else if i > 0 {
        i - 1
    } else {
        return;
    };
    if b.children[j].size() + b.children[j + 1].size() > MAX {
        return;
    }
    let right = b.children.remove(j + 1);
    let separator = b.keys.remove(j);
    let right = Arc::unwrap_or_clone(right);
    match (Arc::make_mut(&mut b.children[j]), right) {
        (Node::Leaf(left), Node::Leaf(right)) => left.extend(right),
        (Node::Branch(left), Node::Branch(right)) => {
            left.keys.push(separator);
            left.keys.extend(right.keys);
            left.children.extend(right.children);
        }
        // Siblings are at the same depth, so of the same kind.
        _ => unreachable!("sibling nodes of different kinds"),
    }
}

/// A position in a map: the branches from the root down with the child taken in each, the leaf
/// and the entry in it.
struct Cursor<'a, K, V> {
    /// The root, when it is a branch, down to the leaf's parent.
    path: Vec<(&'a Branch<K, V>, usize)>,
    leaf: &'a [(K, V)],
    at: usize,
}

impl<'a, K, V> Cursor<'a, K, V> {
    /// At the first entry of `root`.
    fn new(root: Option<&'a Arc<Node<K, V>>>) -> Self {
        let mut cursor = Cursor {
            path: Vec::new(),
            leaf: &[],
            at: 0,
        };
        if let Some(root) = root {
            cursor.descend(root);
        }
        cursor
    }

    fn descend(&mut self, mut node: &'a Node<K, V>) {
        loop {
            match node {
                Node::Leaf(entries) => {
                    self.leaf = entries;
                    self.at = 0;
                    return;
                }
                Node::Branch(b) => {
                    self.path.push((b, 0));
                    node = &b.children[0];
                }
            }
        }
    }

    fn peek(&self) -> Option<(&'a K, &'a V)> {
        self.leaf.get(self.at).map(|(k, v)| (k, v))
    }

    fn advance(&mut self) {
        self.at += 1;
        if self.at >= self.leaf.len() {
            self.next_subtree(self.path.len());
        }
    }

    /// Past the subtree the position is in at `depth` (the child taken at `path[depth - 1]`; at
    /// `path.len()`, the leaf): to the first entry after it, or the end.
    fn next_subtree(&mut self, depth: usize) {
        self.path.truncate(depth);
        while let Some((b, i)) = self.path.last_mut() {
            *i += 1;
            if let Some(child) = b.children.get(*i) {
                self.descend(child);
                return;
            }
            self.path.pop();
        }
        self.leaf = &[];
        self.at = 0;
    }

    /// The subtree the position is in at `depth` (1 ..= `path.len()`), when the position is its
    /// first entry.
    fn subtree_at_start(&self, depth: usize) -> Option<&'a Arc<Node<K, V>>> {
        if self.at != 0 || self.path[depth..].iter().any(|(_, i)| *i != 0) {
            return None;
        }
        let (b, i) = self.path[depth - 1];
        Some(&b.children[i])
    }
}

/// The entries of an [`OrdMap`] in key order.
pub struct Iter<'a, K, V> {
    cursor: Cursor<'a, K, V>,
    remaining: usize,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.cursor.peek()?;
        self.cursor.advance();
        self.remaining -= 1;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

/// The entries of an [`OrdMap`] from a key on: [`OrdMap::range_from`].
pub struct Range<'a, K, V> {
    cursor: Cursor<'a, K, V>,
}

impl<'a, K, V> Iterator for Range<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.cursor.peek()?;
        self.cursor.advance();
        Some(entry)
    }
}

/// The differences between two maps: [`OrdMap::diff`].
pub struct DiffIter<'a, 'b, K, V> {
    old: Cursor<'a, K, V>,
    new: Cursor<'b, K, V>,
}

impl<'a, 'b, K: Ord, V: PartialEq> DiffIter<'a, 'b, K, V> {
    /// When both positions start a subtree the two maps share, moves both past it.
    fn skip_shared(&mut self) -> bool {
        let (old, new) = (self.old.path.len(), self.new.path.len());
        // A shared subtree is as high in both trees: compare the subtrees of equal height.
        let levels = old.min(new);
        for up in (1..=levels).rev() {
            let (o, n) = (old + 1 - up, new + 1 - up);
            if let (Some(a), Some(b)) = (self.old.subtree_at_start(o), self.new.subtree_at_start(n))
                && Arc::ptr_eq(a, b)
            {
                self.old.next_subtree(o);
                self.new.next_subtree(n);
                return true;
            }
        }
        false
    }
}

impl<'a, 'b, K: Ord, V: PartialEq> Iterator for DiffIter<'a, 'b, K, V> {
    type Item = DiffItem<'a, 'b, K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match (self.old.peek(), self.new.peek()) {
                (None, None) => return None,
                (Some((k, v)), None) => {
                    self.old.advance();
                    return Some(DiffItem::Remove(k, v));
                }
                (None, Some((k, v))) => {
                    self.new.advance();
                    return Some(DiffItem::Add(k, v));
                }
                (Some((ok, ov)), Some((nk, nv))) => match ok.cmp(nk) {
                    Ordering::Less => {
                        self.old.advance();
                        return Some(DiffItem::Remove(ok, ov));
                    }
                    Ordering::Greater => {
                        self.new.advance();
                        return Some(DiffItem::Add(nk, nv));
                    }
                    Ordering::Equal => {
                        if self.skip_shared() {
                            continue;
                        }
                        self.old.advance();
                        self.new.advance();
                        if ov != nv {
                            return Some(DiffItem::Update {
                                old: (ok, ov),
                                new: (nk, nv),
                            });
                        }
                    }
                },
            }
        }
    }
}

impl<K, V> Clone for OrdMap<K, V> {
    fn clone(&self) -> Self {
        OrdMap {
            root: self.root.clone(),
            len: self.len,
        }
    }
}

impl<K, V> Default for OrdMap<K, V> {
    fn default() -> Self {
        OrdMap::new()
    }
}

impl<K, V, Q> std::ops::Index<&Q> for OrdMap<K, V>
where
    K: Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    /// The value at `key`; panics when there is none (see [`OrdMap::get`]).
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("key not in the map")
    }
}

impl<K: Ord, V: PartialEq> PartialEq for OrdMap<K, V> {
    /// Compared through [`OrdMap::diff`]: what two maps share is not looked into.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.diff(other).next().is_none()
    }
}

impl<K: Ord, V: Eq> Eq for OrdMap<K, V> {}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for OrdMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for OrdMap<K, V> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.iter())
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for OrdMap<K, V> {
    /// Entries in key order are built in one pass ([`OrdMap::from_sorted`]); others are sorted
    /// first, the last of equal keys kept.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        OrdMap::from_sorted(entries.into_iter().collect())
    }
}

impl<K: Ord + Clone, V: Clone> From<Vec<(K, V)>> for OrdMap<K, V> {
    fn from(entries: Vec<(K, V)>) -> Self {
        OrdMap::from_sorted(entries)
    }
}

impl<'a, K, V> IntoIterator for &'a OrdMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<K: Clone, V: Clone> IntoIterator for OrdMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    /// The entries in key order: moved out of the nodes this map alone holds, cloned from those
    /// it shares.
    fn into_iter(self) -> Self::IntoIter {
        fn drain<K: Clone, V: Clone>(node: Arc<Node<K, V>>, out: &mut Vec<(K, V)>) {
            match Arc::try_unwrap(node) {
                Ok(Node::Leaf(entries)) => out.extend(entries),
                Ok(Node::Branch(b)) => b.children.into_iter().for_each(|c| drain(c, out)),
                Err(shared) => {
                    let mut cursor = Cursor::new(Some(&shared));
                    while let Some((k, v)) = cursor.peek() {
                        out.push((k.clone(), v.clone()));
                        cursor.advance();
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(self.len);
        if let Some(root) = self.root {
            drain(root, &mut out);
        }
        out.into_iter()
    }
}

#[cfg(test)]
impl<K: Ord, V> OrdMap<K, V> {
    /// Panics unless the tree keeps its invariants: keys in order within their separators'
    /// bounds, leaves at one depth, no node empty or over [`MAX`], `len` the entries' count.
    fn check(&self) {
        fn walk<'a, K: Ord, V>(
            node: &'a Node<K, V>,
            low: Option<&'a K>,
            high: Option<&'a K>,
            depth: usize,
            leaf_depth: &mut Option<usize>,
        ) -> usize {
            assert!(
                node.size() >= 1 && node.size() <= MAX,
                "node of {}",
                node.size()
            );
            match node {
                Node::Leaf(entries) => {
                    assert_eq!(
                        *leaf_depth.get_or_insert(depth),
                        depth,
                        "leaves at one depth"
                    );
                    assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "leaf in order");
                    for (k, _) in entries {
                        assert!(low.is_none_or(|l| l <= k) && high.is_none_or(|h| k < h));
                    }
                    entries.len()
                }
                Node::Branch(b) => {
                    assert_eq!(b.keys.len() + 1, b.children.len());
                    assert!(
                        b.keys.windows(2).all(|w| w[0] < w[1]),
                        "separators in order"
                    );
                    (0..b.children.len())
                        .map(|i| {
                            let lo = if i == 0 { low } else { Some(&b.keys[i - 1]) };
                            let hi = b.keys.get(i).or(high);
                            walk(&b.children[i], lo, hi, depth + 1, leaf_depth)
                        })
                        .sum()
                }
            }
        }
        let counted = self
            .root
            .as_deref()
            .map_or(0, |r| walk(r, None, None, 0, &mut None));
        assert_eq!(counted, self.len);
    }
}

#[cfg(test)]
mod tests;
