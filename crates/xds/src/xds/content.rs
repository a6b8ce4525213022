//! The content hashes of resources: a small resource's in one piece, many at a time; a large
//! resource's in groups of its top-level fields.
//!
//! A resource's version is a hash of its name and bytes, so that the same content gets the same
//! version in every sluice process.
//!
//! One hash function makes every digest: BLAKE2b-256 (`blake2b_simd`), with a personalization
//! per use (a small resource, a group, a large resource's digest of its groups, a type's set), so
//! that no digest of one kind can be made to equal one of another.
//!
//! **Small resources** (below [`LARGE`](crate::xds::cache::LARGE) bytes: clusters, load
//! assignments, secrets, a host's route configuration) are hashed in one piece
//! ([`small_digest`]). A build from nothing hashes 20,000 of them at 10k objects, each of a few
//! hundred bytes: one to three compressions of the hash each, and a single message's
//! compressions follow one another, so its time is their latency. [`small_digests`] hashes up
//! to four messages side by side in the lanes of one compression (AVX2; two with SSE4.1), with
//! the same result as one at a time. This is why the hash is BLAKE2b: BLAKE3 runs messages side
//! by side only within one message of more than 1 KiB, and its crate has no public way to hash
//! many short messages at once. The `dag` benchmark compares the ways on the 20,000 clusters and
//! load assignments of its 10k build (`cargo bench --bench dag`, "content hashes"): BLAKE3 one
//! at a time ~4.2 ms for the hashes alone, `Resource::new` with BLAKE2b one at a time ~5.6 ms,
//! `Resource::new_many` ~2.3 ms. Where the CPU has none of the SIMD the crate uses (ARM),
//! BLAKE2b one at a time costs about what BLAKE3 does. SHA-256 would be faster still on CPUs
//! with SHA instructions and several times slower on those without, and a version must not
//! depend on the CPU that computed it.
//!
//! **Large resources** (a group's size, [`GROUP_BYTES`], or more) are cut into groups. The HTTP
//! route configuration holds every host (630 KB at 6,000 hosts; ~40 KB per route shard at 10k
//! routing objects) and changes with any of them; hashed as one run of bytes, a change of
//! one host would hash everything after it again. Hashed here, it is cut into groups of whole
//! top-level fields (a route configuration's virtual hosts), each group hashed alone, and the
//! version is the hash of the name and the groups' hashes in order. Where a group ends depends
//! only on the field that ends it, never on where the field is: a host added or removed shifts
//! the bytes after it but leaves the groups after its own as they were, so the encoder, which
//! keeps each group's hash ([`crate::translate::incremental`]), hashes again only the group of a
//! changed host (~16 KiB) and the list of group hashes (32 bytes per group).
//!
//! The digest is a function of the name and the bytes alone: an encoder that keeps group
//! hashes and [`large_digest`] over the same bytes agree (the encoder's tests compare them). Two
//! different byte strings with equal digests would need two different lists of group hashes
//! with equal hashes, or two different groups with equal hashes. Host names chosen so that no
//! field ends a group make one group of everything: a change then hashes the whole resource
//! again, and no more. A small resource, a group and a large resource's list of group hashes are
//! hashed with different personalizations, so no small resource can be made to hash like a
//! large one.

use std::ops::Range;

/// The BLAKE2b parameters of one kind of digest: 32 bytes of output, and a personalization of
/// sluice's (at most 16 bytes), which keeps these digests apart from those of the other kinds
/// and from any other use of BLAKE2b.
pub(crate) fn params(personal: &[u8]) -> blake2b_simd::Params {
    let mut params = blake2b_simd::Params::new();
    params.hash_length(32).personal(personal);
    params
}

/// The parameters of a small resource's digest.
fn small_params() -> blake2b_simd::Params {
    params(b"sluice xds small")
}

/// What a small resource's digest hashes, in order: the name's length (4 bytes, little-endian),
/// the name, the bytes. The length makes the split between name and bytes unambiguous.
fn name_len(name: &str) -> [u8; 4] {
    // Names are far shorter than 4 GiB; a longer one would be cut short in this count alone.
    u32::try_from(name.len()).unwrap_or(u32::MAX).to_le_bytes()
}

/// A 32-byte BLAKE2b hash as an array.
pub(crate) fn digest_bytes(hash: &blake2b_simd::Hash) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&hash.as_bytes()[..32]);
    out
}

/// The digest of a small resource: BLAKE2b-256 of its name's length, its name and its bytes.
pub(crate) fn small_digest(name: &str, bytes: &[u8]) -> [u8; 32] {
    let mut state = small_params().to_state();
    state
        .update(&name_len(name))
        .update(name.as_bytes())
        .update(bytes);
    digest_bytes(&state.finalize())
}

