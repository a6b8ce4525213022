//! The HTTP route configuration's bytes as the incremental encoder keeps them: where each
//! host's virtual host is ([`Layout`]), so that a change of a few hosts is spliced into the
//! previous bytes, and the shards of the configuration while a change is encoded
//! ([`HttpShard`]).

use prost::Message;

use super::super::{route, wire_encode};
#[cfg(test)]
use super::BTreeMap;
use super::{RouteConfiguration, content};
use crate::xds::cache::LARGE;
use sluice_core::dag::VirtualHost;

/// The layout of an encoded HTTP route configuration: its name field, then one entry per virtual
/// host (field key, length, encoded `VirtualHost`) in the order of their names, which is the
/// configuration's order: a host's own, named after the host, and the shared
/// [`route::HTTPS_REDIRECT_VHOST`]. A change of a few hosts is spliced into the previous bytes: the bytes
/// between changed hosts are copied in runs, not encoded or assembled again. The content hash
/// is made of the hashes of groups of entries ([`content`]); the layout keeps them, and a change
/// hashes again only the groups that hold changed hosts.
#[derive(Debug, Default)]
pub(super) struct Layout {
    pub(super) entries: Vec<Entry>,
    /// Whether each entry ends a group ([`Entry::ends_group`]): what finding the groups reads,
    /// 1 byte per entry where an entry is ~60.
    pub(super) ends: Vec<bool>,
    /// The length of the bytes described (the head and every entry).
    pub(super) len: usize,
    /// The hash of the last group, after the last entry that ends one (of the head and the
    /// entries after it); None when not computed yet.
    pub(super) tail: Option<[u8; 32]>,
    /// Bytes of groups hashed so far (the tests count them).
    #[cfg(test)]
    pub(super) hashed: usize,
    /// The hosts that are domains of the shared [`route::HTTPS_REDIRECT_VHOST`]
    /// ([`route::redirects_everything`]). Every other host of a change is looked up here, so a
    /// hash set (a sorted set's lookup compared ~10 names); sorted when the shared host is made.
    pub(super) redirected: hashbrown::HashSet<String>,
}

/// Up to this many changed hosts are applied to the layout in place; more are merged into a new
/// one in a single pass.
pub(super) const IN_PLACE_EDITS: usize = 16;

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) host: Box<str>,
    /// Where the entry starts, and its length: key, length varint and body.
    pub(super) start: usize,
    pub(super) len: usize,
    /// The length of the body (the encoded `VirtualHost`), the last bytes of the entry.
    pub(super) body: usize,
    /// Whether the entry ends a group of the content hash ([`content::ends_group`]).
    pub(super) ends_group: bool,
    /// The hash of the group the entry ends, once computed.
    pub(super) group: Option<Box<[u8; 32]>>,
}

