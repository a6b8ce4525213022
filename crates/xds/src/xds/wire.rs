//! The ADS responses as they go on the wire: `DiscoveryResponse` and `DeltaDiscoveryResponse`
//! written straight from the snapshot's shared resources.
//!
//! The generated envoy-types messages own their resources (`Any` holds a `Vec<u8>`), so building
//! one copied every resource it carried: per connected client, the whole 630 KB HTTP route
//! configuration of 6,000 hosts on every routing change. These messages hold the snapshot's
//! `Arc<Resource>`s instead and encode them in place; the bytes are what prost writes for the
//! generated messages with the same content (the tests decode them as such). They are only ever
//! encoded: decoding one skips every field. The server sends them as [`Frames::of`] cuts them,
//! large resource bodies as the snapshot's own bytes, so that not even the gRPC framing copies
//! them.

use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryResponse, DiscoveryResponse, Resource as DeltaResource,
};
use prost::bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::encoding::{DecodeContext, WireType, encoded_len_varint, key_len, message, string};
use prost::{DecodeError, Message};

use super::cache::{Body, Resource};
use super::wire_encode::{bytes_len, put_bytes, put_head, put_string, string_len};

/// `DiscoveryResponse` (state of the world) with the snapshot's resources.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SotwResponse {
    pub version_info: String,
    pub resources: Vec<Arc<Resource>>,
    pub type_url: &'static str,
    pub nonce: String,
}

/// `DeltaDiscoveryResponse` with the snapshot's resources.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeltaResponse {
    pub system_version_info: String,
    pub resources: Vec<Arc<Resource>>,
    pub type_url: &'static str,
    pub removed_resources: Vec<String>,
    pub nonce: String,
}

impl SotwResponse {
    /// The generated message with the same content (a copy of every resource).
    pub fn to_proto(&self) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: self.version_info.clone(),
            resources: self.resources.iter().map(|r| r.body.to_any()).collect(),
            type_url: self.type_url.to_string(),
            nonce: self.nonce.clone(),
            ..Default::default()
        }
    }
}

impl DeltaResponse {
    /// The generated message with the same content (a copy of every resource).
    pub fn to_proto(&self) -> DeltaDiscoveryResponse {
        DeltaDiscoveryResponse {
            system_version_info: self.system_version_info.clone(),
            resources: self
                .resources
                .iter()
                .map(|r| DeltaResource {
                    name: r.name.to_string(),
                    version: r.version.to_string(),
                    resource: Some(r.body.to_any()),
                    ..Default::default()
                })
                .collect(),
            type_url: self.type_url.to_string(),
            removed_resources: self.removed_resources.clone(),
            nonce: self.nonce.clone(),
            ..Default::default()
        }
    }
}

/// The `prost::Message::merge_field` of a message that is only ever encoded: decoding skips
/// every field.
fn skip_field(
    tag: u32,
    wire_type: WireType,
    buf: &mut impl Buf,
    ctx: DecodeContext,
) -> Result<(), DecodeError> {
    prost::encoding::skip_field(wire_type, tag, buf, ctx)
}

/// Where a response's encoding goes: its fields into a buffer, its resource bodies as
/// [`Out::body`] decides.
trait Out {
    type Buf: BufMut;
    fn buf(&mut self) -> &mut Self::Buf;
    /// Field `tag`: the body of `r`, as the `Any` it stands for.
    fn body(&mut self, tag: u32, r: &Arc<Resource>);
}

/// Everything copied into one buffer (`prost::Message::encode`).
struct Copied<'a, B>(&'a mut B);

impl<B: BufMut> Out for Copied<'_, B> {
    type Buf = B;
    fn buf(&mut self) -> &mut B {
        self.0
    }
    fn body(&mut self, tag: u32, r: &Arc<Resource>) {
        message::encode(tag, &r.body, self.0);
    }
}

/// A resource body at least this long goes on the wire as the bytes the snapshot holds; a
/// shorter one is copied into the message's buffer with the fields around it (a chunk of its
/// own would cost the HTTP/2 layer more than the copy).
pub const SHARED_BODY_MIN: usize = 16 * 1024;

