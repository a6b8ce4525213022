#![forbid(unsafe_code)]
//! sluice's core: the API types, the object store, validation and the routing model with its
//! full and incremental builds. Pure: no I/O, no async runtime. The layers above (the xDS
//! encoder and server, the Kubernetes sources and status writer, the admission webhook) depend
//! on this crate, never the other way round (docs/architecture.md).

pub mod api;
pub mod dag;
pub mod manifest;
pub mod pmap;
pub mod route_match;
pub mod store;
pub mod synth;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_rng;
pub mod validate;
