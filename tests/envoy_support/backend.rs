//! Small HTTP backends on loopback that answer with their own name.
