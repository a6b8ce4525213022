//! xDS cache and ADS server.