/// How many small resources [`small_digests`] copies into one run of bytes before hashing them
/// side by side: a few kilobytes, which stay in the first-level cache.
const BATCH: usize = 32;

/// [`small_digest`] of each resource (name and bytes), in order, hashed side by side in the SIMD
/// lanes of the hash (`blake2b_simd::many`). Each resource's input is copied next to the others
/// first: a message hashed in a lane must be one run of bytes.
pub(crate) fn small_digests(resources: &[(&str, &[u8])]) -> Vec<[u8; 32]> {
    let params = small_params();
    let mut out = Vec::with_capacity(resources.len());
    let mut inputs: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::with_capacity(BATCH);
    for batch in resources.chunks(BATCH) {
        inputs.clear();
        ends.clear();
        // Room for the whole batch at once, rather than regrowing (and copying) it as it fills.
        inputs.reserve(batch.iter().map(|(n, b)| 4 + n.len() + b.len()).sum());
        for (name, bytes) in batch {
            inputs.extend_from_slice(&name_len(name));
            inputs.extend_from_slice(name.as_bytes());
            inputs.extend_from_slice(bytes);
            ends.push(inputs.len());
        }
        let mut start = 0;
        let mut jobs: Vec<blake2b_simd::many::HashManyJob<'_>> = (ends.iter())
            .map(|&end| {
                let job = blake2b_simd::many::HashManyJob::new(&params, &inputs[start..end]);
                start = end;
                job
            })
            .collect();
        blake2b_simd::many::hash_many(jobs.iter_mut());
        out.extend(jobs.iter().map(|job| digest_bytes(&job.to_hash())));
    }
    out
}

/// The size a group ends at, on average: a field of `n` bytes ends its group with a chance of
/// `n` in this many, so groups hold about this many bytes whatever the fields' sizes (a field
/// at least this large always ends one). A group is 128 compressions of the hash.
pub(crate) const GROUP_BYTES: u64 = 16 << 10;

/// Bytes at the start of a field's value that decide whether it ends a group. A virtual host
/// begins with its name: a change of its routes rarely moves a group's end.
const DECIDING_BYTES: usize = 32;

/// Whether a top-level field (other than the first) ends its group: `value` is its value (for a
/// length-delimited field, the bytes after the length), `field_len` the length of the whole
/// field (key, length and value).
pub(crate) fn ends_group(value: &[u8], field_len: usize) -> bool {
    // FNV-1a, then the finalizer of MurmurHash3 to spread its bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &value[..value.len().min(DECIDING_BYTES)] {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h % GROUP_BYTES < field_len as u64
}

/// The hash of one group's bytes.
pub(crate) fn group_digest(bytes: &[u8]) -> [u8; 32] {
    digest_bytes(&params(b"sluice xds group").hash(bytes))
}

/// The digest of a resource from its groups' hashes, fed in order: the name's length, the name,
/// then each group's hash.
pub(crate) struct Digest(blake2b_simd::State);

impl Digest {
    pub(crate) fn new(name: &str) -> Digest {
        let mut state = params(b"sluice xds large").to_state();
        state.update(&name_len(name)).update(name.as_bytes());
        Digest(state)
    }

    pub(crate) fn group(&mut self, digest: &[u8; 32]) {
        self.0.update(digest);
    }

    pub(crate) fn finish(&self) -> [u8; 32] {
        digest_bytes(&self.0.finalize())
    }
}

/// The digest of resource `name` with encoded bytes `bytes`: its top-level fields are read in
/// order, and groups end after each field but the first for which [`ends_group`] holds, and at
/// the end. Bytes that do not read as fields from some point on are one field to the end.
pub(crate) fn large_digest(name: &str, bytes: &[u8]) -> [u8; 32] {
    let mut digest = Digest::new(name);
    for group in groups(bytes) {
        digest.group(&group_digest(&bytes[group]));
    }
    digest.finish()
}

/// The groups of `bytes`, in order, as [`large_digest`] cuts them.
fn groups(bytes: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let (mut start, mut at) = (0, 0);
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let field = at;
            let (value, end) = field_at(bytes, field).unwrap_or((at..bytes.len(), bytes.len()));
            at = end;
            if field > 0 && ends_group(&bytes[value], end - field) {
                let group = start..end;
                start = end;
                return Some(group);
            }
        }
        (start < bytes.len()).then(|| {
            let group = start..bytes.len();
            start = bytes.len();
            group
        })
    })
}

