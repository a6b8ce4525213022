//! Envoy's access log: one line per HTTP request (and per TLS passthrough connection), written by
//! every listener sluice configures. The format and the destination come from `sluice serve`'s
//! `--access-log-format` and `--access-log-path` (docs/observability.md).

use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog as EnvoyAccessLog, access_log};
use envoy_types::pb::envoy::extensions::access_loggers::file::v3::FileAccessLog;
use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::{
    StderrAccessLog, StdoutAccessLog,
};
use envoy_types::pb::google::protobuf::{Any, Value, value::Kind};
use prost::{Message, Name};

/// Where Envoy writes its access log unless told otherwise: its standard output, which a
/// container's log collection picks up.
pub const DEFAULT_ACCESS_LOG_PATH: &str = "/dev/stdout";

/// How each access log line is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogFormat {
    /// One JSON object per line with the fields of [`JSON_FIELDS`].
    #[default]
    Json,
    /// Envoy's default text format
    /// (`[time] "METHOD PATH PROTOCOL" CODE FLAGS ... "AUTHORITY" "UPSTREAM"`).
    Envoy,
    /// No access log.
    Off,
}

/// The access log of every listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessLog {
    pub format: AccessLogFormat,
    /// A path on Envoy's machine. `/dev/stdout` and `/dev/stderr` are Envoy's own streams.
    pub path: String,
}

impl Default for AccessLog {
    fn default() -> Self {
        AccessLog {
            format: AccessLogFormat::Json,
            path: DEFAULT_ACCESS_LOG_PATH.to_string(),
        }
    }
}