/// One response as a gRPC message in chunks ([`Frames::of`]).
pub struct Frames {
    /// The fields between two shared bodies (with the 5-byte gRPC prefix at the start): one
    /// allocation, split at each shared body.
    buf: BytesMut,
    chunks: Vec<Bytes>,
}

/// A response that goes out through [`Frames::of`].
pub trait GrpcMessage: Message {
    /// The lengths of the bodies that go out shared, not copied.
    fn shared_len(&self) -> usize;
    /// Writes the response's fields to `frames`.
    fn write_frames(&self, frames: &mut Frames);
}

impl GrpcMessage for SotwResponse {
    fn shared_len(&self) -> usize {
        shared_len(&self.resources)
    }
    fn write_frames(&self, frames: &mut Frames) {
        self.write(frames);
    }
}

impl GrpcMessage for DeltaResponse {
    fn shared_len(&self) -> usize {
        shared_len(&self.resources)
    }
    fn write_frames(&self, frames: &mut Frames) {
        self.write(frames);
    }
}

fn shared_len(resources: &[Arc<Resource>]) -> usize {
    resources
        .iter()
        .map(|r| r.body.value.len())
        .filter(|&len| len >= SHARED_BODY_MIN)
        .sum()
}

/// Why a response cannot go out as one gRPC message.
#[derive(Debug, thiserror::Error)]
#[error("an xDS response of {0} bytes is over gRPC's limit of 4 GiB per message")]
pub struct TooLarge(pub usize);

impl Frames {
    /// `message` as a gRPC message in chunks: its 5-byte prefix (not compressed, the length) and
    /// its fields copied, each resource body of [`SHARED_BODY_MIN`] bytes or more as the
    /// snapshot's own bytes. A push of the HTTP route configuration (630 KB at 6,000 hosts) thus
    /// copies ~100 bytes per client instead of all of it. The chunks, one after the other, are
    /// the prefix and `message.encode_to_vec()`.
    pub fn of(message: &impl GrpcMessage) -> Result<Vec<Bytes>, TooLarge> {
        let len = message.encoded_len();
        let prefix_len = u32::try_from(len).map_err(|_| TooLarge(len))?;
        let mut frames = Frames {
            buf: BytesMut::with_capacity(5 + len - message.shared_len()),
            chunks: Vec::new(),
        };
        frames.buf.put_u8(0);
        frames.buf.put_u32(prefix_len);
        message.write_frames(&mut frames);
        if !frames.buf.is_empty() {
            frames.chunks.push(frames.buf.split().freeze());
        }
        Ok(frames.chunks)
    }
}

impl Out for Frames {
    type Buf = BytesMut;
    fn buf(&mut self) -> &mut BytesMut {
        &mut self.buf
    }
    fn body(&mut self, tag: u32, r: &Arc<Resource>) {
        let value = &r.body.value;
        if value.len() < SHARED_BODY_MIN {
            message::encode(tag, &r.body, &mut self.buf);
            return;
        }
        let buf = &mut self.buf;
        put_head(tag, r.body.encoded_len(), buf);
        put_string(ANY_TYPE_URL, &r.body.type_url, buf);
        put_head(ANY_VALUE, value.len(), buf);
        self.chunks.push(self.buf.split().freeze());
        self.chunks.push(Bytes::from_owner(SharedBody(r.clone())));
    }
}

/// A resource's encoded body as a chunk of a response, kept alive by the chunk.
struct SharedBody(Arc<Resource>);

impl AsRef<[u8]> for SharedBody {
    fn as_ref(&self) -> &[u8] {
        &self.0.body.value
    }
}

// Field numbers of google.protobuf.Any.
const ANY_TYPE_URL: u32 = 1;
const ANY_VALUE: u32 = 2;

/// A resource's body goes on the wire as the `Any` it stands for.
impl Message for Body {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        put_string(ANY_TYPE_URL, &self.type_url, buf);
        put_bytes(ANY_VALUE, &self.value, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        skip_field(tag, wire_type, buf, ctx)
    }

