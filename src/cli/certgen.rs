//! `sluice certgen`: creates the certificates sluice's chart needs as Secrets in the cluster, once,
//! and points the admission webhook configurations at the webhook's CA.
//!
//! The chart runs it as a Job before install and upgrade (the Secrets, so that the pods that
//! mount them can start) and after them (the `caBundle` of the webhook configurations, which exist
//! only then), with `certgen.enabled`. A Secret that is already there with its three keys is kept
//! as it is: every run after the first changes nothing, which is what GitOps tools that render
//! the chart anew at every sync (`helm template`) need, since a render cannot keep what it
//! generated before (docs/helm.md).
//!
//! What it makes, each a `kubernetes.io/tls` Secret with `ca.crt`, `tls.crt` and `tls.key`:
//! - the webhook's serving certificate, signed by a CA of its own (`--webhook-secret`);
//! - the xDS server's certificate and Envoy's client certificate, both signed by one CA of the
//!   xDS (`--xds-server-secret`, `--xds-client-secret`), which each side takes as its only trust.
//!
//! The CAs' keys are not kept: a certificate is never signed again. A pair of xDS Secrets with
//! one of the two missing cannot be completed, and certgen says so instead of replacing the other.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// The keys of a `kubernetes.io/tls` Secret certgen writes and requires.
pub const KEYS: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];
/// The field manager of certgen's `caBundle` patches.
const FIELD_MANAGER: &str = "sluice-certgen";

#[derive(Debug, Clone, Args)]
pub struct CertgenArgs {
    /// Namespace of the Secrets.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    /// Secret of the webhook's serving certificate.
    #[arg(long, requires = "webhook_dns_names")]
    pub webhook_secret: Option<String>,
    /// DNS names of the webhook's certificate (comma-separated), the first its subject: the
    /// webhook Service's `NAME.NAMESPACE.svc`, which the apiserver calls.
    #[arg(long, value_delimiter = ',')]
    pub webhook_dns_names: Vec<String>,
    /// Secret of sluice's xDS serving certificate.
    #[arg(long, requires_all = ["xds_client_secret", "xds_dns_names"])]
    pub xds_server_secret: Option<String>,
    /// Secret of Envoy's xDS client certificate.
    #[arg(long, requires = "xds_server_secret")]
    pub xds_client_secret: Option<String>,
    /// DNS names of the xDS serving certificate (comma-separated), the first its subject: the xDS
    /// Service's `NAME.NAMESPACE.svc`, the name Envoy's bootstrap checks.
    #[arg(long, value_delimiter = ',')]
    pub xds_dns_names: Vec<String>,
    /// Subject of Envoy's client certificate.
    #[arg(long, default_value = "envoy")]
    pub xds_client_name: String,
    /// The ValidatingWebhookConfiguration and MutatingWebhookConfiguration of this name get the
    /// webhook Secret's `ca.crt` as the `caBundle` of each of their webhooks. A configuration that
    /// does not exist yet is left for the next run.
    #[arg(long, requires = "webhook_secret")]
    pub webhook_configuration: Option<String>,
    /// Days the certificates it creates are valid.
    #[arg(long, default_value_t = 3650, value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub days: u32,
}

