//! Kubernetes Events for the warnings of the routing model (`ObjectStatus::warnings`): an
//! Ingress's own `status` has room for load-balancer addresses only, so a warning such as "the
//! class annotation and spec.ingressClassName disagree" reaches its owner as a `Warning` Event on
//! the object (`kubectl describe ingress` shows it), published by the leader.
//!
//! A warning is published when it appears (a new object, or a changed one), and again for every
//! warning there is when this replica becomes the leader; the API server's Event series count
//! repeats. Publishing is bounded (a timeout per Event) and a failure is logged, never retried in a
//! loop: Events are advice, the status is the record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::watch;

use super::Built;
use sluice_core::api::ObjectRef;
use sluice_core::dag::{Dag, ObjectStatus};

/// The longest Event note the API server takes.
const MAX_NOTE: usize = 1024;
/// How long one Event may take to publish.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// What the loop reacts to.
pub struct EventInputs {
    pub built: watch::Receiver<Option<Arc<Built>>>,
    pub leader: watch::Receiver<bool>,
    pub shutdown: watch::Receiver<bool>,
}

/// Publishes the warnings of each build while this replica leads; runs until shutdown.
pub async fn event_loop(client: Client, identity: String, mut inputs: EventInputs) {
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "sluice".into(),
            instance: Some(identity),
        },
    );
    // The model whose warnings were published last (None: publish every warning of the next).
    let mut published: Option<Arc<Dag>> = None;
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let leading = *inputs.leader.borrow_and_update();
        let built = inputs.built.borrow_and_update().clone();
        match (leading, built) {
            (true, Some(built)) => {
                for (obj, status) in new_warnings(published.as_deref(), &built.dag) {
                    publish(&recorder, obj, status).await;
                }
                published = Some(built.dag.clone());
            }
            _ => published = None,
        }
        tokio::select! {
            r = inputs.built.changed() => if r.is_err() { return },
            r = inputs.leader.changed() => if r.is_err() { return },
            _ = inputs.shutdown.changed() => {}
        }
    }
}

/// The objects of `dag` with warnings that `prev` did not have for them (all of them without
/// `prev`).
pub fn new_warnings<'d>(
    prev: Option<&Dag>,
    dag: &'d Dag,
) -> Vec<(&'d ObjectRef, &'d ObjectStatus)> {
    use sluice_core::pmap::DiffItem;
    let Some(prev) = prev else {
        return (dag.statuses.iter())
            .filter(|(_, s)| !s.warnings.is_empty())
            .collect();
    };
    let mut out = Vec::new();
    let mut old: HashMap<&ObjectRef, &ObjectStatus> = HashMap::new();
    let mut changed = Vec::new();
    for item in prev.statuses.diff(&dag.statuses) {
        match item {
            DiffItem::Add(obj, status) => changed.push((obj, status)),
            DiffItem::Update {
                old: (o, before),
                new,
            } => {
                old.insert(o, before);
                changed.push(new);
            }
            DiffItem::Remove(..) => {}
        }
    }
    for (obj, status) in changed {
        let before = old.get(obj).map_or(&[][..], |s| s.warnings.as_slice());
        if !status.warnings.is_empty() && status.warnings != before {
            out.push((obj, status));
        }
    }
    out
}

async fn publish(recorder: &Recorder, obj: &ObjectRef, status: &ObjectStatus) {
    let reference = ObjectReference {
        api_version: Some(obj.kind.api_version().to_string()),
        kind: Some(obj.kind.kind().to_string()),
        name: Some(obj.key.name.to_string()),
        namespace: Some(obj.key.namespace.to_string()).filter(|n| !n.is_empty()),
        ..ObjectReference::default()
    };
    for w in &status.warnings {
        let event = Event {
            type_: EventType::Warning,
            reason: w.reason.to_string(),
            note: Some(bounded(&w.to_string())),
            action: "Route".into(),
            secondary: None,
        };
        match tokio::time::timeout(PUBLISH_TIMEOUT, recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => {
                tracing::debug!(object = %obj, reason = w.reason, "warning event published")
            }
            Ok(Err(e)) => {
                tracing::warn!(object = %obj, error = %e, "cannot publish a warning event")
            }
            Err(_) => tracing::warn!(object = %obj, "publishing a warning event timed out"),
        }
    }
}

/// The note cut to what the API server takes, on a character boundary.
fn bounded(text: &str) -> String {
    if text.len() <= MAX_NOTE {
        return text.to_string();
    }
    let mut end = MAX_NOTE - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::dag::Options;
    use sluice_core::manifest::parse_documents;
    use sluice_core::store::Snapshot;

    fn dag(yaml: &str) -> Dag {
        let objects = parse_documents("t.yaml", yaml)
            .unwrap()
            .into_iter()
            .filter_map(|(_, d)| match d {
                sluice_core::manifest::Document::Object(o) => Some(o),
                _ => None,
            });
        sluice_core::dag::build(&Snapshot::from_objects(objects), &Options::default())
    }

    fn ingress(name: &str, annotation: &str, field: &str) -> String {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: ns, annotations: {{kubernetes.io/ingress.class: {annotation}}}}}\nspec:\n  ingressClassName: {field}\n  defaultBackend: {{service: {{name: web, port: {{number: 80}}}}}}\n---\n"
        )
    }

    fn names(v: &[(&ObjectRef, &ObjectStatus)]) -> Vec<String> {
        v.iter().map(|(o, _)| o.key.name.to_string()).collect()
    }

    #[test]
    fn warnings_are_published_when_they_appear_and_all_of_them_for_a_new_leader() {
        let first = dag(&format!(
            "{}{}",
            ingress("conflict", "sluice", "nginx"),
            ingress("agree", "sluice", "sluice")
        ));
        assert_eq!(names(&new_warnings(None, &first)), ["conflict"]);
        assert!(new_warnings(Some(&first), &first).is_empty());
        // A second object gets a warning; the first keeps its own: only the new one.
        let second = dag(&format!(
            "{}{}",
            ingress("conflict", "sluice", "nginx"),
            ingress("agree", "sluice", "edge")
        ));
        assert_eq!(names(&new_warnings(Some(&first), &second)), ["agree"]);
        // A changed warning is published again.
        let third = dag(&format!(
            "{}{}",
            ingress("conflict", "sluice", "other"),
            ingress("agree", "sluice", "edge")
        ));
        assert_eq!(names(&new_warnings(Some(&second), &third)), ["conflict"]);
    }

    #[test]
    fn a_long_note_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_NOTE);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_NOTE && cut.ends_with("..."));
        assert_eq!(bounded("short"), "short");
    }
}
