//! sluice standalone (in-process) + a real Envoy, started for one test on free loopback ports.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sluice::app::standalone::{StandaloneConfig, run};
use sluice::cli::bootstrap::{BootstrapArgs, XdsProtocol, write_bootstrap};
use tokio::sync::oneshot;

use super::backend::Backend;

use super::{envoy_bin, free_port};

/// How long a test waits for configuration to reach Envoy.
pub const CONVERGE: Duration = Duration::from_secs(60);

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub manifests: PathBuf,
    pub http_port: u16,
    pub https_port: u16,
    pub admin_port: u16,
    pub xds_port: u16,
    /// Envoy's statistics listener (`sluice bootstrap --stats-address`).
    pub stats_port: u16,
    dag_options: sluice::dag::Options,
    translate_options: sluice::translate::Options,
    envoy: Child,
    stop: Option<oneshot::Sender<()>>,
    sluice: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    cfg: StandaloneConfig,
    client: reqwest::Client,
    /// With [`XdsLink::Relayed`]: the length of the largest HTTP/2 DATA frame sluice's xDS
    /// server has sent Envoy so far.
    pub largest_xds_data_frame: Option<Arc<AtomicU32>>,
}

/// How a harness carries Envoy's xDS connection to sluice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdsLink {
    /// Plain TCP, straight to sluice.
    Direct,
    /// Plain TCP through a relay that reads the HTTP/2 frames sluice sends
    /// ([`Harness::largest_xds_data_frame`]).
    Relayed,
    /// Mutual TLS (a CA, a server and a client certificate generated for the test).
    Mtls,
}

/// Relays each connection `listener` accepts to 127.0.0.1:`to`, both ways, and records in
/// `largest` the length of the largest HTTP/2 DATA frame coming back from `to` (an HTTP/2
/// server: its bytes are frames from the first on).
async fn relay(listener: tokio::net::TcpListener, to: u16, largest: Arc<AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    while let Ok((inbound, _)) = listener.accept().await {
        let largest = largest.clone();
        tokio::spawn(async move {
            let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                return;
            };
            let (mut from_client, mut to_client) = inbound.into_split();
            let (mut from_server, mut to_server) = outbound.into_split();
            let up = async {
                let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
                let _ = to_server.shutdown().await;
            };
            let down = async {
                let mut frames = FrameHeaders::default();
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                    frames.feed(&buf[..n], |kind, len| {
                        if kind == 0 {
                            largest.fetch_max(len, Ordering::Relaxed);
                        }
                    });
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = to_client.shutdown().await;
            };
            tokio::join!(up, down);
        });
    }
}

/// Reads the 9-byte frame headers of an HTTP/2 byte stream fed in arbitrary pieces.
#[derive(Default)]
struct FrameHeaders {
    head: Vec<u8>,
    /// Payload bytes of the current frame still to pass.
    skip: usize,
}

impl FrameHeaders {
    /// Feeds the next bytes; `each(type, length)` is called for every frame header completed.
    fn feed(&mut self, mut bytes: &[u8], mut each: impl FnMut(u8, u32)) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if let [a, b, c, kind, ..] = self.head[..]
                && self.head.len() == 9
            {
                let len = u32::from_be_bytes([0, a, b, c]);
                each(kind, len);
                self.skip = len as usize;
                self.head.clear();
            }
        }
    }
}

/// What a request got: the backend's name for a 200, else the status (and Location for redirects).
pub type Answer = String;

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_test_writer()
        .try_init();
}

impl Harness {
    /// Writes `files` into a fresh manifest directory, starts sluice on it and an Envoy fed by it,
    /// and waits until Envoy is ready.
    pub async fn start(files: &[(&str, String)], protocol: XdsProtocol) -> Harness {
        Self::start_with(files, protocol, sluice::dag::Options::default()).await
    }

