//! Every regular expression the webhook admits is one Envoy accepts, with the bootstrap sluice
//! writes. Envoy refuses a whole route configuration over one expression it cannot compile (a
//! NACK: none of that configuration's routes change until the expression is gone), so the two
//! must agree.
//!
//! - Thousands of expressions from a fixed seed, made of the constructs whose RE2 programs grow
//!   fastest (Unicode classes, case folding, bounded repetitions, alternations), are filtered by
//!   `validate_regex` (the webhook's rule), and every admitted one goes into one route
//!   configuration that `envoy --mode validate` must accept.
//! - Every Unicode class name the webhook admits is one Envoy's RE2 knows.
//! - The single-label check of the longest wildcard host a name can have compiles within the
//!   limit too.
//! - Without the bootstrap's runtime layer (Envoy's default limit of 100), Envoy refuses the
//!   same configuration: the limit is what makes the difference, and this test can fail.

mod envoy_support;
mod rng;

use rng::Rng;
use sluice::api::{Kind, LbStrategy, ObjectRef};
use sluice::dag::*;
use sluice::translate::{self, static_config::build_static_bootstrap};
use sluice::validate::common::validate_regex;

const ATOMS: &[&str] = &[
    "a",
    "[a-z]",
    "[^a]",
    ".",
    r"\pL",
    r"\PL",
    r"\p{Greek}",
    r"\p{Han}",
    "[[:alpha:]]",
    "(?i)k",
    "(?i)[a-z]",
    r"[\x{80}-\x{FF}]",
    r"\pN",
    r"[^\x00-\x7f]",
    r"\p{Lu}",
    r"(?i)\p{Lu}",
    r"\pS",
    r"\pP",
    r"\pZ",
    "[0-9]",
    "(?s).",
    r"\x{FF}",
    "é",
    "(?i)é",
    r"\p{Cyrillic}",
    r"\p{Arabic}",
    r"\pM",
    r"\d\w\s",
    r"\b",
];

/// Constructs Rust's `regex` reads and Envoy refuses: the webhook must keep every expression
/// holding one of them away from Envoy (mixed in rarely, so most expressions are admitted).
const ENVOY_REFUSES: &[&str] = &[
    r"\x{100}",
    r"\u0041",
    r"\p{Letter}",
    r"\p{sc=Greek}",
    "(?x:a )",
    "(?u:a)",
    "(?R:a)",
    "b{1001}",
];

const COUNTS: &[u32] = &[
    1, 2, 3, 4, 5, 8, 10, 16, 20, 30, 50, 64, 100, 200, 500, 1000,
];

fn expression(rng: &mut Rng, depth: u32) -> String {
    let roll = rng.below(100);
    if depth > 3 || roll < 30 {
        if rng.chance(2) {
            return ENVOY_REFUSES[rng.below(ENVOY_REFUSES.len())].to_string();
        }
        return ATOMS[rng.below(ATOMS.len())].to_string();
    }
    if roll < 55 {
        let n = 2 + rng.below(3);
        let parts: Vec<String> = (0..n).map(|_| expression(rng, depth + 1)).collect();
        return format!("({})", parts.join("|"));
    }
    if roll < 75 {
        let n = 2 + rng.below(3);
        return (0..n).map(|_| expression(rng, depth + 1)).collect();
    }
    let n = COUNTS[rng.below(COUNTS.len())];
    let op = match rng.below(6) {
        0 => format!("{{{n}}}"),
        1 => format!("{{1,{n}}}"),
        2 => format!("{{{n},}}"),
        3 => "*".to_string(),
        4 => "+".to_string(),
        _ => "?".to_string(),
    };
    let lazy = if rng.chance(10) { "?" } else { "" };
    format!("({}){op}{lazy}", expression(rng, depth + 1))
}

/// Expressions found to compile to the largest RE2 programs among those the webhook admits
/// (docs/xds.md, "Regular expressions"), and ordinary ones Envoy's default limit refuses.
const LARGE: &[&str] = &[
    r"((((\pS|\pP|(?s).|\pL))+)?){16,}",
    r"((((\pL|(?i)[a-z]|(?i)[a-z]|\PL)){3,})*)?",
    r"(((?i)é|([^\x00-\x7f]|[a-z]|(?i)[a-z]|\PL)|[^\x00-\x7f])){4}(?i)\p{Lu}",
    r"(((.|\p{Cyrillic}))*){20,}",
    r"(?:(?U)a+?){907}",
    "^/api/v[0-9]+/users/[a-z0-9-]{1,64}$",
    "a{1000}",
    "(a{10}){100}",
];

