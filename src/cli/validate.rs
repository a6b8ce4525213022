//! `sluice validate -f PATH ...`: the admission rules on every object (the functions the webhook
//! calls), then `dag::build` over the whole set, so a CI pipeline sees both "would kubectl apply
//! accept this" and "what status would it get next to everything else".
//!
//! Exit codes: 0 all allowed and nothing invalid (orphaned is a warning); 1 something denied or
//! invalid; 2 unreadable input or bad flags.

use std::collections::BTreeMap;
use std::io::Write;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::api::ObjectRef;
use crate::dag::{self, State};
use crate::manifest::{Document, Loaded, Source, UnknownField, load_paths};
use crate::store::{AnyObject, Snapshot};
use crate::validate::validate_object_for_class;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// File, directory (searched recursively for .yaml/.yml/.json) or `-` for stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub paths: Vec<String>,
    #[command(flatten)]
    pub routing: super::RoutingFlags,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Human)]
    pub output: OutputFormat,
}

/// The result for one object: the admission verdict and the status in the context of the set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The admission verdict alone.
    pub allowed: bool,
    /// valid, invalid, orphaned or ignored.
    pub status: String,
    pub messages: Vec<String>,
    #[serde(skip)]
    pub source: Option<Source>,
    /// Deprecated spellings and fields sluice does not read; in JSON only when there are any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Validates decoded documents; returns one report per routing object (and per object the admission
/// rules deny), in input order. Each unknown field is a warning on its object's report.
pub fn validate_documents(loaded: Loaded, options: &dag::Options) -> Vec<ObjectReport> {
    let mut unknown = unknown_fields_by_object(&loaded.unknown_fields);
    let mut admitted = Admitted::default();
    for (source, doc) in loaded.documents {
        admitted.add(source, doc, &mut unknown, options);
    }
    let built = dag::build(&Snapshot::from_objects(admitted.objects), options);
    let mut out = Vec::new();
    for r in admitted.order {
        let report = admitted
            .reports
            .remove(&r)
            .expect("every ordered object has a report");
        if let Some(report) = with_status(report, &r, built.statuses.get(&r)) {
            out.push(report);
        }
    }
    out
}

/// The unknown fields' warnings, by the document and object they were found in.
fn unknown_fields_by_object(fields: &[UnknownField]) -> BTreeMap<(Source, ObjectRef), Vec<String>> {
    let mut unknown: BTreeMap<(Source, ObjectRef), Vec<String>> = BTreeMap::new();
    for u in fields {
        unknown
            .entry((u.at.clone(), u.object.clone()))
            .or_default()
            .push(u.message());
    }
    unknown
}

/// The documents checked by the admission rules so far: a report per object (the last
/// definition of each), the objects in the order first seen, and the decoded objects to build.
#[derive(Default)]
struct Admitted {
    order: Vec<ObjectRef>,
    reports: BTreeMap<ObjectRef, ObjectReport>,
    objects: Vec<AnyObject>,
}

impl Admitted {
    /// Checks one document (skipped ones are not objects) and records its report, with its
    /// unknown fields (taken from `unknown`) as warnings and a message when it redefines an
    /// object.
    fn add(
        &mut self,
        source: Source,
        doc: Document,
        unknown: &mut BTreeMap<(Source, ObjectRef), Vec<String>>,
        options: &dag::Options,
    ) {
        let (object, allowed, mut messages, mut warnings) = match doc {
            Document::Skipped { .. } => return,
            Document::Rejected { object, error } => {
                (object, false, vec![error.to_string()], Vec::new())
            }
            Document::Object(obj) => {
                let verdict = validate_object_for_class(&obj, &options.ingress_class_name);
                let r = obj.object_ref();
                self.objects.push(obj);
                let msgs = verdict.errors.iter().map(ToString::to_string).collect();
                (r, verdict.allowed(), msgs, verdict.warnings)
            }
        };
        if let Some(fields) = unknown.remove(&(source.clone(), object.clone())) {
            warnings.extend(fields);
        }
        if let Some(previous) = self.reports.get(&object) {
            if let Some(prev) = &previous.source {
                messages.push(format!(
                    "defined more than once (also at {prev}); the last definition is used"
                ));
            }
        } else {
            self.order.push(object.clone());
        }
        let status = if allowed {
            State::Valid
        } else {
            State::Invalid
        };
        self.reports.insert(
            object.clone(),
            ObjectReport {
                api_version: object.kind.api_version().to_string(),
                kind: object.kind.kind().to_string(),
                namespace: object.key.namespace.to_string(),
                name: object.key.name.to_string(),
                allowed,
                status: status.as_str().to_string(),
                messages,
                source: Some(source),
                warnings,
            },
        );
    }
}