    /// [`Harness::start`] over delta xDS with Gateways given addresses of `cidr`
    /// (`--gateway-addresses`).
    pub async fn start_with_addresses(files: &[(&str, String)], cidr: &str) -> Harness {
        let options = sluice::dag::Options {
            gateway_addresses: Some(cidr.parse().expect("CIDR")),
            ..sluice::dag::Options::default()
        };
        Self::start_with(files, XdsProtocol::Delta, options).await
    }

    /// [`Harness::start`] with routing options.
    pub async fn start_with(
        files: &[(&str, String)],
        protocol: XdsProtocol,
        dag_options: sluice::dag::Options,
    ) -> Harness {
        Self::start_full(files, protocol, dag_options, XdsLink::Direct, |_| {}).await
    }

    /// [`Harness::start_with`] with Envoy's listener settings changed by `configure`.
    pub async fn start_with_configured(
        files: &[(&str, String)],
        protocol: XdsProtocol,
        dag_options: sluice::dag::Options,
        configure: impl FnOnce(&mut sluice::translate::Options),
    ) -> Harness {
        Self::start_full(files, protocol, dag_options, XdsLink::Direct, configure).await
    }

    /// [`Harness::start`] with Envoy's listener settings changed by `configure` (the ports, the
    /// listen address and the access log file are the harness's).
    pub async fn start_configured(
        files: &[(&str, String)],
        protocol: XdsProtocol,
        configure: impl FnOnce(&mut sluice::translate::Options),
    ) -> Harness {
        let dag_options = sluice::dag::Options::default();
        let link = XdsLink::Direct;
        Self::start_full(files, protocol, dag_options, link, configure).await
    }

    /// sluice and Envoy serving one host `host` of namespace `ns`, its every path going to a
    /// backend `<ns>/app` started here, with Envoy's listener settings changed by `configure`.
    pub async fn start_one_host(
        ns: &str,
        host: &str,
        configure: impl FnOnce(&mut sluice::translate::Options),
    ) -> (Harness, Backend) {
        let app = Backend::start(&format!("{ns}/app")).await;
        let files = one_host(ns, host, &app);
        let h = Self::start_configured(&files, XdsProtocol::Delta, configure).await;
        (h, app)
    }

    /// [`Harness::start`] with Envoy's xDS connection carried as `link` says.
    pub async fn start_over(
        files: &[(&str, String)],
        protocol: XdsProtocol,
        link: XdsLink,
    ) -> Harness {
        Self::start_full(
            files,
            protocol,
            sluice::dag::Options::default(),
            link,
            |_| {},
        )
        .await
    }

    /// [`Harness::start`] with xDS over mutual TLS (a CA, a server and a client certificate
    /// generated for the test).
    pub async fn start_mtls(files: &[(&str, String)], protocol: XdsProtocol) -> Harness {
        Self::start_over(files, protocol, XdsLink::Mtls).await
    }

