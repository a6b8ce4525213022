//! The stream against the reference algorithm (`stream_reference.rs`): both are driven through
//! the same long pseudo-random sequences of snapshots and requests, and must answer alike.

use std::collections::BTreeMap;

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::google::rpc::Status;

use super::*;

/// The names the differential tests use per type (a few more than any snapshot holds).
fn universe(t: ResourceType) -> &'static [&'static str] {
    match t {
        C | E => &["a", "b", "c", "d", "e", "f"],
        L | R => &["http", "https", "admin"],
        ResourceType::ScopedRoute => &["http/0", "http/1", "http/2"],
        S => &["s1", "s2", "s3", "s4"],
    }
}

/// Each of `of` with a chance of `percent` in 100.
fn subset(rng: &mut Rng, of: &[&str], percent: u64) -> Vec<String> {
    of.iter()
        .filter(|_| rng.chance(percent))
        .map(|s| s.to_string())
        .collect()
}

/// Random resources of type `t`: each name present with some chance, in one of a few contents
/// (so a new snapshot often holds the same version of a resource).
fn random_items(rng: &mut Rng, t: ResourceType) -> Vec<(String, Any)> {
    let u = universe(t);
    let names = &u[..u.len() - 1];
    let mut items = Vec::new();
    for n in names {
        if rng.chance(70) {
            let content = format!("{}-{n}-{}", t.short(), rng.below(3));
            items.push((
                n.to_string(),
                Any {
                    type_url: t.type_url().into(),
                    value: content.into_bytes(),
                },
            ));
        }
    }
    items
}

/// A new snapshot: built afresh, or one type replaced in the previous one (the other types
/// shared, as the endpoint fast path does), or the same one again.
fn next_snapshot(rng: &mut Rng, prev: &Snapshot) -> Snapshot {
    match rng.below(10) {
        0..4 => Snapshot::from_encoded(
            ResourceType::ALL
                .into_iter()
                .map(|t| (t, random_items(rng, t).into_iter().collect()))
                .collect(),
        ),
        4..8 => {
            let t = ResourceType::ALL[rng.below(ResourceType::ALL.len())];
            let mut items = random_items(rng, t);
            items.truncate(2);
            prev.with_replaced(t, items)
        }
        _ => prev.clone(),
    }
}

/// What the simulated client knows per type.
#[derive(Default)]
struct ClientType {
    /// SotW: the names it asks for.
    names: Vec<String>,
    /// Every nonce received, the latest last.
    nonces: Vec<String>,
}

/// The names a client asks for: nothing (wildcard for clusters and listeners), "*", a random set,
/// or what Envoy would ask for (the endpoints of the snapshot's clusters).
fn random_names(rng: &mut Rng, t: ResourceType, snap: &Snapshot) -> Vec<String> {
    match rng.below(6) {
        0 => vec![],
        1 => vec!["*".to_string()],
        2 => subset(rng, universe(t), 50),
        _ => match t {
            E => snap.of(C).keys().map(|k| k.to_string()).collect(),
            C | L => vec![],
            _ => snap.of(t).keys().map(|k| k.to_string()).collect(),
        },
    }
}

/// A nonce for a request of type `t`: usually the latest received (ACK/NACK), sometimes none
/// (initial request), sometimes an older one or one never sent (stale).
fn random_nonce(rng: &mut Rng, client: &ClientType) -> String {
    match (rng.below(10), client.nonces.last()) {
        (0, _) | (_, None) => String::new(),
        (1, _) => client.nonces[rng.below(client.nonces.len())].clone(),
        (2, _) => "999999".to_string(),
        (_, Some(n)) => n.clone(),
    }
}

fn nack_status() -> Status {
    Status {
        code: 3,
        message: "bad config".into(),
        details: vec![],
    }
}

