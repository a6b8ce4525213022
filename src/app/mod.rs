//! Standalone-mode wiring.