    fn clear(&mut self) {
        *self = Self::default();
    }

    fn encoded_len(&self) -> usize {
        string_len(ANY_TYPE_URL, &self.type_url) + bytes_len(ANY_VALUE, &self.value)
    }
}

// Field numbers of envoy.service.discovery.v3.DiscoveryResponse.
const SOTW_VERSION_INFO: u32 = 1;
const SOTW_RESOURCES: u32 = 2;
const SOTW_TYPE_URL: u32 = 4;
const SOTW_NONCE: u32 = 5;

impl SotwResponse {
    /// Writes the message's fields to `out`, each resource body through [`Out::body`].
    fn write<O: Out>(&self, out: &mut O) {
        put_string(SOTW_VERSION_INFO, &self.version_info, out.buf());
        for r in &self.resources {
            out.body(SOTW_RESOURCES, r);
        }
        put_string(SOTW_TYPE_URL, self.type_url, out.buf());
        put_string(SOTW_NONCE, &self.nonce, out.buf());
    }
}

impl Message for SotwResponse {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.write(&mut Copied(buf));
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        skip_field(tag, wire_type, buf, ctx)
    }

    fn clear(&mut self) {
        *self = Self::default();
    }

    fn encoded_len(&self) -> usize {
        string_len(SOTW_VERSION_INFO, &self.version_info)
            + self
                .resources
                .iter()
                .map(|r| message::encoded_len(SOTW_RESOURCES, &r.body))
                .sum::<usize>()
            + string_len(SOTW_TYPE_URL, self.type_url)
            + string_len(SOTW_NONCE, &self.nonce)
    }
}

// Field numbers of envoy.service.discovery.v3.DeltaDiscoveryResponse and of its Resource.
const DELTA_SYSTEM_VERSION_INFO: u32 = 1;
const DELTA_RESOURCES: u32 = 2;
const DELTA_TYPE_URL: u32 = 4;
const DELTA_NONCE: u32 = 5;
const DELTA_REMOVED_RESOURCES: u32 = 6;
const RESOURCE_VERSION: u32 = 1;
const RESOURCE_BODY: u32 = 2;
const RESOURCE_NAME: u32 = 3;

/// The length of a delta `Resource` holding `r`: version, body (an `Any`) and name.
fn delta_resource_len(r: &Resource) -> usize {
    string_len(RESOURCE_VERSION, &r.version)
        + message::encoded_len(RESOURCE_BODY, &r.body)
        + string_len(RESOURCE_NAME, &r.name)
}

impl DeltaResponse {
    /// Writes the message's fields to `out`, each resource body through [`Out::body`].
    fn write<O: Out>(&self, out: &mut O) {
        put_string(
            DELTA_SYSTEM_VERSION_INFO,
            &self.system_version_info,
            out.buf(),
        );
        for r in &self.resources {
            let buf = out.buf();
            put_head(DELTA_RESOURCES, delta_resource_len(r), buf);
            put_string(RESOURCE_VERSION, &r.version, buf);
            out.body(RESOURCE_BODY, r);
            put_string(RESOURCE_NAME, &r.name, out.buf());
        }
        let buf = out.buf();
        put_string(DELTA_TYPE_URL, self.type_url, buf);
        put_string(DELTA_NONCE, &self.nonce, buf);
        for name in &self.removed_resources {
            string::encode(DELTA_REMOVED_RESOURCES, name, buf);
        }
    }
}