/// Drives the stream and the reference algorithm through the same long pseudo-random sequence of
/// snapshots, ACKs, NACKs, stale nonces, subscription changes and reconnects; every answer must
/// be the same. Counts the responses compared per type in `compared`.
fn differential(mode: Mode, seed: u64, steps: usize, compared: &mut BTreeMap<ResourceType, usize>) {
    let mut rng = Rng::new(seed);
    let mut snap = next_snapshot(&mut rng, &Snapshot::default());
    let new_pair = || {
        let (a, b): (Arc<Stats>, Arc<Stats>) = (Arc::default(), Arc::default());
        (
            Stream::new(mode, a.clone()),
            super::reference::RefStream::new(mode, b.clone()),
            a,
            b,
        )
    };
    let (mut s, mut r, mut s_stats, mut r_stats) = new_pair();
    let mut client: BTreeMap<ResourceType, ClientType> = BTreeMap::new();
    let mut reconnected = false;
    for step in 0..steps {
        let op = rng.below(100);
        let (what, got, want) = if op < 22 {
            snap = next_snapshot(&mut rng, &snap);
            (
                "snapshot".to_string(),
                s.on_snapshot(&snap),
                r.on_snapshot(&snap),
            )
        } else if op < 24 {
            (s, r, s_stats, r_stats) = new_pair();
            client.clear();
            reconnected = true;
            continue;
        } else {
            // Envoy-like order most of the time: the first type with something to acknowledge.
            let t = if rng.chance(50) {
                ResourceType::ALL[rng.below(ResourceType::ALL.len())]
            } else {
                ResourceType::ALL
                    .into_iter()
                    .find(|t| client.get(t).is_some_and(|c| !c.nonces.is_empty()))
                    .unwrap_or(ResourceType::ALL[rng.below(ResourceType::ALL.len())])
            };
            let c = client.entry(t).or_default();
            let nonce = random_nonce(&mut rng, c);
            let error_detail = (!nonce.is_empty() && rng.chance(10)).then(nack_status);
            match mode {
                Mode::Sotw => {
                    if c.nonces.is_empty() || rng.chance(20) {
                        c.names = random_names(&mut rng, t, &snap);
                    }
                    let req = DiscoveryRequest {
                        type_url: t.type_url().into(),
                        resource_names: c.names.clone(),
                        response_nonce: nonce,
                        error_detail,
                        ..Default::default()
                    };
                    (
                        format!("{req:?}"),
                        s.on_sotw_request(&req, &snap),
                        r.on_sotw_request(&req, &snap),
                    )
                }
                Mode::Delta => {
                    let mut req = DeltaDiscoveryRequest {
                        type_url: t.type_url().into(),
                        response_nonce: nonce,
                        error_detail,
                        ..Default::default()
                    };
                    if c.nonces.is_empty() || rng.chance(25) {
                        req.resource_names_subscribe = random_names(&mut rng, t, &snap);
                    }
                    if rng.chance(15) {
                        req.resource_names_unsubscribe = random_names(&mut rng, t, &snap);
                    }
                    if reconnected && c.nonces.is_empty() && rng.chance(70) {
                        for n in universe(t) {
                            match (snap.of(t).get(*n), rng.below(3)) {
                                (Some(res), 0 | 1) => {
                                    req.initial_resource_versions
                                        .insert(n.to_string(), res.version.to_string());
                                }
                                (_, 0) => {
                                    req.initial_resource_versions
                                        .insert(n.to_string(), "old-version".into());
                                }
                                _ => {}
                            }
                        }
                    }
                    (
                        format!("{req:?}"),
                        s.on_delta_request(&req, &snap),
                        r.on_delta_request(&req, &snap),
                    )
                }
            }
        };
        assert_eq!(got, want, "seed {seed}, step {step}: {what}");
        assert_eq!(s_stats.responses.get(), r_stats.responses.get());
        assert_eq!(s_stats.nacks.get(), r_stats.nacks.get());
        for resp in &got {
            let (t, nonce) = response_nonce(resp);
            *compared.entry(t).or_default() += 1;
            client.entry(t).or_default().nonces.push(nonce);
        }
    }
}

#[test]
fn sotw_answers_exactly_as_the_reference_algorithm() {
    let mut compared = BTreeMap::new();
    for seed in 0..60 {
        differential(Mode::Sotw, seed, 600, &mut compared);
    }
    for t in ResourceType::ALL {
        assert!(
            compared[&t] > 300,
            "too few responses compared: {compared:?}"
        );
    }
}

#[test]
fn delta_answers_exactly_as_the_reference_algorithm() {
    let mut compared = BTreeMap::new();
    for seed in 0..60 {
        differential(Mode::Delta, seed, 600, &mut compared);
    }
    for t in ResourceType::ALL {
        assert!(
            compared[&t] > 300,
            "too few responses compared: {compared:?}"
        );
    }
}
