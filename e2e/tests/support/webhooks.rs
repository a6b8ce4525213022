//! sluice's webhook configurations, installed for a test and removed after it.

use std::time::Duration;

use serde_json::Value;

use super::*;

/// A Route sluice's webhook refuses (a `pathPrefix` without its `/`) and the CRD schema admits:
/// refused in a dry run exactly while the apiserver calls the webhook.
const WEBHOOK_PROBE: &str = r#"
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {name: webhook-probe, namespace: default}
spec:
  host: probe.example.com
  routes: [{pathPrefix: probe, upstreams: [{serviceName: s, servicePort: 80}]}]
"#;

/// sluice's webhook configurations from config/webhooks.yaml, pointed at
/// https://127.0.0.1:PORT with the e2e CA; installed while this value lives.
pub struct Webhooks<'a> {
    env: &'a Env,
    pub port: u16,
    /// The ingress class of the sluice serving them (`--ingress-class-name`): the validating
    /// webhook's match condition sends only Ingresses of this class or none.
    class: String,
}

impl<'a> Webhooks<'a> {
    /// The flags that make a sluice serve the webhook these configurations point at.
    pub fn serve_flags(&self) -> Vec<String> {
        vec![
            "--webhook-address".into(),
            format!("127.0.0.1:{}", self.port),
            "--webhook-cert".into(),
            self.env.pki.join("webhook.crt").display().to_string(),
            "--webhook-key".into(),
            self.env.pki.join("webhook.key").display().to_string(),
        ]
    }

    /// The configurations for a sluice serving the default ingress class.
    pub fn new(env: &'a Env) -> Webhooks<'a> {
        Webhooks::for_class(env, "sluice")
    }

    /// The configurations for a sluice serving ingress class `class`.
    pub fn for_class(env: &'a Env, class: &str) -> Webhooks<'a> {
        Webhooks {
            env,
            port: free_port(),
            class: class.to_string(),
        }
    }

    /// Installs the configurations and waits until the apiserver calls the webhook (a bad Route
    /// is refused in a server-side dry run). A sluice with [`Webhooks::serve_flags`] must run.
    pub fn install(&self) {
        use base64::Engine;
        let text = std::fs::read_to_string(repo_root().join("config/webhooks.yaml")).unwrap();
        // The class in the match condition, as a deployment serving another class writes it.
        assert!(
            text.contains("'sluice'"),
            "config/webhooks.yaml names no class"
        );
        let text = text.replace("'sluice'", &format!("'{}'", self.class));
        let ca = std::fs::read(self.env.pki.join("ca.crt")).unwrap();
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let mut docs = Vec::new();
        for de in serde_norway::Deserializer::from_str(&text) {
            let mut doc: Value = serde::Deserialize::deserialize(de).unwrap();
            for hook in doc["webhooks"].as_array_mut().unwrap() {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap()
                    .to_string();
                hook["clientConfig"] = serde_json::json!({
                    "url": format!("https://127.0.0.1:{}{path}", self.port),
                    "caBundle": ca,
                });
            }
            docs.push(doc);
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
        self.env.apply_ok(&list.to_string());
        wait_for(Duration::from_secs(30), "the webhook to be called", || {
            let out = self.env.kubectl_in(
                &["apply", "--dry-run=server", "-f", "-"],
                Some(WEBHOOK_PROBE),
            );
            // sluice's own message (the CRD schema only requires a non-empty string).
            if !out.ok
                && out
                    .stderr
                    .contains(r#"pathPrefix: "probe" must start with "/""#)
            {
                Ok(())
            } else {
                Err(out.stderr)
            }
        });
    }
}

impl Webhooks<'_> {
    /// Deletes the configurations and waits until the apiserver no longer calls the webhook (the
    /// bad Route of [`Webhooks::install`] passes a server-side dry run).
    pub fn uninstall(&self) {
        self.delete();
        wait_for(Duration::from_secs(30), "the webhook to be gone", || {
            let out = self.env.kubectl_in(
                &["apply", "--dry-run=server", "-f", "-"],
                Some(WEBHOOK_PROBE),
            );
            if out.ok { Ok(()) } else { Err(out.stderr) }
        });
    }

    fn delete(&self) {
        let _ = self.env.kubectl(&[
            "delete",
            "validatingwebhookconfiguration,mutatingwebhookconfiguration",
            "sluice",
            "--ignore-not-found",
        ]);
    }
}

impl Drop for Webhooks<'_> {
    fn drop(&mut self) {
        self.delete();
    }
}