fn route(path: String, regex: &str) -> Route {
    Route {
        path: PathMatch::Exact(path.into()),
        headers: vec![HeaderMatch {
            name: "x-match".into(),
            op: HeaderOp::Regex(regex.to_string()),
        }],
        action: RouteAction::Forward(smallvec::smallvec![WeightedCluster {
            cluster: "default/a/80".into(),
            weight: 1,
        }]),
        permit_insecure: false,
        timeout: None,
        retry: None,
        extras: None,
        source: ObjectRef::new(Kind::HttpRoute, "default", "r"),
    }
}

/// A model whose one host has a route per expression, plus a wildcard host.
fn model(regexes: &[String], wildcard_host: &str) -> Dag {
    let mut dag = Dag::default();
    dag.clusters.insert(
        "default/a/80".into(),
        Cluster {
            name: "default/a/80".into(),
            service: Default::default(),
            port: 80,
            protocol: UpstreamProtocol::Http,
            lb: LbStrategy::RoundRobin,
            health_check: None,
            outlier_detection: None,
            upstream_tls: None,
            endpoints: vec![Endpoint {
                address: std::net::Ipv4Addr::LOCALHOST.into(),
                port: 9001,
            }]
            .into(),
        }
        .into(),
    );
    let routes = regexes
        .iter()
        .enumerate()
        .map(|(i, r)| route(format!("/r{i}"), r))
        .collect();
    for v in [
        VirtualHost {
            host: "regex.example.com".into(),
            routes,
            ..Default::default()
        },
        VirtualHost {
            host: wildcard_host.to_string(),
            routes: vec![route("/".into(), "a")],
            ..Default::default()
        },
    ] {
        dag.vhosts.insert(v.host.clone(), v.into());
    }
    dag
}

/// `*.` and labels of 63 characters up to the 253 a host name may have.
fn longest_wildcard_host() -> String {
    let mut host = "*".to_string();
    while host.len() + 64 <= 253 {
        host.push('.');
        host.push_str(&"a".repeat(63));
    }
    host.push('.');
    host.push_str(&"b".repeat(253 - host.len()));
    assert_eq!(host.len(), 253);
    sluice::validate::common::validate_hostname("host", &host, true).expect("a valid host name");
    host
}

#[test]
fn every_regex_the_webhook_admits_is_one_envoy_accepts() {
    let mut rng = Rng(0x0005_EED0_F2E2);
    let mut admitted: Vec<String> = LARGE.iter().map(|s| s.to_string()).collect();
    for re in &admitted {
        validate_regex("r", re).unwrap_or_else(|e| panic!("{re:?} is refused: {e}"));
    }
    let (mut too_big, mut not_re2) = (0, 0);
    for _ in 0..3000 {
        let re = expression(&mut rng, 0);
        match validate_regex("r", &re) {
            Ok(()) => admitted.push(re),
            Err(e) if e.to_string().contains("too complex") => too_big += 1,
            Err(_) => not_re2 += 1,
        }
    }
    // Every side of the rule is exercised: most expressions are admitted, some are too big, some
    // hold what Envoy's RE2 refuses.
    assert!(admitted.len() > 1000, "{} admitted", admitted.len());
    assert!(too_big > 100, "{too_big} too big");
    assert!(not_re2 > 20, "{not_re2} refused as not RE2");

    let dag = model(&admitted, &longest_wildcard_host());
    let resources = translate::build(&dag, &translate::Options::default());
    envoy_support::assert_envoy_accepts(&resources, "admitted regexes");

    // Envoy's default limit refuses the same configuration.
    let mut bootstrap = build_static_bootstrap(&resources).unwrap();
    bootstrap.layered_runtime = None;
    let output = envoy_support::envoy_validate(&bootstrap)
        .expect_err("Envoy's default RE2 limit refuses these expressions");
    assert!(output.contains("max program size"), "{output}");
}

#[test]
fn every_unicode_class_the_webhook_admits_is_one_envoy_knows() {
    let names = sluice::validate::re2::unicode_names();
    let regexes: Vec<String> = names.iter().map(|n| format!(r"\p{{{n}}}")).collect();
    for re in &regexes {
        validate_regex("r", re).unwrap_or_else(|e| panic!("{re:?} is refused: {e}"));
    }
    let dag = model(&regexes, "*.example.com");
    let resources = translate::build(&dag, &translate::Options::default());
    envoy_support::assert_envoy_accepts(&resources, "Unicode classes");
}
