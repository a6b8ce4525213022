//! sluice standalone + Envoy, started for one test.
