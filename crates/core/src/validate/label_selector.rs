//! Label selectors, as Kubernetes reads them: a Gateway listener's
//! `allowedRoutes.namespaces.selector` picks the namespaces whose routes it takes by their labels.
//!
//! `matchLabels` and every `matchExpressions` entry must all hold (an empty selector selects
//! everything). `In` and `NotIn` need values, `Exists` and `DoesNotExist` take none; `NotIn` holds
//! for a label that is absent, as in Kubernetes. The webhook refuses a selector that breaks these
//! rules, and the build reads one the same way (the same [`LabelSelector::parse`]).

use gateway_api::apis::experimental::gateways::GatewayListenersAllowedRoutesNamespacesSelector as Selector;

use super::FieldError;
use super::common::{validate_dns1123_subdomain, validate_label_name};

/// A label selector that parsed: ready to match a label set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    labels: Vec<(String, String)>,
    expressions: Vec<(String, Op)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

impl LabelSelector {
    /// Reads the selector at `path`, or names the first field that breaks a rule.
    pub fn parse(path: &str, s: &Selector) -> Result<LabelSelector, FieldError> {
        let mut labels = Vec::new();
        for (key, value) in s.match_labels.iter().flatten() {
            let at = format!("{path}.matchLabels");
            validate_label_key(&at, key)?;
            validate_label_value(&format!("{at}[{key:?}]"), value)?;
            labels.push((key.clone(), value.clone()));
        }
        let mut expressions = Vec::new();
        for (i, e) in s.match_expressions.iter().flatten().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            validate_label_key(&format!("{at}.key"), &e.key)?;
            let values = e.values.as_deref().unwrap_or(&[]);
            let with_values = |make: fn(Vec<String>) -> Op| {
                if values.is_empty() {
                    return Err(FieldError::required(
                        format!("{at}.values"),
                        format!("operator {} needs at least one value", e.operator),
                    ));
                }
                for (j, v) in values.iter().enumerate() {
                    validate_label_value(&format!("{at}.values[{j}]"), v)?;
                }
                Ok(make(values.to_vec()))
            };
            let without_values = |op: Op| {
                if values.is_empty() {
                    Ok(op)
                } else {
                    Err(FieldError::spec(
                        format!("{at}.values"),
                        format!(
                            "must be empty for operator {}; it asks whether the label is set, not for a value",
                            e.operator
                        ),
                    ))
                }
            };
            let op = match e.operator.as_str() {
                "In" => with_values(Op::In)?,
                "NotIn" => with_values(Op::NotIn)?,
                "Exists" => without_values(Op::Exists)?,
                "DoesNotExist" => without_values(Op::DoesNotExist)?,
                other => {
                    return Err(FieldError::invalid(
                        format!("{at}.operator"),
                        other,
                        "is not an operator; use In, NotIn, Exists or DoesNotExist",
                    ));
                }
            };
            expressions.push((e.key.clone(), op));
        }
        Ok(LabelSelector {
            labels,
            expressions,
        })
    }

    /// Whether a label set, read through `get` (a label's value, None when it is not set),
    /// holds everything the selector asks.
    pub fn matches<'l>(&self, get: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.labels.iter().all(|(k, v)| get(k) == Some(v.as_str()))
            && self.expressions.iter().all(|(k, op)| match op {
                Op::In(values) => get(k).is_some_and(|v| values.iter().any(|w| w == v)),
                Op::NotIn(values) => get(k).is_none_or(|v| values.iter().all(|w| w != v)),
                Op::Exists => get(k).is_some(),
                Op::DoesNotExist => get(k).is_none(),
            })
    }
}

/// The selector of a Gateway listener taking the routes of namespaces by label (`from:
/// Selector`), at `path` (`….allowedRoutes.namespaces.selector`): it must be there, and read.
pub fn listener_selector(path: &str, s: Option<&Selector>) -> Result<LabelSelector, FieldError> {
    match s {
        Some(s) => LabelSelector::parse(path, s),
        None => Err(FieldError::required(
            path,
            "from: Selector takes the routes of the namespaces this label selector matches",
        )),
    }
}

/// A label key: a name of up to 63 characters, optionally behind a DNS subdomain prefix and `/`
/// (`kubernetes.io/metadata.name`).
fn validate_label_key(path: &str, key: &str) -> Result<(), FieldError> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            validate_dns1123_subdomain(path, prefix, "DNS subdomain")?;
            name
        }
        None => key,
    };
    if name.is_empty() {
        return Err(FieldError::invalid(
            path,
            key,
            "is not a label key; a key is a name, optionally behind a DNS prefix and '/' (team, example.com/team)",
        ));
    }
    validate_label_name(path, name)
}

/// A label value: empty, or a label name.
fn validate_label_value(path: &str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Ok(());
    }
    validate_label_name(path, value)
}

#[cfg(test)]
#[path = "label_selector_tests.rs"]
mod tests;
