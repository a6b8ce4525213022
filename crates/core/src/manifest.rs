//! Decoding manifests: multi-document YAML or JSON (also `kind: List`) from files, directories or
//! stdin into typed objects. Used by the CLI and standalone mode; the webhook decodes single objects
//! with [`decode_value`].
//!
//! Three outcomes per document: a typed object; a kind sluice does not read (skipped); or a
//! document of a kind sluice reads that does not fit its schema (rejected, with the field path).
//! Unreadable input (missing file, YAML syntax error, a document that is not a mapping) is an error
//! naming the file and the document index.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{Kind, ObjectRef};
use crate::store::AnyObject;
use crate::validate::FieldError;

/// Where a document came from: file (or `-`) and its 0-based index in that file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Source {
    pub file: String,
    pub index: usize,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (document {})", self.file, self.index)
    }
}

/// One decoded document.
#[derive(Clone, Debug)]
pub enum Document {
    Object(AnyObject),
    /// A kind sluice does not read (Deployments, ConfigMaps, …).
    Skipped {
        api_version: String,
        kind: String,
    },
    /// A kind sluice reads whose content does not fit the schema.
    Rejected {
        object: ObjectRef,
        error: FieldError,
    },
}

/// Unreadable input.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{at}: {message}")]
    Syntax { at: Source, message: String },
}

/// Why a single value could not become an object.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("document is not a mapping (an object with apiVersion and kind)")]
    NotAMapping,
    #[error("document has no {0}")]
    MissingTypeMeta(&'static str),
}

/// A field of a manifest that the schema of its kind does not have: sluice does not read it.
/// Usually a misspelt field name, or a field of another version of the kind (`prefixRewrite` of
/// `projectcontour.io/v1` in a `contour.heptio.com/v1beta1` IngressRoute). The object is used
/// without it, and the field is reported rather than silently dropped (in a cluster, the API
/// server refuses or drops such fields before sluice sees the object).
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownField {
    pub at: Source,
    pub object: ObjectRef,
    /// Where the field is, as in other messages: `spec.routes[0].prefixRewrite`.
    pub path: String,
}

impl UnknownField {
    /// The message without the location (for reports that name the object already).
    pub fn message(&self) -> String {
        format!(
            "unknown field {}: {} {} has no such field, so it has no effect; check its spelling and the apiVersion",
            self.path,
            self.object.kind.kind(),
            self.object.kind.api_version()
        )
    }
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.at, self.object, self.message())
    }
}

/// What [`load_paths`] read: every document, and the fields of decoded objects that sluice does
/// not read.
#[derive(Debug, Default)]
pub struct Loaded {
    pub documents: Vec<(Source, Document)>,
    pub unknown_fields: Vec<UnknownField>,
}

/// Decodes one JSON value. Ok(None): a kind sluice does not read. Err(Rejected-style FieldError)
/// is carried in [`Document::Rejected`] by [`decode_document`].
pub fn decode_value(value: Value) -> Result<Document, DecodeError> {
    decode_value_noting(value, None)
}

