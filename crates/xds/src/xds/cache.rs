//! The versioned resource cache: one immutable [`Snapshot`] per published routing state, holding
//! every resource encoded once, with a content version per resource and per type. Versions are
//! content hashes, so an endpoint change leaves the cluster version alone, and a restarted sluice
//! computes the same versions for the same objects (Envoy reconnecting with known versions gets
//! nothing it already has).
//!
//! The resources of a type are a persistent B-tree ([`ResourceMap`]): a snapshot derived from
//! another by a few changed resources ([`TypeSnapshot::edit`]) shares every other node with it,
//! costs O(changes · log n) to make, and xDS streams find what changed between the two by
//! skipping the shared nodes ([`sluice_core::pmap::OrdMap::diff`]). The version of a type is kept up to
//! date the same way: it is a sum over its resources ([`SetHash`]), so a change adjusts it by the
//! resources that changed instead of hashing all of them again.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::content;
use super::resources::{ResourceType, Resources};

/// A resource's name. The resource and its key in a [`ResourceMap`] share it, and so does every
/// copy of the key the persistent maps make when they copy a node on an edit; the resources of
/// clusters and load assignments share their model's [`ClusterName`](sluice_core::dag::ClusterName).
pub type ResourceName = Arc<str>;

/// The resources of one type by name (a persistent map: clones share structure).
pub type ResourceMap = sluice_core::pmap::OrdMap<ResourceName, Arc<Resource>>;

/// One encoded resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    pub name: ResourceName,
    /// Hash of the name and the encoded bytes.
    pub version: Version,
    pub body: Body,
    /// What the resource adds to the version of a set holding it ([`SetHash`]).
    part: SetHash,
}

impl Resource {
    /// A resource from its encoded body; the version is the hash of the name and the bytes.
    pub fn new(name: impl Into<ResourceName>, body: Body) -> Resource {
        let name = name.into();
        let digest = content_hash(&name, &body.value);
        Resource {
            version: Version::of_digest(&digest),
            part: SetHash::of_digest(&digest),
            name,
            body,
        }
    }

    /// [`Resource::new`] of each (name, body), in order, the small ones' content hashes computed
    /// side by side ([`content::small_digests`]): what the encoder makes its many clusters and
    /// load assignments with.
    pub fn new_many(resources: Vec<(ResourceName, Body)>) -> Vec<Resource> {
        let small: Vec<(&str, &[u8])> = (resources.iter())
            .filter(|(_, body)| body.value.len() < LARGE)
            .map(|(name, body)| (&**name, body.value.as_slice()))
            .collect();
        let mut digests = content::small_digests(&small).into_iter();
        drop(small);
        (resources.into_iter())
            .map(|(name, body)| {
                let digest = (body.value.len() < LARGE).then(|| digests.next()).flatten();
                match digest {
                    Some(digest) => Resource {
                        version: Version::of_digest(&digest),
                        part: SetHash::of_digest(&digest),
                        name,
                        body,
                    },
                    None => Resource::new(name, body),
                }
            })
            .collect()
    }

    /// [`Resource::new`] for a body of at least [`LARGE`] bytes whose digest the caller computed
    /// from the hashes of its groups (as [`content::large_digest`] does from the bytes); a
    /// smaller body is hashed here.
    pub(crate) fn with_large_digest(
        name: impl Into<ResourceName>,
        body: Body,
        digest: &[u8; 32],
    ) -> Resource {
        if body.value.len() < LARGE {
            return Resource::new(name, body);
        }
        Resource {
            version: Version::of_digest(digest),
            part: SetHash::of_digest(digest),
            name: name.into(),
            body,
        }
    }

    /// A resource a client says it holds at `version` (delta xDS `initial_resource_versions`),
    /// of which sluice has no body: it only stands for what the client holds, never sent.
    pub fn known(name: impl Into<ResourceName>, version: String) -> Resource {
        Resource {
            name: name.into(),
            version: Version::from(version),
            body: Body::default(),
            part: SetHash::default(),
        }
    }