/// Runs `sluice certgen`; returns the exit code.
pub fn run(args: CertgenArgs) -> u8 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    if args.webhook_secret.is_none() && args.xds_server_secret.is_none() {
        eprintln!(
            "sluice certgen: nothing to do: give --webhook-secret, --xds-server-secret or both"
        );
        return 2;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice certgen: starting the runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(certgen(&args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice certgen: {e:#}");
            1
        }
    }
}

/// Creates what the arguments ask for and is missing: the webhook's certificate (and its CA in
/// the webhook configurations), then the xDS pair.
async fn certgen(args: &CertgenArgs) -> anyhow::Result<()> {
    let client = crate::app::cluster::connect().await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
    let validity = Validity::days_from_now(args.days);
    if let Some(name) = &args.webhook_secret {
        webhook_certificate(args, &client, &secrets, name, validity).await?;
    }
    if let (Some(server), Some(client_name)) = (&args.xds_server_secret, &args.xds_client_secret) {
        xds_certificates(args, &secrets, (server, client_name), validity).await?;
    }
    Ok(())
}

/// The webhook's serving certificate in Secret `name`, made with a CA of its own unless it is
/// there; then that CA as the `caBundle` of the webhook configuration, when one is named.
async fn webhook_certificate(
    args: &CertgenArgs,
    client: &Client,
    secrets: &Api<Secret>,
    name: &str,
    validity: Validity,
) -> anyhow::Result<()> {
    let existing = secrets
        .get_opt(name)
        .await
        .context(format!("reading Secret {name}"))?;
    match tls_data(name, existing.as_ref())? {
        Some(_) => tracing::info!(secret = %name, "webhook certificate kept"),
        None => {
            let ca = Ca::new("sluice webhook CA", validity)?;
            let leaf = ca.leaf(&args.webhook_dns_names, Usage::Server, validity)?;
            create(secrets, name, leaf).await?;
        }
    }
    if let Some(config) = &args.webhook_configuration {
        let secret = secrets
            .get(name)
            .await
            .context(format!("reading Secret {name}"))?;
        let ca = tls_data(name, Some(&secret))?
            .and_then(|mut d| d.remove("ca.crt"))
            .context(format!("Secret {name} lost its ca.crt"))?;
        set_ca_bundle(client, config, &ca).await?;
    }
    Ok(())
}

/// The xDS server's and Envoy's client certificates, in Secrets `server` and `client_name`: both
/// made with one new CA when neither is there, both kept when both are there with one CA, and
/// an error otherwise (certgen keeps no CA key to complete or mend a pair).
async fn xds_certificates(
    args: &CertgenArgs,
    secrets: &Api<Secret>,
    (server, client_name): (&str, &str),
    validity: Validity,
) -> anyhow::Result<()> {
    let server_old = secrets
        .get_opt(server)
        .await
        .context(format!("reading Secret {server}"))?;
    let client_old = secrets
        .get_opt(client_name)
        .await
        .context(format!("reading Secret {client_name}"))?;
    let server_data = tls_data(server, server_old.as_ref())?;
    let client_data = tls_data(client_name, client_old.as_ref())?;
    let have = (server_data.is_some(), client_data.is_some());
    match have {
        (true, true) => {
            let ca = |d: &Option<BTreeMap<String, String>>| d.as_ref().map(|d| d["ca.crt"].clone());
            if ca(&server_data) != ca(&client_data) {
                bail!(
                    "Secrets {server} and {client_name} hold certificates of different CAs, \
                     so Envoy and sluice do not trust each other: delete both in namespace \
                     {} and run certgen again to have both created",
                    args.namespace
                );
            }
            tracing::info!(%server, client = %client_name, "xDS certificates kept")
        }
        (false, false) => {
            let ca = Ca::new("sluice xDS CA", validity)?;
            let server_leaf = ca.leaf(&args.xds_dns_names, Usage::Server, validity)?;
            let client_leaf = ca.leaf(
                std::slice::from_ref(&args.xds_client_name),
                Usage::Client,
                validity,
            )?;
            create(secrets, server, server_leaf).await?;
            create(secrets, client_name, client_leaf).await?;
        }
        (true, false) | (false, true) => {
            let (there, missing) = if have.0 {
                (server, client_name)
            } else {
                (client_name, server)
            };
            bail!(
                "Secret {there} exists but Secret {missing} does not; the two must hold \
                 certificates of one CA, and certgen keeps no CA key to sign a new one: \
                 delete Secret {there} in namespace {} and run certgen again to have both \
                 created",
                args.namespace
            );
        }
    }
    Ok(())
}

/// The PEM data of a Secret certgen keeps: `None` when there is no Secret; an error when the
/// Secret exists without one of the three keys (certgen replaces nothing it did not write).
pub fn tls_data(
    name: &str,
    secret: Option<&Secret>,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let Some(secret) = secret else {
        return Ok(None);
    };
    let data = secret.data.as_ref();
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for key in KEYS {
        match data.and_then(|d| d.get(key)).filter(|v| !v.0.is_empty()) {
            Some(v) => match String::from_utf8(v.0.clone()) {
                Ok(text) => {
                    out.insert(key.to_string(), text);
                }
                Err(_) => bail!("Secret {name}: {key} is not PEM text"),
            },
            None => missing.push(key),
        }
    }
    if !missing.is_empty() {
        bail!(
            "Secret {name} exists without {}; certgen does not overwrite a Secret it did not \
             make whole: give it the missing keys, or delete it to have certgen create it",
            missing.join(", ")
        );
    }
    Ok(Some(out))
}

async fn create(
    secrets: &Api<Secret>,
    name: &str,
    data: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), "sluice".to_string()),
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "sluice-certgen".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %name, "created");
            Ok(())
        }
        // Created meanwhile by another run, whose certificates may not be of the same CA as
        // the ones this run writes next: stop, and let the next run look at what is there.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            bail!("Secret {name} was created by someone else meanwhile; run certgen again")
        }
        Err(e) => Err(e).context(format!("creating Secret {name}")),
    }
}