/// [`decode_value`], also noting the path of every field the kind's schema does not have in
/// `unknown` (when given). Cluster mode does not ask: the API server has already dropped such
/// fields from what it stores.
pub fn decode_value_noting(
    value: Value,
    unknown: Option<&mut Vec<String>>,
) -> Result<Document, DecodeError> {
    let Value::Object(mut map) = value else {
        return Err(DecodeError::NotAMapping);
    };
    let api_version = match map.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(DecodeError::MissingTypeMeta("apiVersion")),
    };
    let kind_name = match map.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(DecodeError::MissingTypeMeta("kind")),
    };
    let Some(kind) = Kind::from_type(&api_version, &kind_name) else {
        return Ok(Document::Skipped {
            api_version,
            kind: kind_name,
        });
    };
    // Status is computed by sluice, never read: whatever a manifest carries there is dropped.
    map.remove("status");
    let meta = map.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let namespace = if kind.is_cluster_scoped() {
        String::new()
    } else {
        meta.and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string()
    };
    let object = ObjectRef::new(kind, namespace, name.clone());
    if name.is_empty() {
        return Ok(Document::Rejected {
            object,
            error: FieldError::required("metadata.name", "every object needs a name"),
        });
    }
    let value = Value::Object(map);
    let u = unknown;
    let decoded = match kind {
        Kind::Ingress => typed(value, u).map(AnyObject::Ingress),
        Kind::IngressClass => typed(value, u).map(AnyObject::IngressClass),
        Kind::IngressRouteV1beta1 => typed(value, u).map(AnyObject::IngressRouteV1beta1),
        Kind::IngressRouteV1 => typed(value, u).map(AnyObject::IngressRouteV1),
        Kind::RouteV1alpha1 => typed(value, u).map(AnyObject::RouteV1alpha1),
        Kind::Service => typed(value, u).map(AnyObject::Service),
        Kind::EndpointSlice => typed(value, u).map(AnyObject::EndpointSlice),
        Kind::Secret => typed(value, u).map(AnyObject::Secret),
        Kind::GatewayClass => typed(value, u).map(AnyObject::GatewayClass),
        Kind::Gateway => typed(value, u).map(AnyObject::Gateway),
        Kind::HttpRoute => typed(value, u).map(AnyObject::HttpRoute),
        Kind::GrpcRoute => typed(value, u).map(AnyObject::GrpcRoute),
        Kind::TlsRoute => typed(value, u).map(AnyObject::TlsRoute),
        Kind::TcpRoute => typed(value, u).map(AnyObject::TcpRoute),
        Kind::ListenerSet => typed(value, u).map(AnyObject::ListenerSet),
        Kind::ReferenceGrant => typed(value, u).map(AnyObject::ReferenceGrant),
        Kind::Namespace => typed(value, u).map(AnyObject::Namespace),
        Kind::ConfigMap => typed(value, u).map(AnyObject::ConfigMap),
        Kind::BackendTlsPolicy => typed(value, u).map(AnyObject::BackendTlsPolicy),
    };
    Ok(match decoded {
        Ok(obj) => Document::Object(obj),
        Err(error) => Document::Rejected { object, error },
    })
}

/// Deserializes with the failing field's path in the error; notes the paths of fields the type
/// does not have in `unknown`, when given.
fn typed<T: DeserializeOwned>(
    value: Value,
    unknown: Option<&mut Vec<String>>,
) -> Result<Arc<T>, FieldError> {
    let field_error = |e: serde_path_to_error::Error<serde_json::Error>| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        FieldError::spec(path, e.into_inner().to_string())
    };
    let Some(unknown) = unknown else {
        return serde_path_to_error::deserialize(value)
            .map(Arc::new)
            .map_err(field_error);
    };
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let result = serde_ignored::deserialize(de, |path| {
        let path = field_path(&path);
        // Read by `decode_value` itself; the typed objects of custom kinds skip them.
        if path != "apiVersion" && path != "kind" {
            unknown.push(path);
        }
    });
    result
        .map(Arc::new)
        .map_err(|e| field_error(serde_path_to_error::Error::new(track.path(), e)))
}

/// A path of `serde_ignored` written as sluice's messages write paths: `spec.routes[0].name`.
fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => match field_path(parent) {
            p if p.is_empty() => key.clone(),
            p => format!("{p}.{key}"),
        },
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

/// Splits a text into documents (YAML, which includes JSON) and decodes each. `kind: List` documents
/// are expanded into their items.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<(Source, Document)>, LoadError> {
    let mut out = Loaded::default();
    parse_into(file, text, &mut out)?;
    Ok(out.documents)
}

