//! Which route takes a request: the same decision Envoy makes from the translated config, computed
//! from the model. Golden tests assert request → backend through it, and `sluice routes` uses it to
//! answer "why did my request go there".

use super::model::{Dag, Route, VirtualHost};
pub use crate::route_match::merge_slashes;

/// A request as routing sees it.
#[derive(Clone, Debug, Default)]
pub struct Request<'a> {
    /// Host header, any case, may carry `:port`.
    pub host: &'a str,
    /// Path, may carry a `?query`.
    pub path: &'a str,
    /// Header names any case.
    pub headers: &'a [(&'a str, &'a str)],
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        // IPv6 literal: keep the brackets, drop what follows.
        return host.find(']').map(|end| &host[..=end]).unwrap_or(host);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The route that takes the request, if any (none means 404). The virtual host is Envoy's
/// choice: the exact name, else the wildcard of the longest suffix (`*.b.c`, then `*.c`, for
/// `a.b.c`), else `*`. A wildcard host's routes take a request for one label in front of its
/// suffix; for more labels only the routes that span labels do
/// ([`Route::wildcard_spans_labels`]), and a request none of them takes goes on to the routes of
/// `*`, which sluice puts at the end of every wildcard host for Envoy, except a host a Gateway
/// listener's hostname takes ([`VirtualHost::isolated`]).
pub fn lookup<'d>(dag: &'d Dag, req: &Request<'_>) -> Option<(&'d VirtualHost, &'d Route)> {
    let host = strip_port(req.host).to_ascii_lowercase();
    // Envoy merges consecutive slashes (merge_slashes) before matching; so does the model.
    let path_and_query = req.path.split('#').next().unwrap_or("");
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let path = merge_slashes(path);
    let path = path.as_str();
    let takes = |r: &Route| {
        r.path.matches(path)
            && r.query().iter().all(|q| q.matches(query))
            && r.headers.iter().all(|h| {
                let value = req
                    .headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&h.name))
                    .map(|(_, v)| *v);
                h.matches(value)
            })
    };
    let first = |v: &'d VirtualHost| Some((v, v.routes.iter().find(|r| takes(r))?));
    if let Some(v) = dag.vhosts.get(&host) {
        return first(v);
    }
    let mut labels = 0;
    let mut rest = host.as_str();
    while let Some((_, suffix)) = rest.split_once('.') {
        labels += 1;
        if let Some(v) = dag.vhosts.get(&format!("*.{suffix}")) {
            let route =
                (v.routes.iter()).find(|r| (labels == 1 || r.wildcard_spans_labels()) && takes(r));
            match route {
                Some(r) => return Some((v, r)),
                None if labels == 1 || v.isolated => return None,
                None => break,
            }
        }
        rest = suffix;
    }
    first(dag.vhosts.get("*")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slashes_are_merged() {
        assert_eq!(merge_slashes("/a//b///c"), "/a/b/c");
        assert_eq!(merge_slashes("/"), "/");
    }

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port("foo.com:8080"), "foo.com");
        assert_eq!(strip_port("foo.com"), "foo.com");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("[::1]"), "[::1]");
    }
}