    /// Whether this is a [`Resource::known`], with no body to send.
    pub fn is_known_only(&self) -> bool {
        self.body.type_url.is_empty()
    }

    /// A resource with a chosen version string and content hash, as a collision search would
    /// produce them (tests only).
    #[cfg(test)]
    pub(crate) fn crafted(
        name: &str,
        version: &str,
        lanes: [u64; 4],
        body: impl Into<Body>,
    ) -> Resource {
        Resource {
            name: name.into(),
            version: Version::from(version.to_string()),
            body: body.into(),
            part: SetHash(lanes),
        }
    }

    /// Whether both hold the same content: the whole 256-bit content hash is compared, not the
    /// 64 bits the version string shows, so two contents a tenant crafted to share a version
    /// still differ. A [`Resource::known`] has only the client's version string to compare.
    pub fn same_content(&self, other: &Resource) -> bool {
        if self.is_known_only() || other.is_known_only() {
            self.version == other.version
        } else {
            self.part == other.part
        }
    }
}

/// An encoded resource as it goes on the wire, a `google.protobuf.Any`: the type URL, which the
/// resources of sluice's types share instead of holding a copy each, and the message's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Body {
    pub type_url: Cow<'static, str>,
    pub value: Vec<u8>,
}

impl Body {
    /// An encoded resource of one of sluice's types.
    pub fn new(t: ResourceType, value: Vec<u8>) -> Body {
        Body {
            type_url: Cow::Borrowed(t.type_url()),
            value,
        }
    }

    /// The generated message with the same content (a copy).
    pub fn to_any(&self) -> Any {
        Any {
            type_url: self.type_url.to_string(),
            value: self.value.clone(),
        }
    }
}

impl From<Any> for Body {
    fn from(any: Any) -> Body {
        let type_url = match ResourceType::from_type_url(&any.type_url) {
            Some(t) => Cow::Borrowed(t.type_url()),
            None => Cow::Owned(any.type_url),
        };
        Body {
            type_url,
            value: any.value,
        }
    }
}

/// A resource's version: the 16 hex digits [`Resource::new`] computes, held inline (no
/// allocation per resource), or the string a delta client says it holds
/// (`initial_resource_versions`), which may be anything. Versions compare by their text.
#[derive(Clone)]
pub struct Version(VersionRepr);

#[derive(Clone)]
enum VersionRepr {
    /// 16 ASCII hex digits.
    Digest([u8; 16]),
    Other(Box<str>),
}

impl Version {
    /// The first 8 bytes of a digest as 16 lowercase hex digits.
    fn of_digest(digest: &[u8]) -> Version {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 16];
        for (i, &b) in digest[..8].iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        Version(VersionRepr::Digest(out))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Always ASCII hex digits (`of_digest`).
            VersionRepr::Digest(hex) => std::str::from_utf8(hex).unwrap_or_default(),
            VersionRepr::Other(s) => s,
        }
    }
}

impl From<String> for Version {
    fn from(s: String) -> Version {
        Version(VersionRepr::Other(s.into_boxed_str()))
    }
}

impl std::ops::Deref for Version {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Version {}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version of a set of resources as a sum, modulo 2^64 in each of four lanes, of a 256-bit
/// content hash of each member (its name and bytes): adding or removing a member adds or
/// subtracts its hash, so a set's version follows a change in O(1) per changed resource, and the
/// same members give the same version in any order. Finding two sets with equal sums takes
/// thousands of chosen resources and a generalized-birthday search over 256 bits; equal versions
/// are therefore never trusted alone: they are confirmed by each resource's own hash
/// ([`Snapshot::sharing_types_of`]) or by comparing the resources ([`Snapshot::same_as`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetHash([u64; 4]);

impl SetHash {
    fn of_digest(digest: &[u8; 32]) -> SetHash {
        let lane = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&digest[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        SetHash([lane(0), lane(1), lane(2), lane(3)])
    }

    fn add(&mut self, r: &Resource) {
        for (a, b) in self.0.iter_mut().zip(r.part.0) {
            *a = a.wrapping_add(b);
        }
    }

    fn sub(&mut self, r: &Resource) {
        for (a, b) in self.0.iter_mut().zip(r.part.0) {
            *a = a.wrapping_sub(b);
        }
    }

    /// The sum of every resource's part.
    pub fn of<'a>(resources: impl IntoIterator<Item = &'a Arc<Resource>>) -> SetHash {
        let mut sum = SetHash::default();
        for r in resources {
            sum.add(r);
        }
        sum
    }

