//! Where a route's hostnames meet a listener's: the hosts it serves through the listener, and
//! which of them a more specific listener of the Gateway takes instead (listener isolation).

/// Whether `pattern` (a host name, or `*.` and a suffix) matches the host name `host`.
/// A wildcard matches one or more labels in front of its suffix, not the suffix alone.
fn hostname_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => {
            host.len() > suffix.len() && host.ends_with(suffix) && !host.starts_with('*')
        }
        None => pattern == host,
    }
}

/// Whether every request host `host` takes is one `pattern` takes too (lowercase names, either
/// may be a wildcard, which takes one or more labels): `*.example.com` covers `a.example.com`
/// and `*.a.example.com`.
fn covers(pattern: &str, host: &str) -> bool {
    pattern == host
        || match (pattern.strip_prefix('*'), host.strip_prefix('*')) {
            (Some(p), Some(h)) => h.len() > p.len() && h.ends_with(p),
            (Some(_), None) => hostname_matches(pattern, host),
            (None, _) => false,
        }
}

/// Whether requests for `host`, which a route serves through a listener of `port` and
/// `hostname`, belong to another listener of the Gateway (`listeners`: the port and hostname of
/// each that takes HTTP routes,
/// [`super::super::gateway_acc::GatewayAcc::http_hostnames`]): one on
/// the same port whose hostname is more specific and covers `host`. The Gateway API routes a
/// request only with the routes of the most specific listener that takes it (listener
/// isolation), so the route does not serve that host.
pub(in crate::dag) fn taken_by_narrower_listener(
    listeners: &[(i32, Option<String>)],
    (port, hostname): (i32, Option<&str>),
    host: &str,
) -> bool {
    listeners.iter().any(|(p, other)| {
        let Some(other) = other.as_deref() else {
            return false;
        };
        let narrower = hostname.is_none_or(|h| h != other && covers(h, other));
        *p == port && narrower && covers(other, host)
    })
}

/// The hostnames a route serves through a listener: where the listener's hostname and the
/// route's meet (the more specific of the two, also of two wildcards: `*.example.com` and
/// `*.a.example.com` meet at `*.a.example.com`). Empty when they do not meet.
pub fn listener_route_hosts(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let route: Vec<String> = route.iter().map(|h| h.to_ascii_lowercase()).collect();
    let mut out = match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_string()],
        (None, false) => route,
        (Some(l), true) => vec![l.to_string()],
        (Some(l), false) => route
            .into_iter()
            .filter_map(|h| {
                if covers(l, &h) {
                    Some(h)
                } else if covers(&h, l) {
                    Some(l.to_string())
                } else {
                    None
                }
            })
            .collect(),
    };
    out.sort();
    out.dedup();
    out
}