    async fn start_full(
        files: &[(&str, String)],
        protocol: XdsProtocol,
        dag_options: sluice::dag::Options,
        link: XdsLink,
        configure: impl FnOnce(&mut sluice::translate::Options),
    ) -> Harness {
        init_tracing();
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = (link == XdsLink::Mtls).then(|| write_pki(dir.path()));
        let xds_tls = pki.as_ref().map(|p| {
            sluice::app::serving::build_xds_tls(
                Some(&p.ca),
                Some(&p.server_cert),
                Some(&p.server_key),
            )
            .expect("xDS TLS")
            .expect("TLS configured")
        });
        let manifests = dir.path().join("manifests");
        std::fs::create_dir(&manifests).expect("mkdir manifests");
        for (name, text) in files {
            std::fs::write(manifests.join(name), text).expect("write manifest");
        }
        let (http_port, https_port, admin_port, xds_port, stats_port) = (
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            free_port(),
        );
        let mut translate_options = sluice::translate::Options {
            listen_address: "127.0.0.1".parse().unwrap(),
            http_port,
            https_port,
            // JSON, as `sluice serve` writes it by default, to a file the test can read.
            access_log: sluice::translate::access_log::AccessLog {
                format: sluice::translate::access_log::AccessLogFormat::Json,
                path: dir.path().join("access.log").display().to_string(),
            },
            ..Default::default()
        };
        configure(&mut translate_options);
        let cfg = StandaloneConfig {
            manifests: manifests.clone(),
            xds_address: format!("127.0.0.1:{xds_port}").parse().expect("addr"),
            xds_tls,
            dag_options: dag_options.clone(),
            translate_options: translate_options.clone(),
            debounce: Duration::from_millis(50),
            webhook: None,
            metrics_address: None,
        };
        let (stop, sluice) = spawn_sluice(cfg.clone());
        let (envoy_xds_port, largest_xds_data_frame) = if link == XdsLink::Relayed {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind the xDS relay");
            let port = listener.local_addr().expect("relay address").port();
            let largest = Arc::new(AtomicU32::new(0));
            tokio::spawn(relay(listener, xds_port, largest.clone()));
            (port, Some(largest))
        } else {
            (xds_port, None)
        };
        let bootstrap_path = dir.path().join("bootstrap.json");
        write_bootstrap(&BootstrapArgs {
            xds_address: format!("127.0.0.1:{envoy_xds_port}"),
            out: bootstrap_path.clone(),
            xds_ca: pki.as_ref().map(|p| p.ca.clone()),
            xds_cert: pki.as_ref().map(|p| p.client_cert.clone()),
            xds_key: pki.as_ref().map(|p| p.client_key.clone()),
            admin_port: Some(admin_port),
            admin_socket: None,
            node_id: "test".into(),
            node_cluster: "sluice-test".into(),
            xds_protocol: protocol,
            stats_address: Some(([127, 0, 0, 1], stats_port).into()),
            overload: Default::default(),
        })
        .expect("bootstrap");
        let envoy = Command::new(envoy_bin())
            .arg("-c")
            .arg(&bootstrap_path)
            .args(["--concurrency", "1", "--disable-hot-restart"])
            // As docs/xds.md "Running Envoy" recommends.
            .arg("--ignore-unknown-dynamic-fields")
            .args(["--log-level", "info", "--drain-time-s", "1"])
            // Access log lines reach the file within 0.1 s (Envoy's default is 10 s).
            .args(["--file-flush-interval-msec", "100"])
            .arg("--log-path")
            .arg(dir.path().join("envoy.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start envoy");
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client");
        let h = Harness {
            dir,
            manifests,
            http_port,
            https_port,
            admin_port,
            xds_port,
            stats_port,
            dag_options,
            translate_options,
            envoy,
            stop: Some(stop),
            sluice: Some(sluice),
            cfg,
            client,
            largest_xds_data_frame,
        };
        h.validate_snapshot();
        h.wait_ready().await;
        h
    }

    /// Stops sluice (Envoy keeps its configuration and tries to reconnect).
    pub async fn stop_sluice(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.sluice.take() {
            let r = tokio::time::timeout(Duration::from_secs(15), task).await;
            assert!(
                matches!(r, Ok(Ok(Ok(())))),
                "sluice did not stop cleanly: {r:?}"
            );
        }
    }

    /// Starts sluice again on the same address after [`Harness::stop_sluice`].
    pub fn start_sluice(&mut self) {
        let (stop, task) = spawn_sluice(self.cfg.clone());
        self.stop = Some(stop);
        self.sluice = Some(task);
    }

    /// Checks the snapshot the manifest directory produces now with `envoy --mode validate`.
    pub fn validate_snapshot(&self) {
        let snapshot = sluice::app::standalone::load_manifests(
            &self.manifests,
            &self.dag_options.ingress_class_name,
        )
        .expect("manifests load");
        let dag = sluice::dag::build(&snapshot, &self.dag_options);
        let resources = sluice::translate::build(&dag, &self.translate_options);
        super::assert_envoy_accepts(&resources, &self.manifests.display().to_string());
    }

    /// The lines of Envoy's access log so far, each a JSON object.
    pub fn access_log(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The last lines of Envoy's log, for failure messages.
    pub fn envoy_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + CONVERGE;
        loop {
            let url = format!("http://127.0.0.1:{}/ready", self.admin_port);
            if let Ok(r) = self.client.get(&url).send().await
                && r.status() == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Envoy not ready within {CONVERGE:?}; its log ends with:\n{}",
                self.envoy_log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// An Envoy admin page.
    pub async fn admin(&self, path: &str) -> String {
        let url = format!("http://127.0.0.1:{}{path}", self.admin_port);
        match self.client.get(&url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => format!("admin request failed: {e}"),
        }
    }

    /// Replaces (atomically) or adds a manifest file.
    pub fn write(&self, name: &str, text: &str) {
        let tmp = self.manifests.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).expect("write manifest");
        std::fs::rename(&tmp, self.manifests.join(name)).expect("rename manifest");
        self.validate_snapshot();
    }

    /// A plain HTTP request through Envoy.
    pub async fn get(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let url = format!("http://127.0.0.1:{}{path}", self.http_port);
        let mut req = self.client.get(&url).header(reqwest::header::HOST, host);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        describe(req.send().await).await
    }

    /// A plain HTTP request to Envoy at `addr` (a Gateway's own address and port).
    pub async fn get_at(&self, addr: std::net::SocketAddr, host: &str, path: &str) -> Answer {
        let url = format!("http://{addr}{path}");
        let req = self.client.get(&url).header(reqwest::header::HOST, host);
        describe(req.send().await).await
    }

    /// Waits until [`Harness::get_at`] answers `want`; panics after [`CONVERGE`] naming the
    /// last answer.
    pub async fn expect_at(&self, addr: std::net::SocketAddr, host: &str, path: &str, want: &str) {
        let what = format!("GET http://{addr}{path} (Host {host})");
        self.converge(&what, want, || self.get_at(addr, host, path))
            .await
    }

    /// Asks `ask` every 100 ms until it answers `want`; panics after [`CONVERGE`] naming `what`,
    /// the last answer and the tail of Envoy's log.
    async fn converge<F: std::future::Future<Output = Answer>>(
        &self,
        what: &str,
        want: &str,
        mut ask: impl FnMut() -> F,
    ) {
        let deadline = Instant::now() + CONVERGE;
        loop {
            let got = ask().await;
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: want {want:?}, still {got:?} after {CONVERGE:?}; Envoy log:\n{}",
                self.envoy_log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// An HTTPS request through Envoy with SNI and Host `host` (certificate not verified: the
    /// tests check termination and routing, the certificate is generated by the test).
    /// Also returns the negotiated HTTP version.
    pub async fn get_tls(&self, host: &str, path: &str) -> (Answer, Option<reqwest::Version>) {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(5))
            .danger_accept_invalid_certs(true)
            .resolve(
                host,
                format!("127.0.0.1:{}", self.https_port)
                    .parse()
                    .expect("addr"),
            )
            .build()
            .expect("tls client");
        let url = format!("https://{host}:{}{path}", self.https_port);
        let res = client.get(&url).send().await;
        let version = res.as_ref().ok().map(|r| r.version());
        (describe(res).await, version)
    }

    /// Waits until `host` + `path` (+ headers) answers `want`, then returns; panics after
    /// [`CONVERGE`] naming the last answer.
    pub async fn expect(&self, host: &str, path: &str, headers: &[(&str, &str)], want: &str) {
        let what = format!("GET http://{host}{path} {headers:?}");
        self.converge(&what, want, || self.get(host, path, headers))
            .await
    }

    /// Like [`Harness::expect`] over HTTPS.
    pub async fn expect_tls(&self, host: &str, path: &str, want: &str) {
        let what = format!("GET https://{host}{path}");
        let ask = || async { self.get_tls(host, path).await.0 };
        self.converge(&what, want, ask).await
    }
}

/// PEM files of a test PKI.
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all written under `dir`.
pub fn write_pki(dir: &std::path::Path) -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair,
    };
    let dn = |cn: &str| {
        let mut d = DistinguishedName::new();
        d.push(DnType::CommonName, cn);
        d
    };
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = dn("sluice test CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |san: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![san.to_string()]).expect("params");
        params.extended_key_usages = vec![usage];
        params.distinguished_name = dn(san);
        let cert = params.signed_by(&key, &issuer).expect("leaf");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf("envoy", ExtendedKeyUsagePurpose::ClientAuth);
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write pem");
        p
    };
    Pki {
        ca: write("ca.pem", &ca_cert.pem()),
        server_cert: write("server.pem", &server_cert),
        server_key: write("server-key.pem", &server_key),
        client_cert: write("client.pem", &client_cert),
        client_key: write("client-key.pem", &client_key),
    }
}

fn spawn_sluice(
    cfg: StandaloneConfig,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(run(cfg, async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

async fn describe(res: reqwest::Result<reqwest::Response>) -> Answer {
    match res {
        Ok(r) => {
            let status = r.status().as_u16();
            let location = r
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let body = r.text().await.unwrap_or_default();
            match (status, location) {
                (200, _) => body,
                (s, Some(l)) => format!("{s} {l}"),
                (s, None) => s.to_string(),
            }
        }
        Err(e) => format!("error: {e}"),
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.envoy.kill();
        let _ = self.envoy.wait();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.sluice.take() {
            task.abort();
        }
    }
}

// ---- manifest helpers ----

/// A Service with one port (named `port_name`, or unnamed when empty).
pub fn service(ns: &str, name: &str, port: u16, port_name: &str) -> String {
    let pn = if port_name.is_empty() {
        String::new()
    } else {
        format!("name: {port_name}, ")
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{ports: [{{{pn}port: {port}}}]}}\n"
    )
}

/// An EndpointSlice of Service `ns/svc` with one ready loopback endpoint on `backend_port`.
pub fn slice(ns: &str, svc: &str, port_name: &str, backend_port: u16, suffix: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {svc}-{suffix}\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {svc}}}\naddressType: IPv4\nports: [{{name: \"{port_name}\", port: {backend_port}, protocol: TCP}}]\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n"
    )
}

/// Joins YAML documents.
pub fn docs(parts: &[String]) -> String {
    parts.join("---\n")
}

/// A root IngressRoute `contour.heptio.com/v1beta1` of `fqdn` with these `routes` (YAML lines).
pub fn ingressroute(ns: &str, name: &str, fqdn: &str, routes: &str) -> String {
    format!(
        "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  virtualhost: {{fqdn: {fqdn}}}\n  routes:\n{routes}"
    )
}

/// Services `ns/<name>` on port 80, each backed by the backend of the same name.
pub fn services(ns: &str, backends: &[&Backend]) -> String {
    let mut parts = Vec::new();
    for b in backends {
        let svc = b.name.rsplit('/').next().unwrap_or(&b.name);
        parts.push(service(ns, svc, 80, ""));
        parts.push(slice(ns, svc, "", b.port, "0"));
    }
    docs(&parts)
}

/// The manifests of one host in `ns` whose every path goes to `app` (a Service `app`).
fn one_host(ns: &str, host: &str, app: &Backend) -> [(&'static str, String); 2] {
    let routes = "  - match: /\n    services: [{name: app, port: 80}]\n";
    [
        ("svc.yaml", services(ns, &[app])),
        ("route.yaml", ingressroute(ns, "app", host, routes)),
    ]
}
