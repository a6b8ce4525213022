//! Wiring of `sluice serve`.

pub mod cluster;
