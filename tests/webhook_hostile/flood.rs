//! The HTTP/2 stream floods: raw HTTP/2 frames opening many streams per connection and
//! trickling their bodies as fast as flow control lets them.

use super::*;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const REFUSED_STREAM: u32 = 0x7;

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HEADERS block (HPACK, literals without Huffman) for `POST /validate` announcing a body.
pub fn request_headers() -> Vec<u8> {
    let mut h = vec![0x83, 0x87]; // :method POST, :scheme https (static table)
    let mut literal = |name_index: u8, name: &str, value: &str| {
        if name_index > 0 {
            h.push(name_index); // literal without indexing, indexed name (index < 15)
        } else {
            h.push(0);
            h.push(name.len() as u8);
            h.extend_from_slice(name.as_bytes());
        }
        h.push(value.len() as u8);
        h.extend_from_slice(value.as_bytes());
    };
    literal(4, "", "/validate"); // :path
    literal(1, "", "localhost"); // :authority
    literal(0, "content-type", "application/json");
    literal(0, "content-length", &SLOW_ANNOUNCED.to_string());
    h
}

#[derive(Debug, Default)]
pub struct FloodStats {
    pub connections: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS sluice advertised (the largest seen; None: unlimited).
    pub max_streams: Option<u32>,
    pub opened: usize,
    pub refused: usize,
    /// Streams sluice ended (a response or a reset other than REFUSED_STREAM).
    pub ended: usize,
    /// The longest an accepted stream stayed open.
    pub longest: Duration,
    pub goaways: usize,
}

/// What the reader learned of a connection, shared with the writer.
#[derive(Debug, Default)]
pub struct H2State {
    pub settings_seen: bool,
    /// Flow-control windows: the connection's and each stream's (initial: the peer's setting).
    pub conn_window: i64,
    pub initial_window: i64,
    pub windows: BTreeMap<u32, i64>,
    /// Streams open, with the time their HEADERS went out.
    pub open: BTreeMap<u32, Instant>,
    pub closed: bool,
}

pub async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R) -> io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    rd.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    if len > 1 << 20 {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload).await?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Ok((head[3], head[4], stream, payload))
}

pub async fn read_h2(
    mut rd: ReadHalf<TlsStream<TcpStream>>,
    wr: Arc<Mutex<WriteHalf<TlsStream<TcpStream>>>>,
    state: Arc<std::sync::Mutex<H2State>>,
    stats: Arc<std::sync::Mutex<FloodStats>>,
) {
    // Bounded: the connection ends (sluice closes it, or the caller drops this task).
    while let Ok((kind, flags, stream, payload)) = read_frame(&mut rd).await {
        let mut reply = None;
        {
            let mut st = state.lock().unwrap();
            let mut stats = stats.lock().unwrap();
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    for s in payload.chunks_exact(6) {
                        let id = u16::from_be_bytes([s[0], s[1]]);
                        let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                        match id {
                            0x3 => stats.max_streams = Some(stats.max_streams.unwrap_or(0).max(v)),
                            0x4 => st.initial_window = v as i64,
                            _ => {}
                        }
                    }
                    st.settings_seen = true;
                    reply = Some(frame(SETTINGS, ACK, 0, &[]));
                }
                PING if flags & ACK == 0 => reply = Some(frame(PING, ACK, 0, &payload)),
                WINDOW_UPDATE if payload.len() == 4 => {
                    let n = (u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & 0x7fff_ffff) as i64;
                    if stream == 0 {
                        st.conn_window += n;
                    } else if let Some(w) = st.windows.get_mut(&stream) {
                        *w += n;
                    }
                }
                RST_STREAM | HEADERS if stream != 0 => {
                    if let Some(opened) = st.open.remove(&stream) {
                        st.windows.remove(&stream);
                        let code = (payload.len() >= 4).then(|| {
                            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        });
                        if kind == RST_STREAM && code == Some(REFUSED_STREAM) {
                            stats.refused += 1;
                        } else {
                            stats.ended += 1;
                            stats.longest = stats.longest.max(opened.elapsed());
                        }
                    }
                }
                GOAWAY => stats.goaways += 1,
                _ => {}
            }
        }
        if let Some(f) = reply {
            let _ = wr.lock().await.write_all(&f).await;
        }
    }
    state.lock().unwrap().closed = true;
}