impl Message for DeltaResponse {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.write(&mut Copied(buf));
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        skip_field(tag, wire_type, buf, ctx)
    }

    fn clear(&mut self) {
        *self = Self::default();
    }

    fn encoded_len(&self) -> usize {
        string_len(DELTA_SYSTEM_VERSION_INFO, &self.system_version_info)
            + self
                .resources
                .iter()
                .map(|r| {
                    let len = delta_resource_len(r);
                    key_len(DELTA_RESOURCES) + encoded_len_varint(len as u64) + len
                })
                .sum::<usize>()
            + string_len(DELTA_TYPE_URL, self.type_url)
            + string_len(DELTA_NONCE, &self.nonce)
            + string::encoded_len_repeated(DELTA_REMOVED_RESOURCES, &self.removed_resources)
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Any;

    use super::*;

    fn resource(name: &str, value: Vec<u8>) -> Arc<Resource> {
        let body = Any {
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            value,
        };
        Arc::new(Resource::new(name, body.into()))
    }

    fn resources() -> Vec<Arc<Resource>> {
        vec![
            resource("a", b"first".to_vec()),
            // Empty bytes, and a body long enough for a two-byte length.
            resource("b", Vec::new()),
            resource("c", (0..300).map(|i| (i % 251) as u8).collect()),
        ]
    }

    #[test]
    fn a_sotw_response_encodes_as_the_generated_message_does() {
        for resp in [
            SotwResponse::default(),
            SotwResponse {
                version_info: "v1".into(),
                resources: resources(),
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                nonce: "7".into(),
            },
        ] {
            let bytes = resp.encode_to_vec();
            assert_eq!(bytes.len(), resp.encoded_len());
            assert_eq!(bytes, resp.to_proto().encode_to_vec());
            assert_eq!(
                DiscoveryResponse::decode(&bytes[..]).unwrap(),
                resp.to_proto()
            );
        }
    }

    #[test]
    fn a_delta_response_decodes_as_the_generated_message_with_the_same_content() {
        for resp in [
            DeltaResponse::default(),
            DeltaResponse {
                system_version_info: "v2".into(),
                resources: resources(),
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                removed_resources: vec!["gone".into(), "".into()],
                nonce: "8".into(),
            },
        ] {
            let bytes = resp.encode_to_vec();
            assert_eq!(bytes.len(), resp.encoded_len());
            let decoded = DeltaDiscoveryResponse::decode(&bytes[..]).unwrap();
            assert_eq!(decoded, resp.to_proto());
            // Same fields, so prost's encoding of the decoded message has the same length.
            assert_eq!(decoded.encode_to_vec().len(), bytes.len());
        }
    }

    #[test]
    fn a_body_encodes_as_the_any_it_stands_for() {
        for any in [
            Any {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                value: b"bytes".to_vec(),
            },
            Any {
                type_url: "t".into(),
                value: Vec::new(),
            },
            Any::default(),
        ] {
            let body = Body::from(any.clone());
            assert_eq!(body.encode_to_vec(), any.encode_to_vec());
            assert_eq!(body.to_any(), any);
        }
    }

    /// The chunks of [`Frames::of`], one after the other.
    fn joined(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    /// The gRPC message of `bytes`: not compressed, the length, the bytes.
    fn grpc_message(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((bytes.len() as u32).to_be_bytes());
        out.extend(bytes);
        out
    }

    /// Resources around the shared size: just under, at and over it, among small ones.
    fn sized_resources() -> Vec<Arc<Resource>> {
        let body = |len: usize| (0..len).map(|i| (i % 253) as u8).collect::<Vec<u8>>();
        vec![
            resource("big", body(630_000)),
            resource("small", b"x".to_vec()),
            resource("under", body(SHARED_BODY_MIN - 1)),
            resource("at", body(SHARED_BODY_MIN)),
            resource("empty", Vec::new()),
            resource("last", body(SHARED_BODY_MIN + 1)),
        ]
    }

    #[test]
    fn frames_are_the_grpc_message_of_the_encoded_response() {
        let cases = [resources(), sized_resources(), Vec::new()];
        for resources in cases {
            let delta = DeltaResponse {
                system_version_info: "v3".into(),
                resources: resources.clone(),
                type_url: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                removed_resources: vec!["gone".into()],
                nonce: "9".into(),
            };
            let chunks = Frames::of(&delta).unwrap();
            assert_eq!(joined(&chunks), grpc_message(&delta.encode_to_vec()));
            let sotw = SotwResponse {
                version_info: "v3".into(),
                resources,
                type_url: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
                nonce: "9".into(),
            };
            let chunks = Frames::of(&sotw).unwrap();
            assert_eq!(joined(&chunks), grpc_message(&sotw.encode_to_vec()));
        }
        let empty = Frames::of(&DeltaResponse::default()).unwrap();
        assert_eq!(joined(&empty), [0, 0, 0, 0, 0]);
    }

    #[test]
    fn large_bodies_go_out_as_the_snapshot_holds_them() {
        let resources = sized_resources();
        let delta = DeltaResponse {
            resources: resources.clone(),
            nonce: "1".into(),
            ..Default::default()
        };
        let chunks = Frames::of(&delta).unwrap();
        let shared = |r: &Arc<Resource>| {
            chunks
                .iter()
                .any(|c| std::ptr::eq(c.as_ptr(), r.body.value.as_ptr()))
        };
        let by_name = |name: &str| resources.iter().find(|r| &*r.name == name).unwrap();
        for name in ["big", "at", "last"] {
            assert!(shared(by_name(name)), "{name} is not shared");
        }
        for name in ["small", "under"] {
            assert!(!shared(by_name(name)), "{name} is shared");
        }
        // The fields around them: before "big", between "big" and "at", between "at" and
        // "last", after "last".
        assert_eq!(chunks.len(), 7);
        assert_eq!(
            delta.shared_len(),
            630_000 + SHARED_BODY_MIN + SHARED_BODY_MIN + 1
        );
    }

    /// Responses of generated contents (names, versions, nonces and bodies of lengths around
    /// the varint boundaries and the shared size, empty ones included): the SotW response is
    /// prost's encoding of the generated message, the delta response decodes as it, and both go
    /// out in frames that join into their encoding.
    #[test]
    fn generated_responses_encode_as_the_generated_messages() {
        let mut rng = sluice_core::test_rng::Rng::new(31);
        let len = |rng: &mut sluice_core::test_rng::Rng| {
            [
                0,
                1,
                20,
                127,
                128,
                300,
                SHARED_BODY_MIN - 1,
                SHARED_BODY_MIN,
            ][rng.below(8)]
        };
        let text = |rng: &mut sluice_core::test_rng::Rng| -> String {
            let n = [0, 1, 8, 127, 128, 200][rng.below(6)];
            (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect()
        };
        for _ in 0..200 {
            let resources: Vec<Arc<Resource>> = (0..rng.below(5))
                .map(|_| {
                    let value = (0..len(&mut rng)).map(|i| (i % 251) as u8).collect();
                    resource(&text(&mut rng), value)
                })
                .collect();
            let sotw = SotwResponse {
                version_info: text(&mut rng),
                resources: resources.clone(),
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                nonce: text(&mut rng),
            };
            let bytes = sotw.encode_to_vec();
            assert_eq!(bytes, sotw.to_proto().encode_to_vec());
            assert_eq!(joined(&Frames::of(&sotw).unwrap()), grpc_message(&bytes));
            let delta = DeltaResponse {
                system_version_info: text(&mut rng),
                resources,
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                removed_resources: (0..rng.below(3)).map(|_| text(&mut rng)).collect(),
                nonce: text(&mut rng),
            };
            let bytes = delta.encode_to_vec();
            assert_eq!(bytes.len(), delta.encoded_len());
            let decoded = DeltaDiscoveryResponse::decode(&bytes[..]).unwrap();
            assert_eq!(decoded, delta.to_proto());
            assert_eq!(joined(&Frames::of(&delta).unwrap()), grpc_message(&bytes));
        }
    }

    #[test]
    fn decoding_one_skips_every_field() {
        let resp = DeltaResponse {
            nonce: "1".into(),
            resources: resources(),
            ..Default::default()
        };
        let bytes = resp.encode_to_vec();
        assert_eq!(
            DeltaResponse::decode(&bytes[..]).unwrap(),
            DeltaResponse::default()
        );
    }
}
