//! Sample HTTP backends for the demo: `cargo run --example echo -- web=9101 api=9102 ...` serves
//! one backend per NAME=PORT on 127.0.0.1, each answering every request with its own name.

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut backends = Vec::new();
    for arg in std::env::args().skip(1) {
        let Some((name, port)) = arg.split_once('=') else {
            eprintln!("echo: {arg:?} must be NAME=PORT");
            return std::process::ExitCode::from(2);
        };
        let Ok(port) = port.parse::<u16>() else {
            eprintln!("echo: {arg:?}: the port must be a number 1-65535");
            return std::process::ExitCode::from(2);
        };
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("echo: 127.0.0.1:{port}: {e}");
                return std::process::ExitCode::from(1);
            }
        };
        eprintln!("echo: {name} on 127.0.0.1:{port}");
        backends.push(tokio::spawn(serve(name.to_string(), listener)));
    }
    if backends.is_empty() {
        eprintln!("usage: echo NAME=PORT [NAME=PORT ...]");
        return std::process::ExitCode::from(2);
    }
    let _ = tokio::signal::ctrl_c().await;
    std::process::ExitCode::SUCCESS
}

async fn serve(name: String, listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let name = name.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req: Request<Incoming>| {
                let name = name.clone();
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("x-backend", name.as_str())
                            .body(Full::new(Bytes::from(format!("{name}\n"))))
                            .unwrap_or_default(),
                    )
                }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
