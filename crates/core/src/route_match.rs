//! Request matches (path, headers, query parameters): what the webhook checks and the routing
//! model holds, below both.

use std::sync::Arc;

use serde::Serialize;

/// How a route matches the request path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "type", content = "value")]
pub enum PathMatch {
    /// The path equals this.
    Exact(PathText),
    /// Segment-wise prefix: `/foo` matches `/foo`, `/foo/` and `/foo/bar`, never `/foobar`.
    /// Stored without a trailing slash, except `/` itself (which matches every path).
    Prefix(PathText),
    /// Plain string prefix (Ingress `ImplementationSpecific`): `/foo` also matches `/foobar`.
    StringPrefix(PathText),
    /// The whole path matches this RE2 expression (Gateway API `RegularExpression`).
    Regex(PathText),
}

/// The text of a [`PathMatch`], shared by the routes made from one written match (a delegated
/// route and the model's copy of it) instead of copied.
pub type PathText = Arc<str>;

impl PathMatch {
    /// A segment-wise prefix, with a trailing slash ignored (`/abc/` and `/abc` are the same match).
    pub fn prefix(p: &str) -> PathMatch {
        let trimmed = p.trim_end_matches('/');
        PathMatch::Prefix(if trimmed.is_empty() {
            "/".into()
        } else {
            trimmed.into()
        })
    }

    pub fn value(&self) -> &str {
        match self {
            PathMatch::Exact(p)
            | PathMatch::Prefix(p)
            | PathMatch::StringPrefix(p)
            | PathMatch::Regex(p) => p,
        }
    }

    /// Whether it matches every path: prefix `/`, either kind.
    pub fn is_catch_all(&self) -> bool {
        matches!(self, PathMatch::Prefix(p) | PathMatch::StringPrefix(p) if &**p == "/")
    }

    /// Whether a request path (without query) matches.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(p) => path == &**p,
            PathMatch::Prefix(p) if &**p == "/" => path.starts_with('/'),
            PathMatch::Prefix(p) => {
                path == &**p || (path.starts_with(&**p) && path.as_bytes()[p.len()] == b'/')
            }
            PathMatch::StringPrefix(p) if p.contains("//") => {
                path.starts_with(merge_slashes(p).as_str())
            }
            PathMatch::StringPrefix(p) => path.starts_with(&**p),
            PathMatch::Regex(re) => whole_match(re, path),
        }
    }

    /// Whether every path this match takes is also taken by `outer` (a delegated vertex's route
    /// staying inside the delegated prefix).
    pub fn within(&self, outer: &PathMatch) -> bool {
        match (self, outer) {
            (_, PathMatch::Prefix(o)) if &**o == "/" => true,
            (PathMatch::Exact(p) | PathMatch::Prefix(p), PathMatch::Prefix(_)) => outer.matches(p),
            (PathMatch::Exact(p), PathMatch::Exact(o)) => p == o,
            (
                PathMatch::Exact(p) | PathMatch::Prefix(p) | PathMatch::StringPrefix(p),
                PathMatch::StringPrefix(o),
            ) => p.starts_with(&**o),
            _ => false,
        }
    }
}

impl std::fmt::Display for PathMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathMatch::Exact(p) => write!(f, "exact {p}"),
            PathMatch::Prefix(p) => write!(f, "prefix {p}"),
            PathMatch::StringPrefix(p) => write!(f, "string-prefix {p}"),
            PathMatch::Regex(p) => write!(f, "regex {p}"),
        }
    }
}

/// A condition on one request header. Names are lowercase.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct HeaderMatch {
    pub name: String,
    pub op: HeaderOp,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "op", content = "value", rename_all = "camelCase")]
pub enum HeaderOp {
    Exact(String),
    Contains(String),
    /// Absent, or present without this text.
    NotContains(String),
    Present,
    Absent,
    /// The whole value matches this RE2 expression.
    Regex(String),
}

impl HeaderMatch {
    /// Whether the request's value for this header (None when absent) satisfies the condition.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (&self.op, value) {
            (HeaderOp::Exact(want), Some(v)) => v == want,
            (HeaderOp::Contains(want), Some(v)) => v.contains(want.as_str()),
            (HeaderOp::NotContains(want), Some(v)) => !v.contains(want.as_str()),
            (HeaderOp::NotContains(_), None) => true,
            (HeaderOp::Present, Some(_)) => true,
            (HeaderOp::Absent, None) => true,
            (HeaderOp::Regex(re), Some(v)) => whole_match(re, v),
            _ => false,
        }
    }
}

/// Whether the RE2 expression `re` matches the whole of `v` (false when it does not compile).
fn whole_match(re: &str, v: &str) -> bool {
    regex::Regex::new(&format!("^(?:{re})$")).is_ok_and(|r| r.is_match(v))
}

/// A condition on one query parameter (Gateway API `queryParams`). The name is compared exactly,
/// letter case included; the value compared is the first the request gives that name, as it is
/// written in the request (not percent-decoded), as Envoy compares it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct QueryMatch {
    pub name: String,
    pub op: QueryOp,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "op", content = "value", rename_all = "camelCase")]
pub enum QueryOp {
    Exact(String),
    /// The whole value matches this RE2 expression.
    Regex(String),
}

impl QueryMatch {
    /// Whether the query string `query` (what follows the path's `?`) satisfies the condition:
    /// its parameters are split at `&`, each at its first `=` (a parameter without one has an
    /// empty value).
    pub fn matches(&self, query: &str) -> bool {
        let first = query.split('&').find_map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            (name == self.name).then_some(value)
        });
        match (&self.op, first) {
            (QueryOp::Exact(want), Some(v)) => v == want,
            (QueryOp::Regex(re), Some(v)) => whole_match(re, v),
            (_, None) => false,
        }
    }
}

impl std::fmt::Display for QueryMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.op {
            QueryOp::Exact(v) => write!(f, "?{}={v:?}", self.name),
            QueryOp::Regex(v) => write!(f, "?{}=~/{v}/", self.name),
        }
    }
}

impl std::fmt::Display for HeaderMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.op {
            HeaderOp::Exact(v) => write!(f, "{}={v:?}", self.name),
            HeaderOp::Contains(v) => write!(f, "{}~{v:?}", self.name),
            HeaderOp::NotContains(v) => write!(f, "{}!~{v:?}", self.name),
            HeaderOp::Present => write!(f, "{} present", self.name),
            HeaderOp::Absent => write!(f, "{} absent", self.name),
            HeaderOp::Regex(v) => write!(f, "{}=~/{v}/", self.name),
        }
    }
}

/// `//` → `/`, as Envoy's `merge_slashes` does to request paths and sluice's translation does to
/// string-prefix matches.
pub fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}