    /// The version string: 16 hex digits of a hash of the sum.
    pub fn version(&self) -> String {
        let mut state = content::params(b"sluice xds set").to_state();
        for lane in self.0 {
            state.update(&lane.to_le_bytes());
        }
        hex8(&content::digest_bytes(&state.finalize()))
    }
}

/// All resources of one type.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeSnapshot {
    /// The version of the set ([`SetHash`]).
    pub version: String,
    pub resources: ResourceMap,
    sum: SetHash,
}

/// A [`TypeSnapshot`] being derived from another: inserts and removals keep the set's sum.
///
/// An edit from nothing (the first snapshot, a full encode) gets its resources in name order;
/// until one comes out of order, or is removed, they are appended to a vector and the persistent
/// map is built from it in one pass ([`sluice_core::pmap::OrdMap::from_sorted`]).
#[derive(Clone, Debug, Default)]
pub struct Edit {
    resources: ResourceMap,
    /// Resources in strictly increasing name order, while `resources` is empty.
    appended: Vec<(ResourceName, Arc<Resource>)>,
    sum: SetHash,
}

impl Edit {
    /// The resource of that name, as edited so far.
    pub fn get(&self, name: &str) -> Option<&Arc<Resource>> {
        if self.appended.is_empty() {
            return self.resources.get(name);
        }
        let at = self
            .appended
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()?;
        Some(&self.appended[at].1)
    }

    /// Adds a resource or replaces the one of its name.
    pub fn insert(&mut self, r: Arc<Resource>) {
        self.sum.add(&r);
        if self.resources.is_empty() && self.appended.last().is_none_or(|(last, _)| *last < r.name)
        {
            self.appended.push((r.name.clone(), r));
            return;
        }
        self.settle();
        if let Some(old) = self.resources.insert(r.name.clone(), r) {
            self.sum.sub(&old);
        }
    }

    /// Removes the resource of that name, if any.
    pub fn remove(&mut self, name: &str) {
        self.settle();
        if let Some(old) = self.resources.remove(name) {
            self.sum.sub(&old);
        }
    }

    /// Moves the appended resources into the map.
    fn settle(&mut self) {
        if !self.appended.is_empty() {
            self.resources = ResourceMap::from_sorted(std::mem::take(&mut self.appended));
        }
    }

    pub fn finish(mut self) -> TypeSnapshot {
        self.settle();
        TypeSnapshot {
            version: self.sum.version(),
            resources: self.resources,
            sum: self.sum,
        }
    }
}

/// Every resource sluice serves at one moment. Types are shared between snapshots that differ
/// only in other types ([`Snapshot::with_replaced`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    types: BTreeMap<ResourceType, Arc<TypeSnapshot>>,
}

/// Resources at least this large are hashed in groups of their fields, smaller ones in one
/// piece, many of them side by side where the encoder makes many at once ([`content`]). The
/// groups let a routing change hash again only the group of the host it changed in the HTTP
/// route configuration of thousands of hosts. The threshold is one group's size
/// ([`content::GROUP_BYTES`]), so that a route shard (~40 KB at 10k routing objects) is hashed
/// once, by the groups its encoder keeps; with a larger threshold, a shard below it but above a
/// group's size would have its groups hashed for the encoder and then the whole shard again in
/// one piece.
pub(crate) const LARGE: usize = content::GROUP_BYTES as usize;