impl Entry {
    pub(super) fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Appends one entry (field 2 of `RouteConfiguration`) holding `body`; returns its entry.
pub(super) fn write_entry(out: &mut Vec<u8>, host: String, body: &[u8]) -> Entry {
    let start = out.len();
    wire_encode::put_always(wire_encode::VIRTUAL_HOSTS, body, out);
    let len = out.len() - start;
    Entry {
        host: host.into_boxed_str(),
        start,
        len,
        body: body.len(),
        ends_group: content::ends_group(body, len),
        group: None,
    }
}

/// Changed hosts of the HTTP route configuration: bytes to put, or None to remove. They are
/// collected in a vector, mostly in host order already (from the diff of the models' hosts), and
/// sorted once before the splice: cheaper than keeping a sorted map of thousands of hosts for a
/// build from nothing.
#[derive(Debug, Default)]
pub(super) struct HostEdits(pub(super) Vec<(String, Option<Vec<u8>>)>);

impl HostEdits {
    pub(super) fn put(&mut self, host: String, bytes: Option<Vec<u8>>) {
        self.0.push((host, bytes));
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The edits in host order, each host once with its last edit, as a map's inserts would
    /// leave them.
    pub(super) fn sorted(self) -> Vec<(String, Option<Vec<u8>>)> {
        let mut edits = self.0;
        // Stable: the edits of one host stay in the order they were made.
        edits.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Option<Vec<u8>>)> = Vec::with_capacity(edits.len());
        for edit in edits {
            match out.last_mut() {
                Some(last) if last.0 == edit.0 => *last = edit,
                _ => out.push(edit),
            }
        }
        out
    }
}

#[cfg(test)]
impl From<BTreeMap<String, Option<Vec<u8>>>> for HostEdits {
    fn from(edits: BTreeMap<String, Option<Vec<u8>>>) -> HostEdits {
        HostEdits(edits.into_iter().collect())
    }
}

impl Layout {
    /// The encoded `VirtualHost` of `host` in `bytes` (the configuration this layout describes).
    pub(super) fn body<'b>(&self, bytes: &'b [u8], host: &str) -> Option<&'b [u8]> {
        let i = self
            .entries
            .binary_search_by(|e| (*e.host).cmp(host))
            .ok()?;
        let e = &self.entries[i];
        bytes.get(e.end() - e.body..e.end())
    }

    /// Where `host`'s entry is among the entries, and whether it is there.
    pub(super) fn place(&self, host: &str) -> (usize, bool) {
        match self.entries.binary_search_by(|e| (*e.host).cmp(host)) {
            Ok(i) => (i, true),
            Err(i) => (i, false),
        }
    }

    /// Where entry `i` starts (or would start): the end of the bytes past the last entry.
    pub(super) fn start_of(&self, i: usize, head: usize) -> usize {
        match self.entries.get(i) {
            Some(e) => e.start,
            None => self.entries.last().map_or(head, Entry::end),
        }
    }

    /// `old` (the configuration this layout describes, named `name`) with `edits` applied: a host
    /// with bytes is put (added or replaced), a host with None removed. The layout then describes
    /// the result; also returned is its content digest ([`Resource::with_large_digest`]) when the
    /// result is [large](crate::xds::cache::LARGE): a smaller one is hashed in one piece, many
    /// side by side, and its groups' hashes wait until it is large.
    ///
    /// `suffix` (the same for every splice of one layout) follows the entries: the fields of the
    /// configuration whose numbers are above the virtual hosts'. `old` is given without it, and
    /// the layout's length counts it not.
    pub(super) fn splice(
        &mut self,
        name: &str,
        old: &[u8],
        edits: HostEdits,
        suffix: &[u8],
    ) -> (Vec<u8>, Option<[u8; 32]>) {
        let edits = edits.sorted();
        let head = self.entries.first().map_or(old.len(), |e| e.start);
        let added: usize = edits.iter().flat_map(|(_, b)| b).map(|b| b.len() + 8).sum();
        let mut out = Vec::with_capacity(old.len() + added + suffix.len());
        // Where each edit falls among the old entries (edits are in host order, as entries are).
        let places: Vec<(usize, bool)> = edits.iter().map(|(h, _)| self.place(h)).collect();
        let touched = if edits.len() <= IN_PLACE_EDITS {
            self.splice_in_place(old, head, &mut out, edits, &places)
        } else {
            self.merge(old, head, &mut out, edits, places)
        };
        // The group the previous edit's entry was found in, from where that search started to
        // the entry that ends the group (None: the last group): a later edit in that span is
        // in the same group, already forgotten. A group holds ~16 KiB of entries (~160 hosts);
        // searching from each edited entry of a rebuild went over its group again each time.
        let mut last: Option<(usize, Option<usize>)> = None;
        for at in touched {
            let end = self.forget_group_once(at, &mut last);
            if end == Some(at) {
                self.forget_group_once(at + 1, &mut last);
            }
        }
        self.len = out.len();
        out.extend_from_slice(suffix);
        // The groups an edit touched are forgotten above whether or not they are hashed now.
        let digest = (out.len() >= LARGE).then(|| self.digest(name, &out));
        (out, digest)
    }

    /// [`Layout::forget_group_of`], unless `last` (the span searched by the previous call, to the
    /// entry it found) holds `at`: that group was forgotten already. An entry was put at `at`,
    /// or removed from before it: the group that holds the entry now at `at` is hashed again,
    /// and so is the next one when that entry ends its group (an entry that ends a group moves
    /// where the next group starts).
    pub(super) fn forget_group_once(
        &mut self,
        at: usize,
        last: &mut Option<(usize, Option<usize>)>,
    ) -> Option<usize> {
        if let Some((from, end)) = *last
            && from <= at
            && end.is_none_or(|end| at <= end)
        {
            return end;
        }
        let end = self.forget_group_of(at);
        *last = Some((at, end));
        end
    }

    /// Forgets the hash of the group that holds entry `at` (or would, past the last entry): the
    /// group of the first entry from `at` on that ends one, or the last group. Returns the index
    /// of that entry.
    pub(super) fn forget_group_of(&mut self, at: usize) -> Option<usize> {
        let rest = self.ends.get(at..).unwrap_or_default();
        match rest.iter().position(|&ends| ends) {
            Some(i) => {
                self.entries[at + i].group = None;
                Some(at + i)
            }
            None => {
                self.tail = None;
                None
            }
        }
    }

    /// The content digest of `bytes` (the configuration this layout describes, named `name`),
    /// hashing the groups whose hashes are not known.
    pub(super) fn digest(&mut self, name: &str, bytes: &[u8]) -> [u8; 32] {
        debug_assert_eq!(self.ends.len(), self.entries.len());
        let mut digest = content::Digest::new(name);
        let mut start = 0;
        let ends = self.ends.iter().enumerate().filter(|(_, ends)| **ends);
        for (i, _) in ends {
            let e = &mut self.entries[i];
            let end = e.end();
            let group = e.group.get_or_insert_with(|| {
                #[cfg(test)]
                {
                    self.hashed += end - start;
                }
                Box::new(content::group_digest(&bytes[start..end]))
            });
            digest.group(group);
            start = end;
        }
        if start < bytes.len() {
            let tail = self.tail.get_or_insert_with(|| {
                #[cfg(test)]
                {
                    self.hashed += bytes.len() - start;
                }
                content::group_digest(&bytes[start..])
            });
            digest.group(tail);
        } else {
            self.tail = None;
        }
        digest.finish()
    }

    /// Copies the bytes between edits in one run each, then updates the entries where they are.
    /// Returns where the edits are among the new entries ([`Layout::forget_group_once`]).
    pub(super) fn splice_in_place(
        &mut self,
        old: &[u8],
        head: usize,
        out: &mut Vec<u8>,
        edits: Vec<(String, Option<Vec<u8>>)>,
        places: &[(usize, bool)],
    ) -> Vec<usize> {
        let mut cursor = 0;
        let mut written = Vec::with_capacity(edits.len());
        let puts: Vec<bool> = edits.iter().map(|(_, b)| b.is_some()).collect();
        for ((host, edit), &(i, found)) in edits.into_iter().zip(places) {
            let at = self.start_of(i, head);
            out.extend_from_slice(&old[cursor..at]);
            cursor = if found { self.entries[i].end() } else { at };
            written.push(edit.map(|body| write_entry(out, host, &body)));
        }
        out.extend_from_slice(&old[cursor..]);
        // Entries last to first, so that each index still points where it did.
        for (entry, &(i, found)) in written.into_iter().zip(places).rev() {
            match (entry, found) {
                (Some(e), true) => {
                    self.ends[i] = e.ends_group;
                    self.entries[i] = e;
                }
                (Some(e), false) => {
                    self.ends.insert(i, e.ends_group);
                    self.entries.insert(i, e);
                }
                (None, true) => {
                    self.ends.remove(i);
                    self.entries.remove(i);
                }
                (None, false) => {}
            }
        }
        // Offsets from the first edit on, in order.
        if let Some(&(first, _)) = places.first() {
            let mut at = match first.checked_sub(1) {
                Some(prev) => self.entries[prev].end(),
                None => head,
            };
            for e in &mut self.entries[first..] {
                e.start = at;
                at += e.len;
            }
        }
        // Each edit's old index, moved by the entries added and removed before it.
        let mut shift = 0isize;
        let mut touched = Vec::with_capacity(places.len());
        for (put, &(i, found)) in puts.into_iter().zip(places) {
            touched.push(i.saturating_add_signed(shift));
            match (put, found) {
                (true, false) => shift += 1,
                (false, true) => shift -= 1,
                _ => {}
            }
        }
        touched
    }

    /// Builds the entries again in one pass: the old ones moved over, the edits merged in.
    /// Returns where the edits are among the new entries ([`Layout::forget_group_once`]).
    pub(super) fn merge(
        &mut self,
        old: &[u8],
        head: usize,
        out: &mut Vec<u8>,
        edits: Vec<(String, Option<Vec<u8>>)>,
        places: Vec<(usize, bool)>,
    ) -> Vec<usize> {
        out.extend_from_slice(&old[..head]);
        let mut kept = std::mem::take(&mut self.entries)
            .into_iter()
            .enumerate()
            .peekable();
        let mut entries = Vec::with_capacity(kept.len() + edits.len());
        let mut touched = Vec::with_capacity(edits.len());
        for ((host, edit), (at, found)) in edits.into_iter().zip(places) {
            carry(old, out, &mut kept, &mut entries, at);
            if found {
                kept.next();
            }
            touched.push(entries.len());
            if let Some(body) = edit {
                entries.push(write_entry(out, host, &body));
            }
        }
        carry(old, out, &mut kept, &mut entries, usize::MAX);
        self.ends = entries.iter().map(|e| e.ends_group).collect();
        self.entries = entries;
        touched
    }
}