/// [`parse_documents`] into `out`, with the unknown fields of each decoded object.
fn parse_into(file: &str, text: &str, out: &mut Loaded) -> Result<(), LoadError> {
    for (index, de) in serde_norway::Deserializer::from_str(text).enumerate() {
        let source = Source {
            file: file.to_string(),
            index,
        };
        let value: Value = serde::Deserialize::deserialize(de).map_err(|e| LoadError::Syntax {
            at: source.clone(),
            message: e.to_string(),
        })?;
        if value.is_null() {
            continue; // empty document, e.g. a trailing `---`
        }
        let items = match &value {
            Value::Object(m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
                match m.get("items") {
                    Some(Value::Array(items)) => items.clone(),
                    _ => Vec::new(),
                }
            }
            _ => vec![value],
        };
        for item in items {
            let mut unknown = Vec::new();
            let doc =
                decode_value_noting(item, Some(&mut unknown)).map_err(|e| LoadError::Syntax {
                    at: source.clone(),
                    message: e.to_string(),
                })?;
            if let Document::Object(obj) = &doc {
                let object = obj.object_ref();
                out.unknown_fields
                    .extend(unknown.into_iter().map(|path| UnknownField {
                        at: source.clone(),
                        object: object.clone(),
                        path,
                    }));
            }
            out.documents.push((source.clone(), doc));
        }
    }
    Ok(())
}

/// Whether a file name looks like a manifest.
pub fn is_manifest_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml" | "json")
    )
}

/// Every manifest file under a path (the path itself when it is a file), sorted, hidden files and
/// directories skipped.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |e| LoadError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| LoadError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| LoadError::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
            let p = entry.path();
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if hidden {
                continue;
            }
            let ft = entry.file_type().map_err(|e| LoadError::Io {
                path: p.display().to_string(),
                source: e,
            })?;
            if ft.is_dir() {
                stack.push(p);
            } else if is_manifest_file(&p) {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads and decodes every manifest under the given paths (`-` reads stdin).
pub fn load_paths(paths: &[String]) -> Result<Loaded, LoadError> {
    let mut out = Loaded::default();
    for p in paths {
        if p == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
                LoadError::Io {
                    path: "-".into(),
                    source: e,
                }
            })?;
            parse_into("-", &text, &mut out)?;
            continue;
        }
        for file in manifest_files(Path::new(p))? {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|e| LoadError::Io {
                path: name.clone(),
                source: e,
            })?;
            parse_into(&name, &text, &mut out)?;
        }
    }
    Ok(out)
}