/// The content hash of a resource: its name and encoded bytes. Which hash depends on the length
/// only, so equal bytes always get equal versions, whichever way they were encoded.
fn content_hash(name: &str, bytes: &[u8]) -> [u8; 32] {
    if bytes.len() >= LARGE {
        content::large_digest(name, bytes)
    } else {
        content::small_digest(name, bytes)
    }
}

/// The first 8 bytes of a digest as 16 lowercase hex digits.
fn hex8(digest: &[u8]) -> String {
    Version::of_digest(digest).to_string()
}

/// Whether both maps hold the same names with the same contents ([`Resource::same_content`]);
/// nodes the maps share are not looked into.
fn same_contents(a: &ResourceMap, b: &ResourceMap) -> bool {
    a.diff(b).all(|d| match d {
        sluice_core::pmap::DiffItem::Update {
            old: (_, x),
            new: (_, y),
        } => x.same_content(y),
        _ => false,
    })
}

/// The version of a set of resources (the same as a [`TypeSnapshot`] of them would have).
pub fn set_version<'a>(resources: impl IntoIterator<Item = &'a Arc<Resource>>) -> String {
    SetHash::of(resources).version()
}

impl Default for TypeSnapshot {
    /// No resources (with the version of the empty set).
    fn default() -> TypeSnapshot {
        Edit::default().finish()
    }
}

impl TypeSnapshot {
    /// The resources of one type, with the version of the set.
    pub fn new(resources: ResourceMap) -> TypeSnapshot {
        let sum = SetHash::of(resources.values());
        TypeSnapshot {
            version: sum.version(),
            resources,
            sum,
        }
    }

    /// An edit starting from these resources (nothing is copied).
    pub fn edit(&self) -> Edit {
        Edit {
            resources: self.resources.clone(),
            appended: Vec::new(),
            sum: self.sum,
        }
    }
}

impl Snapshot {
    /// A snapshot of the given types (a type not given has no resources).
    pub fn from_types(types: BTreeMap<ResourceType, Arc<TypeSnapshot>>) -> Snapshot {
        Snapshot { types }
    }

    /// Whether both snapshots hold the same resources. Types shared between the two (the usual
    /// case for what did not change) are not looked into, and the resources of a type are
    /// compared only when no type's version tells the snapshots apart.
    pub fn same_as(&self, other: &Snapshot) -> bool {
        let pairs = ResourceType::ALL
            .map(|t| (self.types.get(&t), other.types.get(&t)))
            .into_iter()
            .filter(|(a, b)| !matches!((a, b), (Some(a), Some(b)) if Arc::ptr_eq(a, b)));
        let cheap = pairs.clone().all(|pair| match pair {
            (Some(a), Some(b)) => a.version == b.version,
            (None, None) => true,
            (Some(a), None) | (None, Some(a)) => a.resources.is_empty(),
        });
        cheap
            && pairs.into_iter().all(|pair| match pair {
                (Some(a), Some(b)) => a.resources == b.resources,
                _ => true,
            })
    }

    /// This snapshot with each type that holds the same resources as `other`'s taken from `other`
    /// (the same `Arc`); sharing it lets xDS streams see at a glance that the type did not change.
    /// (The pipeline's endpoint fast path publishes load assignments the encoder later computes
    /// again: without this, the next routing change would look like a change of every load
    /// assignment.) Equal set versions select the candidates; each resource's content hash then
    /// confirms them, as a sum of hashes is easier to collide on purpose than the hashes are.
    pub fn sharing_types_of(mut self, other: &Snapshot) -> Snapshot {
        for (t, mine) in self.types.iter_mut() {
            if let Some(theirs) = other.types.get(t)
                && !Arc::ptr_eq(mine, theirs)
                && mine.version == theirs.version
                && mine.resources.len() == theirs.resources.len()
                && same_contents(&mine.resources, &theirs.resources)
            {
                *mine = theirs.clone();
            }
        }
        self
    }