/// The field that starts at `at`: where its value is, and where it ends. None if the bytes
/// there are not a whole field.
fn field_at(bytes: &[u8], at: usize) -> Option<(Range<usize>, usize)> {
    let (key, after_key) = varint_at(bytes, at)?;
    let (start, len) = match key & 7 {
        // varint
        0 => (after_key, varint_at(bytes, after_key)?.1 - after_key),
        // 64-bit
        1 => (after_key, 8),
        // length-delimited
        2 => {
            let (len, after_len) = varint_at(bytes, after_key)?;
            (after_len, usize::try_from(len).ok()?)
        }
        // 32-bit
        5 => (after_key, 4),
        // groups (deprecated) and wire types that do not exist
        _ => return None,
    };
    let end = start.checked_add(len).filter(|&end| end <= bytes.len())?;
    Some((start..end, end))
}

/// The varint at `at` and where it ends (prost's decoding: at most ten bytes).
fn varint_at(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut rest = bytes.get(at..)?;
    let before = rest.len();
    let value = prost::encoding::decode_varint(&mut rest).ok()?;
    Some((value, at + before - rest.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use sluice_core::test_rng::Rng;

    /// A message of `n` length-delimited fields of 20 to 300 bytes each, after a name field.
    fn message(rng: &mut Rng, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::string::encode(1, &"http".to_string(), &mut out);
        for i in 0..n {
            let body: Vec<u8> = (0..20 + rng.below(280))
                .map(|j| (i * 31 + j) as u8)
                .collect();
            prost::encoding::bytes::encode(2, &body, &mut out);
        }
        out
    }

    /// The groups `large_digest` makes of `bytes`, as byte ranges.
    fn groups(bytes: &[u8]) -> Vec<Range<usize>> {
        super::groups(bytes).collect()
    }

    #[test]
    fn fields_are_read_as_prost_writes_them() {
        use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
        use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
        let config = RouteConfiguration {
            name: "http".into(),
            virtual_hosts: (0..3)
                .map(|i| VirtualHost {
                    name: format!("host-{i}"),
                    domains: vec![format!("host-{i}")],
                    ..Default::default()
                })
                .collect(),
            validate_clusters: Some(BoolValue { value: true }),
            most_specific_header_mutations_wins: true,
            max_direct_response_body_size_bytes: Some(UInt32Value { value: 9 }),
            ..Default::default()
        };
        let bytes = config.encode_to_vec();
        let mut at = 0;
        let mut fields = Vec::new();
        while at < bytes.len() {
            let (value, end) = field_at(&bytes, at).expect("a whole field");
            fields.push(bytes[value].to_vec());
            at = end;
        }
        let hosts: Vec<Vec<u8>> = config
            .virtual_hosts
            .iter()
            .map(|v| v.encode_to_vec())
            .collect();
        assert_eq!(fields.len(), 7, "name, three hosts, two wrappers, a bool");
        assert_eq!(fields[0], b"http");
        assert_eq!(fields[1..4], hosts[..]);
        // Fixed-size and varint fields, and what is not a field.
        assert_eq!(field_at(&[0x0d, 1, 2, 3, 4], 0), Some((1..5, 5)));
        assert_eq!(
            field_at(&[0x09, 1, 2, 3, 4, 5, 6, 7, 8], 0),
            Some((1..9, 9))
        );
        assert_eq!(field_at(&[0x08, 0x96, 0x01], 0), Some((1..3, 3)));
        assert_eq!(field_at(&[0x0d, 1, 2, 3], 0), None);
        assert_eq!(field_at(&[0x12, 5, 1], 0), None);
        assert_eq!(field_at(&[0x0b], 0), None);
        assert_eq!(field_at(&[0x08, 0x80], 0), None);
        assert_eq!(field_at(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 1], 0), None);
    }

    #[test]
    fn groups_hold_about_group_bytes() {
        let mut rng = Rng::new(7);
        let bytes = message(&mut rng, 6_000);
        let groups = groups(&bytes);
        let mean = bytes.len() / groups.len();
        assert!(
            (GROUP_BYTES as usize / 2..GROUP_BYTES as usize * 2).contains(&mean),
            "{} groups of {mean} bytes on average in {} bytes",
            groups.len(),
            bytes.len()
        );
        // A field of GROUP_BYTES or more always ends its group.
        assert!(ends_group(&[], GROUP_BYTES as usize));
    }

    #[test]
    fn the_digest_follows_every_byte_and_the_name() {
        let mut rng = Rng::new(11);
        let bytes = message(&mut rng, 800);
        let digest = large_digest("http", &bytes);
        assert_eq!(digest, large_digest("http", &bytes.clone()));
        assert_ne!(digest, large_digest("https", &bytes));
        assert_ne!(digest, large_digest("http", &bytes[..bytes.len() - 1]));
        for _ in 0..200 {
            let mut changed = bytes.clone();
            let i = rng.below(changed.len());
            changed[i] ^= 1 << rng.below(8);
            assert_ne!(digest, large_digest("http", &changed), "byte {i}");
        }
        // Bytes that are not fields are hashed all the same.
        let mut broken = bytes.clone();
        broken.extend_from_slice(&[0x12, 0xff]);
        assert_ne!(digest, large_digest("http", &broken));
        let junk: Vec<u8> = (0..70_000).map(|i| (i % 7) as u8 | 0x80).collect();
        let mut junk2 = junk.clone();
        junk2[60_000] = 0;
        assert_ne!(large_digest("r", &junk), large_digest("r", &junk2));
    }

    #[test]
    fn small_digests_side_by_side_are_those_one_at_a_time() {
        let mut rng = Rng::new(23);
        // Lengths around the 128-byte blocks and the batches, names of every length up to 40.
        let resources: Vec<(String, Vec<u8>)> = (0..300)
            .map(|i| {
                let name: String = (0..rng.below(41))
                    .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
                    .collect();
                let len = [0, 1, 90, 123, 124, 127, 128, 129, 255, 256, 1000][rng.below(11)]
                    + rng.below(3);
                let bytes = (0..len).map(|j| (i * 7 + j * 13) as u8).collect();
                (name, bytes)
            })
            .collect();
        let refs: Vec<(&str, &[u8])> = (resources.iter())
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let one_at_a_time: Vec<[u8; 32]> = refs.iter().map(|(n, b)| small_digest(n, b)).collect();
        assert_eq!(small_digests(&refs), one_at_a_time);
        assert!(small_digests(&[]).is_empty());
        // The split between name and bytes counts.
        assert_ne!(small_digest("ab", b"c"), small_digest("a", b"bc"));
        assert_ne!(small_digest("", b"abc"), small_digest("abc", b""));
        // BLAKE2b-256 with sluice's personalization, as the crate's one-shot hash computes it.
        let mut input = 1u32.to_le_bytes().to_vec();
        input.extend_from_slice(b"rbody");
        let reference = blake2b_simd::Params::new()
            .hash_length(32)
            .personal(b"sluice xds small")
            .hash(&input);
        assert_eq!(small_digest("r", b"body")[..], reference.as_bytes()[..]);
    }

    #[test]
    fn a_small_resource_cannot_hash_like_a_large_one() {
        use crate::translate::ResourceType;
        use crate::xds::cache::{Body, Resource};
        let mut rng = Rng::new(17);
        let bytes = message(&mut rng, 800);
        assert!(bytes.len() >= crate::xds::cache::LARGE);
        // What the large digest hashes after the name: the groups' hashes, which a small
        // resource of the same name could hold as its bytes.
        let hashes: Vec<u8> = groups(&bytes)
            .into_iter()
            .flat_map(|g| group_digest(&bytes[g]))
            .collect();
        let t = ResourceType::Route;
        let large = Resource::new("http", Body::new(t, bytes));
        let small = Resource::new("http", Body::new(t, hashes));
        assert!(!large.same_content(&small));
        assert_ne!(large.version, small.version);
    }

    #[test]
    fn a_field_added_leaves_the_other_groups_alone() {
        let mut rng = Rng::new(13);
        let bytes = message(&mut rng, 3_000);
        let before = groups(&bytes);
        // A field inserted in the middle, after the field that starts at `at`.
        let cut = before[before.len() / 2].start + 1;
        let mut at = 0;
        while at < cut {
            at = field_at(&bytes, at).unwrap().1;
        }
        let mut changed = bytes[..at].to_vec();
        prost::encoding::bytes::encode(2, &vec![7u8; 90], &mut changed);
        let added = changed.len() - at;
        changed.extend_from_slice(&bytes[at..]);
        let after = groups(&changed);
        let moved = |r: &Range<usize>| r.start + added..r.end + added;
        let same_before = before
            .iter()
            .zip(&after)
            .take_while(|(a, b)| a == b)
            .count();
        let same_after = before
            .iter()
            .rev()
            .zip(after.iter().rev())
            .take_while(|(a, b)| moved(a) == **b)
            .count();
        assert!(
            same_before + same_after + 1 >= before.len(),
            "{} groups, {same_before} the same before the new field, {same_after} after it",
            before.len()
        );
    }
}