/// One HTTP/2 connection: opens `FLOOD_STREAMS` streams at once, then sends 1 KiB of body on
/// every open stream every 100 ms as far as flow control allows, until sluice closes it.
pub async fn flood_once(
    tls: &TlsConnector,
    addr: SocketAddr,
    until: Instant,
    stop: &mut watch::Receiver<bool>,
    stats: &Arc<std::sync::Mutex<FloodStats>>,
) -> io::Result<()> {
    let stream = tls_from(tls, HOSTILE, addr).await?;
    let (rd, wr) = tokio::io::split(stream);
    let wr = Arc::new(Mutex::new(wr));
    let state = Arc::new(std::sync::Mutex::new(H2State {
        conn_window: 65_535,
        initial_window: 65_535,
        ..H2State::default()
    }));
    {
        let mut w = wr.lock().await;
        w.write_all(PREFACE).await?;
        w.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    }
    stats.lock().unwrap().connections += 1;
    let reader = tokio::spawn(read_h2(
        rd,
        Arc::clone(&wr),
        Arc::clone(&state),
        Arc::clone(stats),
    ));
    // Wait for sluice's SETTINGS (and let the reader acknowledge them) before the flood.
    let settled = Instant::now() + Duration::from_secs(3);
    while !state.lock().unwrap().settings_seen && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let headers = request_headers();
    {
        let mut w = wr.lock().await;
        let mut burst = Vec::new();
        {
            let mut st = state.lock().unwrap();
            for i in 0..FLOOD_STREAMS {
                let id = 1 + 2 * i;
                burst.extend(frame(HEADERS, END_HEADERS, id, &headers));
                st.open.insert(id, Instant::now());
                let initial = st.initial_window;
                st.windows.insert(id, initial);
            }
        }
        stats.lock().unwrap().opened += FLOOD_STREAMS as usize;
        w.write_all(&burst).await?;
    }
    let chunk = vec![b' '; 1024];
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = over(stop, until) => break,
            _ = tick.tick() => {}
        }
        let mut out = Vec::new();
        {
            let mut st = state.lock().unwrap();
            if st.closed || st.open.is_empty() {
                break;
            }
            let ids: Vec<u32> = st.open.keys().copied().collect();
            for id in ids {
                let w = st.windows.get(&id).copied().unwrap_or(0);
                if w < chunk.len() as i64 || st.conn_window < chunk.len() as i64 {
                    continue;
                }
                st.conn_window -= chunk.len() as i64;
                st.windows.insert(id, w - chunk.len() as i64);
                out.extend(frame(DATA, 0, id, &chunk));
            }
        }
        if !out.is_empty() {
            let write = async { wr.lock().await.write_all(&out).await };
            // A write blocked by a full socket is given up after a while; a failed one ends it.
            if let Ok(Err(_)) = tokio::time::timeout(Duration::from_millis(500), write).await {
                break;
            }
        }
    }
    // Streams still open when the attack ended count with the age they reached.
    {
        let st = state.lock().unwrap();
        let mut stats = stats.lock().unwrap();
        for opened in st.open.values() {
            stats.longest = stats.longest.max(opened.elapsed());
        }
    }
    reader.abort();
    let _ = reader.await;
    Ok(())
}

pub async fn flood_client(
    tls: TlsConnector,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> FloodStats {
    let stats = Arc::new(std::sync::Mutex::new(FloodStats::default()));
    let mut attempts = 0;
    while Instant::now() < until && attempts < MAX_ATTEMPTS && !*stop.borrow() {
        attempts += 1;
        if flood_once(&tls, addr, until, &mut stop, &stats)
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Arc::try_unwrap(stats).unwrap().into_inner().unwrap()
}