/// The keys of a JSON access log line and the Envoy command that fills each. A value that is one
/// command keeps its type (numbers stay numbers); a value Envoy does not have is `null`.
pub const JSON_FIELDS: &[(&str, &str)] = &[
    ("@timestamp", "%START_TIME%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"),
    ("downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"),
    ("duration", "%DURATION%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("requested_server_name", "%REQUESTED_SERVER_NAME%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("traceparent", "%REQ(TRACEPARENT)%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    (
        "upstream_service_time",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
];

/// The `access_log` entries of an HTTP connection manager or TCP proxy: none when the log is off,
/// else one.
///
/// The logger's configuration is encoded through [`StreamLogger`] and [`FileLogger`] rather than envoy-types' messages:
/// a JSON format is a `google.protobuf.Struct`, whose map envoy-types keeps in a `HashMap`, so its
/// encoding would change order from one sluice process to the next, and with it the listener's
/// version (an update that drains every connection). These write the same fields with the
/// keys in order.
pub fn access_logs(log: &AccessLog) -> Vec<EnvoyAccessLog> {
    let json = match log.format {
        AccessLogFormat::Off => return Vec::new(),
        AccessLogFormat::Envoy => false,
        AccessLogFormat::Json => true,
    };
    let log_format = json.then(|| FormatString {
        json_format: Some(SortedStruct {
            fields: JSON_FIELDS
                .iter()
                .map(|(key, command)| {
                    let value = Value {
                        kind: Some(Kind::StringValue(command.to_string())),
                    };
                    (key.to_string(), value)
                })
                .collect(),
        }),
    });
    let (name, type_url, logger) = match log.path.as_str() {
        "/dev/stdout" => (
            "envoy.access_loggers.stdout",
            StdoutAccessLog::type_url(),
            StreamLogger { log_format }.encode_to_vec(),
        ),
        "/dev/stderr" => (
            "envoy.access_loggers.stderr",
            StderrAccessLog::type_url(),
            StreamLogger { log_format }.encode_to_vec(),
        ),
        path => (
            "envoy.access_loggers.file",
            FileAccessLog::type_url(),
            FileLogger {
                path: path.to_string(),
                log_format,
            }
            .encode_to_vec(),
        ),
    };
    vec![EnvoyAccessLog {
        name: name.to_string(),
        filter: None,
        config_type: Some(access_log::ConfigType::TypedConfig(Any {
            type_url,
            value: logger,
        })),
    }]
}

/// The field sluice sets of Envoy's `StdoutAccessLog` and `StderrAccessLog`.
#[derive(Clone, PartialEq, prost::Message)]
struct StreamLogger {
    #[prost(message, optional, tag = "1")]
    log_format: Option<FormatString>,
}

/// The fields sluice sets of Envoy's `FileAccessLog`.
#[derive(Clone, PartialEq, prost::Message)]
struct FileLogger {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(message, optional, tag = "5")]
    log_format: Option<FormatString>,
}

/// `envoy.config.core.v3.SubstitutionFormatString` with its `json_format` (2) alone.
#[derive(Clone, PartialEq, prost::Message)]
struct FormatString {
    #[prost(message, optional, tag = "2")]
    json_format: Option<SortedStruct>,
}

/// `google.protobuf.Struct` with its keys encoded in order.
#[derive(Clone, PartialEq, prost::Message)]
struct SortedStruct {
    #[prost(btree_map = "string, message", tag = "1")]
    fields: std::collections::BTreeMap<String, Value>,
}

/// Checks a `--access-log-path`: Envoy opens it, so it must be an absolute path on Envoy's machine.
pub fn parse_access_log_path(path: &str) -> Result<String, String> {
    if path.starts_with('/') && !path.contains('\0') {
        Ok(path.to_string())
    } else {
        Err(format!(
            "{path:?} is not an absolute path; give a file on Envoy's machine such as \
             /var/log/envoy/access.log, or {DEFAULT_ACCESS_LOG_PATH}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::substitution_format_string;
    use envoy_types::pb::envoy::extensions::access_loggers::file::v3::file_access_log;
    use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::{
        stderr_access_log, stdout_access_log,
    };

    fn decoded<T: Message + Default>(log: &EnvoyAccessLog) -> T {
        let Some(access_log::ConfigType::TypedConfig(any)) = &log.config_type else {
            panic!("typed config expected: {log:?}");
        };
        T::decode(any.value.as_slice()).expect("decodes")
    }

    #[test]
    fn json_to_stdout_by_default() {
        let logs = access_logs(&AccessLog::default());
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].name, "envoy.access_loggers.stdout");
        let stdout: StdoutAccessLog = decoded(&logs[0]);
        let Some(stdout_access_log::AccessLogFormat::LogFormat(f)) = stdout.access_log_format
        else {
            panic!("a format expected");
        };
        let Some(substitution_format_string::Format::JsonFormat(s)) = f.format else {
            panic!("JSON expected");
        };
        assert_eq!(s.fields.len(), JSON_FIELDS.len());
        let code = &s.fields["response_code"];
        assert_eq!(code.kind, Some(Kind::StringValue("%RESPONSE_CODE%".into())));
    }

    #[test]
    fn a_file_path_and_envoys_own_format() {
        let logs = access_logs(&AccessLog {
            format: AccessLogFormat::Envoy,
            path: "/var/log/envoy/access.log".into(),
        });
        assert_eq!(logs[0].name, "envoy.access_loggers.file");
        let file: FileAccessLog = decoded(&logs[0]);
        assert_eq!(file.path, "/var/log/envoy/access.log");
        assert_eq!(file.access_log_format, None);
        let stderr = access_logs(&AccessLog {
            format: AccessLogFormat::Json,
            path: "/dev/stderr".into(),
        });
        assert_eq!(stderr[0].name, "envoy.access_loggers.stderr");
        let stderr: StderrAccessLog = decoded(&stderr[0]);
        assert!(matches!(
            stderr.access_log_format,
            Some(stderr_access_log::AccessLogFormat::LogFormat(_))
        ));
        let json_file = access_logs(&AccessLog {
            format: AccessLogFormat::Json,
            path: "/var/log/envoy/access.json".into(),
        });
        let file: FileAccessLog = decoded(&json_file[0]);
        assert_eq!(file.path, "/var/log/envoy/access.json");
        let Some(file_access_log::AccessLogFormat::LogFormat(f)) = file.access_log_format else {
            panic!("a format expected");
        };
        let Some(substitution_format_string::Format::JsonFormat(s)) = f.format else {
            panic!("JSON expected");
        };
        assert_eq!(s.fields.len(), JSON_FIELDS.len());
    }

    #[test]
    fn the_encoding_has_the_json_keys_in_order() {
        // Envoy's own messages decode it (above); their encoding of the decoded struct is in the
        // HashMap's order, sluice's in the keys' order, every time.
        let bytes = |log: &AccessLog| match &access_logs(log)[0].config_type {
            Some(access_log::ConfigType::TypedConfig(any)) => any.value.clone(),
            None => panic!("typed config expected"),
        };
        let a = bytes(&AccessLog::default());
        let text = String::from_utf8_lossy(&a);
        let mut keys: Vec<usize> = JSON_FIELDS
            .iter()
            .map(|(k, _)| text.find(&format!("{k}\u{12}")).expect("key encoded"))
            .collect();
        let in_order = keys.windows(2).all(|w| w[0] < w[1]);
        keys.sort_unstable();
        assert!(in_order, "keys out of order at {keys:?}");
        assert!(JSON_FIELDS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn off_writes_no_access_log() {
        let off = AccessLog {
            format: AccessLogFormat::Off,
            ..Default::default()
        };
        assert!(access_logs(&off).is_empty());
    }

    #[test]
    fn a_relative_path_is_refused_with_the_fix() {
        assert_eq!(
            parse_access_log_path("/tmp/a.log").as_deref(),
            Ok("/tmp/a.log")
        );
        let e = parse_access_log_path("logs/access.log").unwrap_err();
        assert!(
            e.contains("\"logs/access.log\" is not an absolute path"),
            "{e}"
        );
        assert!(e.contains("/dev/stdout"), "{e}");
        assert!(parse_access_log_path("").is_err());
    }
}
