//! xDS: the versioned resource cache, the per-stream protocol state machine (SotW and delta) and
//! the ADS gRPC server that moves messages between Envoys and the state machine.

pub mod cache;
pub(crate) mod content;
pub mod limits;
pub mod resources;
pub mod server;
pub mod stream;
pub mod tls;
pub mod wire;
pub(crate) mod wire_encode;

pub use cache::{Resource, Snapshot};
pub use server::{AdsServer, serve};
pub use stream::{Mode, Response, Stats, Stream};
pub use tls::XdsTls;
