//! The slow HTTP/1.1 clients: connections announcing large bodies, sending a burst of each
//! and trickling the rest.

use super::*;

#[derive(Debug, Default)]
pub struct SlowStats {
    pub attempts: usize,
    /// How sluice ended each request: an HTTP status, or 0 when it closed without one.
    pub endings: BTreeMap<u16, usize>,
    /// The longest a request stayed open (ended by sluice, or still open when the attack ended).
    pub longest: Duration,
}

/// Reads an HTTP/1.1 response head; its status, or 0 on EOF without one.
pub async fn read_status<R: AsyncRead + Unpin>(rd: &mut R) -> u16 {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while head.len() < 16 * 1024 {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    std::str::from_utf8(&head)
        .ok()
        .and_then(|h| h.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Sends `burst` bytes of body at once, then 1 KiB every 100 ms, forever; parks on a write
/// error (the reader then sees how sluice ended the request).
pub async fn trickle<W: AsyncWrite + Unpin>(wr: &mut W, burst: usize) {
    static CHUNK: [u8; 64 * 1024] = [b' '; 64 * 1024];
    let chunk = &CHUNK[..];
    let mut sent = 0;
    while sent < burst {
        if wr.write_all(chunk).await.is_err() {
            return std::future::pending().await;
        }
        sent += chunk.len();
    }
    let _ = wr.flush().await;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if wr.write_all(&chunk[..1024]).await.is_err() || wr.flush().await.is_err() {
            return std::future::pending().await;
        }
    }
}

pub async fn slow_body_client(
    tls: TlsConnector,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> SlowStats {
    let mut stats = SlowStats::default();
    while Instant::now() < until && stats.attempts < MAX_ATTEMPTS && !*stop.borrow() {
        let Ok(stream) = tls_from(&tls, HOSTILE, addr).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        stats.attempts += 1;
        let (mut rd, mut wr) = tokio::io::split(stream);
        let head = format!(
            "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {SLOW_ANNOUNCED}\r\n\r\n"
        );
        if wr.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let sent = Instant::now();
        let ended = tokio::select! {
            status = read_status(&mut rd) => Some(status),
            _ = trickle(&mut wr, SLOW_BURST) => None,
            _ = over(&mut stop, until) => None,
        };
        stats.longest = stats.longest.max(sent.elapsed());
        if let Some(status) = ended {
            *stats.endings.entry(status).or_default() += 1;
        }
    }
    stats
}