/// Sets `ca` (PEM) as the `caBundle` of every webhook of the validating and the mutating webhook
/// configuration named `name` that exist; a configuration already pointing at it is not patched.
async fn set_ca_bundle(client: &Client, name: &str, ca: &str) -> anyhow::Result<()> {
    set_bundles(client, name, ca, |c: ValidatingWebhookConfiguration| {
        let hooks = c.webhooks.unwrap_or_default();
        hooks
            .into_iter()
            .map(|w| (w.name, w.client_config.ca_bundle))
            .collect()
    })
    .await?;
    set_bundles(client, name, ca, |c: MutatingWebhookConfiguration| {
        let hooks = c.webhooks.unwrap_or_default();
        hooks
            .into_iter()
            .map(|w| (w.name, w.client_config.ca_bundle))
            .collect()
    })
    .await
}

/// [`set_ca_bundle`] for one kind of webhook configuration; `webhooks` lists its webhooks' names
/// and bundles.
async fn set_bundles<K>(
    client: &Client,
    name: &str,
    ca: &str,
    webhooks: impl FnOnce(K) -> Vec<(String, Option<ByteString>)>,
) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&());
    let found = api
        .get_opt(name)
        .await
        .context(format!("reading {kind} {name}"))?;
    let Some(patch) = needed(&kind, name, found.map(webhooks), ca) else {
        return Ok(());
    };
    api.patch(name, &patch_params(), &patch)
        .await
        .context(format!("setting the caBundle of {kind} {name}"))?;
    tracing::info!(%kind, %name, "caBundle set");
    Ok(())
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

/// The patch a configuration (its webhooks' names and bundles, `None` when it does not exist)
/// needs, logging why there is none.
fn needed(
    kind: &str,
    name: &str,
    webhooks: Option<Vec<(String, Option<ByteString>)>>,
    ca: &str,
) -> Option<Patch<serde_json::Value>> {
    let Some(webhooks) = webhooks else {
        tracing::info!(kind, %name, "not there yet: the run after install sets its caBundle");
        return None;
    };
    let patch = ca_bundle_patch(&webhooks, ca.as_bytes());
    if patch.is_none() {
        tracing::info!(kind, %name, "caBundle already the webhook CA");
    }
    patch.map(Patch::Strategic)
}

/// The strategic merge patch that sets `ca` as the `caBundle` of each webhook whose bundle
/// differs (webhooks merge by name); `None` when none differs.
pub fn ca_bundle_patch(
    webhooks: &[(String, Option<ByteString>)],
    ca: &[u8],
) -> Option<serde_json::Value> {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(ca);
    let changed: Vec<_> = webhooks
        .iter()
        .filter(|(_, bundle)| bundle.as_ref().map(|b| b.0.as_slice()) != Some(ca))
        .map(|(name, _)| serde_json::json!({"name": name, "clientConfig": {"caBundle": encoded}}))
        .collect();
    (!changed.is_empty()).then(|| serde_json::json!({ "webhooks": changed }))
}

