#![forbid(unsafe_code)]
//! sluice's xDS layer: the routing model translated into Envoy resources (`translate`, with the
//! incremental encoder production runs) and served to Envoy (`xds`: the versioned resource cache,
//! the stream state machine, the tonic server). Depends on sluice-core for the model.

pub mod translate;
pub mod xds;