/// An object's report completed by the build's status for it (`status`): the state, when the
/// admission rules allowed it, and the messages and warnings not already there. A routing kind
/// the build does not route is ignored; None for an allowed supporting object (Service,
/// Secret, …), which is not reported.
fn with_status(
    mut report: ObjectReport,
    r: &ObjectRef,
    status: Option<&dag::ObjectStatus>,
) -> Option<ObjectReport> {
    match status {
        Some(status) => {
            if report.allowed {
                report.status = status.state.as_str().to_string();
            }
            for m in status.messages.iter().map(ToString::to_string) {
                if !report.messages.contains(&m) {
                    report.messages.push(m);
                }
            }
            for w in status.warnings.iter().map(ToString::to_string) {
                if !report.warnings.contains(&w) {
                    report.warnings.push(w);
                }
            }
            if status.state != State::Valid
                && status.messages.is_empty()
                && !report.messages.iter().any(|m| *m == status.description)
            {
                report.messages.push(status.description.to_string());
            }
        }
        None if r.kind.is_routing() && report.allowed => {
            report.status = State::Ignored.as_str().to_string();
            report.messages.push(format!("{} objects are checked by the admission rules but not routed by this version of sluice", r.kind.kind()));
        }
        None if report.allowed => return None, // a supporting object (Service, Secret, …) that is fine
        None => {}
    }
    Some(report)
}

/// Exit code for a set of reports: 1 when anything is denied or invalid.
pub fn exit_code(reports: &[ObjectReport]) -> u8 {
    let bad = reports
        .iter()
        .any(|r| !r.allowed || r.status == State::Invalid.as_str());
    u8::from(bad)
}

pub fn run(args: ValidateArgs) -> u8 {
    let docs = match load_paths(&args.paths) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let options = args.routing.dag_options();
    let reports = validate_documents(docs, &options);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = match args.output {
        OutputFormat::Json => reports.iter().try_for_each(|r| {
            writeln!(
                out,
                "{}",
                serde_json::to_string(r).expect("reports serialize")
            )
        }),
        OutputFormat::Human => print_human(&mut out, &reports),
    };
    if result.is_err() {
        return 2;
    }
    exit_code(&reports)
}

fn print_human(out: &mut impl Write, reports: &[ObjectReport]) -> std::io::Result<()> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut denied = 0;
    for r in reports {
        let verdict = if !r.allowed {
            denied += 1;
            "DENIED"
        } else {
            match r.status.as_str() {
                "valid" => "ok",
                "invalid" => "INVALID",
                "orphaned" => "orphaned",
                _ => "ignored",
            }
        };
        *counts.entry(r.status.as_str()).or_default() += 1;
        let ns = if r.namespace.is_empty() {
            String::new()
        } else {
            format!("{}/", r.namespace)
        };
        let at = r
            .source
            .as_ref()
            .map(|s| format!("  [{s}]"))
            .unwrap_or_default();
        writeln!(
            out,
            "{verdict:<8} {} {ns}{} ({}){at}",
            r.kind, r.name, r.api_version
        )?;
        for m in &r.messages {
            writeln!(out, "         - {m}")?;
        }
        for w in &r.warnings {
            writeln!(out, "         - warning: {w}")?;
        }
    }
    let n = |k: &str| counts.get(k).copied().unwrap_or(0);
    writeln!(
        out,
        "{} objects: {} valid, {} invalid, {} orphaned, {} ignored; {} denied by the admission rules",
        reports.len(),
        n("valid"),
        n("invalid"),
        n("orphaned"),
        n("ignored"),
        denied
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Kind;
    use crate::manifest::decode_value;

    fn source(index: usize) -> Source {
        Source {
            file: "a.yaml".into(),
            index,
        }
    }

    fn service_document() -> Document {
        decode_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]}
        }))
        .expect("test Service decodes")
    }

    #[test]
    fn a_second_definition_replaces_the_first_and_says_so() {
        let mut admitted = Admitted::default();
        let options = dag::Options::default();
        let mut unknown = BTreeMap::new();
        admitted.add(source(0), service_document(), &mut unknown, &options);
        admitted.add(source(1), service_document(), &mut unknown, &options);
        assert_eq!(admitted.order.len(), 1);
        assert_eq!(admitted.objects.len(), 2);
        let report = &admitted.reports[&admitted.order[0]];
        assert_eq!(report.source, Some(source(1)));
        assert_eq!(
            report.messages,
            vec![
                "defined more than once (also at a.yaml (document 0)); the last definition is used"
            ]
        );
    }

    #[test]
    fn without_a_status_a_routing_object_is_ignored_and_a_fine_supporting_one_not_reported() {
        let mut admitted = Admitted::default();
        let mut unknown = BTreeMap::new();
        let options = dag::Options::default();
        admitted.add(source(0), service_document(), &mut unknown, &options);
        let service = admitted.order[0].clone();
        let report = admitted.reports.remove(&service).expect("a report");
        assert_eq!(with_status(report.clone(), &service, None), None);
        let ingress = ObjectRef::new(Kind::Ingress, "default", "web");
        let ignored = with_status(report, &ingress, None).expect("a routing object is reported");
        assert_eq!(ignored.status, State::Ignored.as_str());
    }
}
