//! `sluice routes -f PATH ...`: the computed route table — host → match → weighted backends, with
//! the object each route comes from. `--request` shows which route a given request takes.

use clap::{Args, ValueEnum};

use crate::dag::{self, lookup, table};
use crate::manifest::{Document, load_paths};
use crate::store::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoutesFormat {
    Table,
    Yaml,
}

#[derive(Debug, Clone, Args)]
pub struct RoutesArgs {
    /// File, directory or `-` for stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub paths: Vec<String>,
    #[command(flatten)]
    pub routing: super::RoutingFlags,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = RoutesFormat::Table)]
    pub output: RoutesFormat,
    /// Show the route a request takes, e.g. `www.example.com/finance/x` (host, then path).
    #[arg(long, value_name = "HOST/PATH")]
    pub request: Option<String>,
    /// A request header for --request, `Name: value`. Repeatable.
    #[arg(
        short = 'H',
        long = "header",
        value_name = "NAME: VALUE",
        requires = "request"
    )]
    pub headers: Vec<String>,
}

pub fn run(args: RoutesArgs) -> u8 {
    let docs = match load_paths(&args.paths) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    for u in &docs.unknown_fields {
        eprintln!("warning: {u}");
    }
    let objects = docs.documents.into_iter().filter_map(|(_, d)| match d {
        Document::Object(o) => Some(o),
        _ => None,
    });
    let options = args.routing.dag_options();
    let built = dag::build(&Snapshot::from_objects(objects), &options);

    if let Some(req) = &args.request {
        let (host, path) = match req.find('/') {
            Some(i) => (&req[..i], &req[i..]),
            None => (req.as_str(), "/"),
        };
        let mut headers = Vec::new();
        for h in &args.headers {
            let Some((n, v)) = h.split_once(':') else {
                eprintln!("error: --header {h:?} must look like \"Name: value\"");
                return 2;
            };
            headers.push((n.trim(), v.trim()));
        }
        let request = lookup::Request {
            host,
            path,
            headers: &headers,
        };
        return match lookup::lookup(&built, &request) {
            Some((vhost, route)) => {
                let row = table::table_route(route, vhost.tls.is_some());
                println!("host:     {}", vhost.host);
                println!("match:    {}", row.match_);
                if !row.headers.is_empty() {
                    println!("headers:  {}", row.headers.join(", "));
                }
                if !row.query.is_empty() {
                    println!("query:    {}", row.query.join(", "));
                }
                println!("backends: {}", row.backends.join(", "));
                if !row.mirrors.is_empty() {
                    println!("mirrors:  {}", row.mirrors.join(", "));
                }
                if let Some(cors) = &row.cors {
                    println!("cors:     {cors}");
                }
                if let Some(http) = row.http {
                    println!("http:     {http}");
                }
                println!("source:   {}", row.source);
                0
            }
            None => {
                println!("no route: 404");
                1
            }
        };
    }

    let hosts = table::route_table(&built);
    match args.output {
        RoutesFormat::Yaml => print!(
            "{}",
            serde_norway::to_string(&hosts).expect("route table serializes")
        ),
        RoutesFormat::Table => print!("{}", render_table(&hosts)),
    }
    0
}

/// The route table as aligned text columns.
pub fn render_table(hosts: &[table::TableHost]) -> String {
    // HEADERS holds the query parameter conditions too (`?name=...`).
    let header = ["HOST", "MATCH", "HEADERS", "BACKENDS", "HTTP", "SOURCE"].map(String::from);
    let mut rows: Vec<[String; 6]> = vec![header];
    for h in hosts {
        let mut host = match &h.tls {
            Some(tls) => format!("{} (tls: {tls})", h.host),
            None => h.host.clone(),
        };
        if let Some(gateway) = &h.gateway {
            host = format!("{host} [{gateway}]");
        }
        // A TCP proxy forwards every connection (over TLS for an IngressRoute's host), a TLS
        // passthrough every connection whose SNI names the host: one row.
        let proxied = [
            ("tcp", &h.tcp_proxy),
            ("tls passthrough", &h.tls_passthrough),
        ];
        let mut named = false;
        for (what, backends) in proxied {
            let Some(backends) = backends else { continue };
            rows.push([
                if named { String::new() } else { host.clone() },
                what.into(),
                "-".into(),
                backends.join(", "),
                "-".into(),
                h.owner.clone().unwrap_or_else(|| "-".into()),
            ]);
            named = true;
        }
        for (i, r) in h.routes.iter().enumerate() {
            let first = i == 0 && !named;
            rows.push([
                if first { host.clone() } else { String::new() },
                r.match_.clone(),
                if r.headers.is_empty() && r.query.is_empty() {
                    "-".into()
                } else {
                    [&r.headers[..], &r.query[..]].concat().join(", ")
                },
                r.backends.join(", "),
                r.http.clone().unwrap_or_else(|| "-".into()),
                r.source.clone(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}
