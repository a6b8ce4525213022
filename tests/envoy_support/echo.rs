//! Stream backends on 127.0.0.1 for the TCPRoute and TLSRoute tests: each greets a connection
//! with its name and a newline, then echoes what it reads until the peer closes (at most 1 MiB,
//! at most 30 s per connection). Plain TCP, or TLS it terminates itself with a certificate of the
//! test's (a passthrough backend).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub struct EchoBackend {
    pub port: u16,
    connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoBackend {
    /// A plain TCP backend.
    pub async fn start(name: &str) -> EchoBackend {
        EchoBackend::start_with(name, None).await
    }

    /// A backend that terminates TLS with `tls` first, when given.
    pub async fn start_with(name: &str, tls: Option<TlsAcceptor>) -> EchoBackend {
        let listener = (TcpListener::bind("127.0.0.1:0").await).expect("bind an echo backend");
        let port = listener.local_addr().expect("echo backend address").port();
        let connections = Arc::new(AtomicU64::new(0));
        let (greeting, count) = (format!("{name}\n"), connections.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (tls, greeting) = (tls.clone(), greeting.clone());
                tokio::spawn(tokio::time::timeout(Duration::from_secs(30), async move {
                    match tls {
                        None => greet_and_echo(stream, &greeting).await,
                        Some(acceptor) => {
                            if let Ok(tls) = acceptor.accept(stream).await {
                                greet_and_echo(tls, &greeting).await;
                            }
                        }
                    }
                }));
            }
        });
        EchoBackend {
            port,
            connections,
            task,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for EchoBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn greet_and_echo(mut stream: impl AsyncRead + AsyncWrite + Unpin, greeting: &str) {
    if stream.write_all(greeting.as_bytes()).await.is_err() {
        return;
    }
    let (mut buf, mut echoed) = (vec![0u8; 4096], 0usize);
    while let Ok(n @ 1..) = stream.read(&mut buf).await {
        echoed += n;
        if echoed > 1 << 20 || stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