/// When the certificates certgen creates are valid: from an hour ago (clocks that lag), for the
/// given days.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    not_before: time::OffsetDateTime,
    not_after: time::OffsetDateTime,
}

impl Validity {
    pub fn days_from_now(days: u32) -> Validity {
        let now = time::OffsetDateTime::now_utc();
        Validity {
            not_before: now - time::Duration::hours(1),
            not_after: now + time::Duration::days(i64::from(days)),
        }
    }
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

/// A CA certgen signs with, and forgets.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str, validity: Validity) -> anyhow::Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate().context("generating a CA key")?;
        let issuer = CertifiedIssuer::self_signed(params, key).context("signing the CA")?;
        Ok(Ca { issuer })
    }

    /// A certificate for `names` (the first its subject; DNS names for a server), with its key
    /// and this CA, as the three keys of a Secret.
    pub fn leaf(
        &self,
        names: &[String],
        usage: Usage,
        validity: Validity,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let Some(subject) = names.first() else {
            bail!("a certificate needs a name");
        };
        let dns = if usage == Usage::Server {
            names.to_vec()
        } else {
            Vec::new()
        };
        let mut params =
            CertificateParams::new(dns).with_context(|| format!("{names:?} are not DNS names"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, subject.as_str());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        params.not_before = validity.not_before;
        params.not_after = validity.not_after;
        let key = KeyPair::generate().context("generating a key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .context("signing a certificate")?;
        Ok(BTreeMap::from([
            ("ca.crt".to_string(), self.issuer.pem()),
            ("tls.crt".to_string(), cert.pem()),
            ("tls.key".to_string(), key.serialize_pem()),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    use super::*;

    fn secret(data: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    }

    fn roots(ca_pem: &str) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(ca_pem)).unwrap();
        Arc::new(roots)
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    #[test]
    fn a_missing_secret_is_made_and_a_whole_one_kept() {
        assert_eq!(tls_data("w", None).unwrap(), None);
        let whole = secret(&[("ca.crt", b"A"), ("tls.crt", b"B"), ("tls.key", b"C")]);
        let data = tls_data("w", Some(&whole)).unwrap().unwrap();
        assert_eq!(data["ca.crt"], "A");
        assert_eq!(data["tls.key"], "C");
    }

    #[test]
    fn a_secret_without_a_key_is_an_error_naming_it_and_the_fix() {
        let partial = secret(&[("tls.crt", b"B"), ("tls.key", b"")]);
        let err = tls_data("edge-webhook", Some(&partial))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Secret edge-webhook exists without ca.crt, tls.key"),
            "{err}"
        );
        assert!(err.contains("delete it"), "{err}");
        let empty = Secret::default();
        let err = tls_data("x", Some(&empty)).unwrap_err().to_string();
        assert!(err.contains("without ca.crt, tls.crt, tls.key"), "{err}");
        let binary = secret(&[
            ("ca.crt", &[0xff, 0xfe]),
            ("tls.crt", b"B"),
            ("tls.key", b"C"),
        ]);
        let err = tls_data("x", Some(&binary)).unwrap_err().to_string();
        assert!(err.contains("ca.crt is not PEM text"), "{err}");
    }

    #[test]
    fn the_ca_bundle_patch_names_only_the_webhooks_that_differ() {
        let ca = b"-----BEGIN CERTIFICATE-----\nCA\n".to_vec();
        let hooks = vec![
            (
                "validate.sluice.dev".to_string(),
                Some(ByteString(ca.clone())),
            ),
            ("validate-gateway.sluice.dev".to_string(), None),
            (
                "other.sluice.dev".to_string(),
                Some(ByteString(b"old".to_vec())),
            ),
        ];
        let patch = ca_bundle_patch(&hooks, &ca).unwrap();
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(&ca);
        assert_eq!(
            patch,
            serde_json::json!({"webhooks": [
                {"name": "validate-gateway.sluice.dev", "clientConfig": {"caBundle": encoded}},
                {"name": "other.sluice.dev", "clientConfig": {"caBundle": encoded}},
            ]})
        );
        let done: Vec<_> = hooks
            .iter()
            .map(|(n, _)| (n.clone(), Some(ByteString(ca.clone()))))
            .collect();
        assert_eq!(ca_bundle_patch(&done, &ca), None);
        assert_eq!(ca_bundle_patch(&[], &ca), None);
    }

    #[test]
    fn the_server_certificate_verifies_for_its_names_and_the_client_one_as_a_client() {
        let validity = Validity::days_from_now(30);
        let ca = Ca::new("sluice xDS CA", validity).unwrap();
        let names = vec![
            "edge-sluice.ns.svc".to_string(),
            "edge-sluice.ns".to_string(),
        ];
        let server = ca.leaf(&names, Usage::Server, validity).unwrap();
        let client = ca
            .leaf(&["edge-sluice-envoy".to_string()], Usage::Client, validity)
            .unwrap();
        assert_eq!(server["ca.crt"], client["ca.crt"], "one CA");
        assert!(server["tls.key"].contains("PRIVATE KEY"));

        let roots = roots(&server["ca.crt"]);
        let servers =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
                .build()
                .unwrap();
        let now = UnixTime::now();
        for name in &names {
            let name = ServerName::try_from(name.clone()).unwrap();
            servers
                .verify_server_cert(&der(&server["tls.crt"]), &[], &name, &[], now)
                .unwrap();
        }
        let other = ServerName::try_from("other.ns.svc").unwrap();
        assert!(
            servers
                .verify_server_cert(&der(&server["tls.crt"]), &[], &other, &[], now)
                .is_err()
        );
        // The client certificate is no server's, and the server's no client's.
        let client_name = ServerName::try_from("edge-sluice-envoy").unwrap();
        assert!(
            servers
                .verify_server_cert(&der(&client["tls.crt"]), &[], &client_name, &[], now)
                .is_err()
        );
        let clients =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider())
                .build()
                .unwrap();
        clients
            .verify_client_cert(&der(&client["tls.crt"]), &[], now)
            .unwrap();
        assert!(
            clients
                .verify_client_cert(&der(&server["tls.crt"]), &[], now)
                .is_err()
        );

        // Another CA's certificates are not trusted.
        let stranger = Ca::new("another CA", validity).unwrap();
        let theirs = stranger.leaf(&names, Usage::Server, validity).unwrap();
        let name = ServerName::try_from(names[0].clone()).unwrap();
        assert!(
            servers
                .verify_server_cert(&der(&theirs["tls.crt"]), &[], &name, &[], now)
                .is_err()
        );
    }

    #[test]
    fn certificates_end_after_the_days_given() {
        let validity = Validity::days_from_now(10);
        let ca = Ca::new("CA", validity).unwrap();
        let leaf = ca
            .leaf(&["a.ns.svc".to_string()], Usage::Server, validity)
            .unwrap();
        let roots = roots(&leaf["ca.crt"]);
        let servers =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider())
                .build()
                .unwrap();
        let name = ServerName::try_from("a.ns.svc").unwrap();
        let at = |days: u64| {
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                UnixTime::now().as_secs() + days * 86_400,
            ))
        };
        let cert = der(&leaf["tls.crt"]);
        servers
            .verify_server_cert(&cert, &[], &name, &[], at(9))
            .unwrap();
        assert!(
            servers
                .verify_server_cert(&cert, &[], &name, &[], at(11))
                .is_err()
        );
    }

    #[test]
    fn a_leaf_needs_a_name() {
        let validity = Validity::days_from_now(1);
        let ca = Ca::new("CA", validity).unwrap();
        let err = ca.leaf(&[], Usage::Server, validity).unwrap_err();
        assert!(err.to_string().contains("needs a name"), "{err}");
    }
}
