//! A WebSocket backend on 127.0.0.1 for the real-Envoy tests.

/// A WebSocket server on loopback that answers each text message `m` with `name: m`.
pub async fn backend(name: &'static str) -> u16 {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if let Message::Text(text) = message
                        && ws
                            .send(Message::text(format!("{name}: {text}")))
                            .await
                            .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A WebSocket opened through the harness's Envoy to `host` and `path`, retried until the route
/// is there (Envoy answers 404 until then) or the harness's wait for convergence has passed.
pub async fn connect(
    h: &super::harness::Harness,
    host: &str,
    path: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use std::time::{Duration, Instant};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let deadline = Instant::now() + super::harness::CONVERGE;
    loop {
        let mut request = format!("ws://127.0.0.1:{}{path}", h.http_port)
            .into_client_request()
            .unwrap();
        request.headers_mut().insert("host", host.parse().unwrap());
        match tokio_tungstenite::connect_async(request).await {
            Ok((ws, response)) => {
                assert_eq!(response.status().as_u16(), 101);
                return ws;
            }
            Err(e) => assert!(
                Instant::now() < deadline,
                "no WebSocket through Envoy: {e}; Envoy log:\n{}",
                h.envoy_log_tail()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends `text` on `ws` and checks the answer is `expected` (within 5 s).
pub async fn exchange(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    text: &str,
    expected: &str,
) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    ws.send(Message::text(text)).await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next()).await;
    assert_eq!(
        answer.ok().flatten().and_then(Result::ok),
        Some(Message::text(expected))
    );
}