/// Test input: snapshots written as YAML (an inherent method of the store's type, defined here
/// because it parses manifests).
#[cfg(any(test, feature = "test-support"))]
impl crate::store::Snapshot {
    /// The snapshot of the objects of a YAML stream (its other documents skipped): test input.
    pub fn from_test_yaml(yaml: &str) -> crate::store::Snapshot {
        let docs = parse_documents("test.yaml", yaml).expect("test input parses");
        crate::store::Snapshot::from_objects(docs.into_iter().filter_map(|(_, d)| match d {
            Document::Object(o) => Some(o),
            _ => None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_multi_document_yaml_and_lists() {
        let text = r#"
apiVersion: v1
kind: Service
metadata: {name: a}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Secret
  metadata: {name: s, namespace: x}
---
"#;
        let docs = parse_documents("f.yaml", text).unwrap();
        assert_eq!(docs.len(), 3);
        match &docs[0].1 {
            Document::Object(o) => assert_eq!(o.key().to_string(), "default/a"),
            d => panic!("{d:?}"),
        }
        assert!(matches!(&docs[1].1, Document::Skipped { kind, .. } if kind == "Deployment"));
        assert!(matches!(&docs[2].1, Document::Object(AnyObject::Secret(_))));
        assert_eq!(docs[2].0.index, 2);
    }

    #[test]
    fn schema_mismatch_names_the_field() {
        let text = r#"{"apiVersion":"contour.heptio.com/v1beta1","kind":"IngressRoute","metadata":{"name":"x"},"spec":{"routes":[{"match":"/","services":[{"name":"a","port":"eighty"}]}]}}"#;
        let docs = parse_documents("f.json", text).unwrap();
        match &docs[0].1 {
            Document::Rejected { error, .. } => {
                assert_eq!(error.path, "spec.routes[0].services[0].port");
                assert!(
                    error.message.contains("invalid type: string \"eighty\""),
                    "{}",
                    error.message
                );
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn unknown_fields_are_noted_with_their_paths_and_the_object_is_kept() {
        let text = r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: web, namespace: shop, labelz: {a: b}}
spec:
  virtualhost: {fqdn: web.example.com}
  routes:
  - match: /
    services: [{name: web, port: 80}]
  - match: /app
    prefixRewrite: /
    services: [{name: web, port: 80, wieght: 10}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing}
spec:
  rulez: []
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: web, port: {number: 80}}}
"#;
        let mut loaded = Loaded::default();
        parse_into("f.yaml", text, &mut loaded).unwrap();
        let paths: Vec<(String, &str)> = loaded
            .unknown_fields
            .iter()
            .map(|u| (u.object.to_string(), u.path.as_str()))
            .collect();
        let ir = "IngressRoute shop/web".to_string();
        assert_eq!(
            paths,
            vec![
                (ir.clone(), "metadata.labelz"),
                (ir.clone(), "spec.routes[1].prefixRewrite"),
                (ir, "spec.routes[1].services[0].wieght"),
                ("Ingress default/ing".to_string(), "spec.rulez"),
            ]
        );
        let u = &loaded.unknown_fields[1];
        assert_eq!(u.at.index, 0);
        assert_eq!(
            u.to_string(),
            "f.yaml (document 0): IngressRoute shop/web: unknown field \
             spec.routes[1].prefixRewrite: IngressRoute contour.heptio.com/v1beta1 has no such \
             field, so it has no effect; check its spelling and the apiVersion"
        );
        // Both objects are used, without the unknown fields.
        assert!(
            loaded
                .documents
                .iter()
                .all(|(_, d)| matches!(d, Document::Object(_)))
        );
        // The same documents without noting decode to the same objects.
        let plain = parse_documents("f.yaml", text).unwrap();
        assert_eq!(format!("{plain:?}"), format!("{:?}", loaded.documents));
    }

    #[test]
    fn documents_without_unknown_fields_note_nothing_and_errors_keep_their_path() {
        let mut loaded = Loaded::default();
        let ok = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"n","labels":{"a":"b"}},"spec":{"ports":[{"port":80}]}}"#;
        parse_into("ok.json", ok, &mut loaded).unwrap();
        assert_eq!(loaded.unknown_fields, vec![]);
        let bad = r#"{"apiVersion":"contour.heptio.com/v1beta1","kind":"IngressRoute","metadata":{"name":"x"},"spec":{"extra":1,"routes":[{"match":"/","services":[{"name":"a","port":"eighty"}]}]}}"#;
        parse_into("bad.json", bad, &mut loaded).unwrap();
        match &loaded.documents[1].1 {
            Document::Rejected { error, .. } => {
                assert_eq!(error.path, "spec.routes[0].services[0].port")
            }
            d => panic!("{d:?}"),
        }
        // A rejected document's unknown fields are not reported: its error is.
        assert_eq!(loaded.unknown_fields, vec![]);
    }

    #[test]
    fn syntax_errors_name_file_and_document() {
        let err = parse_documents(
            "bad.yaml",
            "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\nkey: [unclosed\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("bad.yaml (document 1): "),
            "{err}"
        );
        let err = parse_documents("scalar.yaml", "just a string\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "scalar.yaml (document 0): document is not a mapping (an object with apiVersion and kind)"
        );
        let err = parse_documents("nokind.yaml", "apiVersion: v1\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "nokind.yaml (document 0): document has no kind"
        );
    }

    #[test]
    fn missing_name_is_rejected() {
        let docs = parse_documents("f", "apiVersion: v1\nkind: Service\nmetadata: {}\n").unwrap();
        assert!(
            matches!(&docs[0].1, Document::Rejected { error, .. } if error.path == "metadata.name")
        );
    }
}