/// Moves the old entries before index `to` from `kept` to `entries`, and their bytes from `old`
/// to `out` in one copy.
pub(super) fn carry(
    old: &[u8],
    out: &mut Vec<u8>,
    kept: &mut std::iter::Peekable<std::iter::Enumerate<std::vec::IntoIter<Entry>>>,
    entries: &mut Vec<Entry>,
    to: usize,
) {
    let mut run: Option<(usize, usize)> = None;
    while let Some((_, mut e)) = kept.next_if(|(i, _)| *i < to) {
        let from = run.map_or(e.start, |(from, _)| from);
        run = Some((from, e.end()));
        // The run is copied to the end of `out` below.
        e.start = out.len() + (e.start - from);
        entries.push(e);
    }
    if let Some((from, to)) = run {
        out.extend_from_slice(&old[from..to]);
    }
}

/// The start of a shard of the HTTP route configuration, before its virtual hosts (field 2):
/// what prost writes for its name (field 1).
pub(super) fn http_route_config_head(name: &str) -> Vec<u8> {
    RouteConfiguration {
        name: name.to_string(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The end of each shard of the HTTP route configuration, after its virtual hosts: what prost
/// writes for the fields numbered above them (the header the shards remove; nothing with one
/// shard).
pub(super) fn http_route_config_suffix(shards: u16) -> Vec<u8> {
    RouteConfiguration {
        request_headers_to_remove: route::shard_headers_to_remove(shards),
        ..Default::default()
    }
    .encode_to_vec()
}

/// One shard of the HTTP route configuration while a change is encoded.
pub(super) struct HttpShard<'a> {
    pub(super) layout: Layout,
    /// The shard's previous bytes (less the suffix), which `layout` describes.
    pub(super) old: &'a [u8],
    /// Changed hosts: bytes to put, or None to remove.
    pub(super) edits: HostEdits,
    /// How many hosts the shard's shared redirect host had before the change.
    pub(super) redirected_before: usize,
    /// Whether the shard's shared redirect host changed.
    pub(super) redirected_changed: bool,
}

impl<'a> HttpShard<'a> {
    /// The shard's layout, previous bytes and edits, with the edit of the shared redirect host
    /// ([`route::HTTPS_REDIRECT_VHOST`]) when the hosts it names changed.
    pub(super) fn with_redirect_edit(self) -> (Layout, &'a [u8], HostEdits) {
        let HttpShard {
            layout,
            old,
            mut edits,
            redirected_before,
            redirected_changed,
        } = self;
        if redirected_changed {
            let shared = route::HTTPS_REDIRECT_VHOST.to_string();
            let bytes = (!layout.redirected.is_empty()).then(|| {
                // In the model's order: its hosts are sorted by name.
                let mut hosts: Vec<&str> = layout.redirected.iter().map(String::as_str).collect();
                hosts.sort_unstable();
                route::build_https_redirect_vhost(hosts).encode_to_vec()
            });
            if bytes.is_some() || redirected_before > 0 {
                edits.put(shared, bytes);
            }
        }
        (layout, old, edits)
    }

    /// Puts host `v` in this shard: `bytes` is its encoded virtual host, or None for a host
    /// that [redirects everything](route::redirects_everything) (`redirect`), a domain of the
    /// shared virtual host (its own goes, if it had one).
    pub(super) fn set(&mut self, v: &VirtualHost, redirect: bool, bytes: Option<Vec<u8>>) {
        let (false, Some(bytes)) = (redirect, bytes) else {
            self.redirected_changed |= self.layout.redirected.insert(v.host.clone());
            if self.layout.body(self.old, &v.host).is_some() {
                self.edits.put(v.host.clone(), None);
            }
            return;
        };
        self.redirected_changed |= self.layout.redirected.remove(&v.host);
        if self.layout.body(self.old, &v.host) != Some(&bytes[..]) {
            self.edits.put(v.host.clone(), Some(bytes));
        }
    }

    /// Removes `host` from this shard.
    pub(super) fn remove(&mut self, host: &str) {
        self.redirected_changed |= self.layout.redirected.remove(host);
        if self.layout.body(self.old, host).is_some() {
            self.edits.put(host.to_string(), None);
        }
    }
}

/// The groups of HTTP route configurations a snapshot holds, each a number of shards: the HTTP
/// listener's, then for a while after `auto` switched route shards on or off, the previous
/// listener's. Their shards are numbered one group after the other. The two never share a
/// name: one of them is a single configuration, the other shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct HttpGroups {
    listener: u16,
    draining: Option<u16>,
}

impl HttpGroups {
    pub(super) fn new(listener: u16, draining: Option<u16>) -> Self {
        let listener = listener.max(1);
        let draining = draining.map(|n| n.max(1)).filter(|&n| n != listener);
        debug_assert!(draining.is_none_or(|n| n.min(listener) == 1));
        HttpGroups { listener, draining }
    }

    /// Each group's number of shards, the listener's first.
    pub(super) fn counts(&self) -> impl Iterator<Item = u16> + use<> {
        std::iter::once(self.listener).chain(self.draining)
    }

    /// The shards of every group, in order: each one's group (0: the listener's) and name.
    pub(super) fn names(&self) -> impl Iterator<Item = (usize, String)> + use<> {
        (self.counts().enumerate()).flat_map(|(g, n)| {
            (0..usize::from(n)).map(move |k| (g, route::http_route_config_name(k, n)))
        })
    }

    /// The numbers of the shards that hold `host`, in every group: a range per group (the
    /// second empty when there is one group).
    pub(super) fn shards_of(&self, host: &str) -> [std::ops::Range<usize>; 2] {
        let listener = route::shards_of(host, self.listener);
        let draining = self.draining.map_or(0..0, |n| {
            let r = route::shards_of(host, n);
            let at = usize::from(self.listener);
            r.start + at..r.end + at
        });
        [listener, draining]
    }
}