    /// Encodes translated resources. The same as [`Snapshot::from_encoded`] of
    /// [`Resources::encode`], without the intermediate maps.
    pub fn from_resources(resources: &Resources) -> Snapshot {
        fn typed<T: Message>(
            t: ResourceType,
            items: &[T],
            name: impl Fn(&T) -> &str,
        ) -> Arc<TypeSnapshot> {
            let resources: ResourceMap = items
                .iter()
                .map(|r| {
                    let r = Resource::new(name(r), Body::new(t, r.encode_to_vec()));
                    (r.name.clone(), Arc::new(r))
                })
                .collect();
            Arc::new(TypeSnapshot::new(resources))
        }
        use ResourceType as R;
        let r = resources;
        let types = BTreeMap::from([
            (R::Listener, typed(R::Listener, &r.listeners, |l| &l.name)),
            (
                R::ScopedRoute,
                typed(R::ScopedRoute, &r.scoped_routes, |s| &s.name),
            ),
            (R::Route, typed(R::Route, &r.routes, |r| &r.name)),
            (R::Cluster, typed(R::Cluster, &r.clusters, |c| &c.name)),
            (
                R::Endpoint,
                typed(R::Endpoint, &r.endpoints, |e| &e.cluster_name),
            ),
            (R::Secret, typed(R::Secret, &r.secrets, |s| &s.name)),
        ]);
        Snapshot { types }
    }

    /// Builds a snapshot from already encoded resources (tests, other sources).
    pub fn from_encoded<B: Into<Body>>(
        items: BTreeMap<ResourceType, BTreeMap<String, B>>,
    ) -> Snapshot {
        let mut types = BTreeMap::new();
        for t in ResourceType::ALL {
            types.insert(t, Self::type_snapshot(BTreeMap::<String, Body>::new()));
        }
        for (t, items) in items {
            types.insert(t, Self::type_snapshot(items));
        }
        Snapshot { types }
    }

    /// This snapshot with the resources of type `t` in `items` replaced (or added), by name; every
    /// other type is shared with `self`, not copied, and so are the unchanged resources of `t`.
    pub fn with_replaced<B: Into<Body>>(
        &self,
        t: ResourceType,
        items: Vec<(String, B)>,
    ) -> Snapshot {
        let mut types = self.types.clone();
        let mut edit = types.get(&t).map(|ts| ts.edit()).unwrap_or_default();
        for (name, body) in items {
            edit.insert(Arc::new(Resource::new(name, body.into())));
        }
        types.insert(t, Arc::new(edit.finish()));
        Snapshot { types }
    }

    fn type_snapshot<B: Into<Body>>(items: BTreeMap<String, B>) -> Arc<TypeSnapshot> {
        let resources: ResourceMap = items
            .into_iter()
            .map(|(name, body)| {
                let r = Resource::new(name, body.into());
                (r.name.clone(), Arc::new(r))
            })
            .collect();
        Arc::new(TypeSnapshot::new(resources))
    }

    /// The resources of one type (empty when the snapshot has none).
    pub fn of(&self, t: ResourceType) -> &ResourceMap {
        static EMPTY: LazyLock<ResourceMap> = LazyLock::new(ResourceMap::new);
        self.types.get(&t).map(|s| &s.resources).unwrap_or(&EMPTY)
    }

    /// The resources of one type with their version, shared with other snapshots holding the
    /// same (None when the snapshot has no such type).
    pub fn shared(&self, t: ResourceType) -> Option<&Arc<TypeSnapshot>> {
        self.types.get(&t)
    }

    /// The content version of one type.
    pub fn version(&self, t: ResourceType) -> &str {
        self.types.get(&t).map(|s| s.version.as_str()).unwrap_or("")
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
