//! Loopback ports for the servers the tests start. Shared by the real-Envoy tests, the
//! standalone webhook tests and the e2e tests (each includes this file).

/// A free TCP port on 127.0.0.1 for a server a test starts (Envoy's listeners, its admin, sluice's
/// xDS), checked free by binding it, then released. Taken from below the kernel's ephemeral range
/// when there is room there: a port from that range (what binding port 0 gives) can be taken by
/// any outgoing connection in the moment between its release and the server's bind, and the
/// tests make many. Ports are handed out in turn from an offset of this process's id, so the
/// tests of one process never get the same port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(LOW);
    if span >= 1_000 {
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = LOW + (start + n) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return port as u16;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}
