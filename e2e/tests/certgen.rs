//! charts/sluice with `certgen.enabled`, the way for GitOps tools that render the chart without
//! a cluster: every render is the same (no Secret, no caBundle in it), and `helm install` and
//! `helm upgrade` run the certgen Job as hooks, which the test runs as the cluster would (the
//! e2e control plane has no Job controller and no kubelet): the Job's command as a process here
//! with the Job's ServiceAccount, then the Job's status written as the Job controller writes it.
//! The Job makes the certificates once, before install, sets the webhooks' caBundle after it,
//! and keeps both at upgrade; sluice and Envoy then run with them over mutual TLS xDS.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::chart::{
    Rel, Release, check_certificates, helm, helm_path, json as get_json, same_certificates,
    serve_as_installed,
};
use crate::support::{Env, env, repo_root, tail, wait_for, write_kubeconfig};

const GITOPS: Rel = Rel {
    release: "gitops",
    fullname: "gitops-sluice",
    class: "gitops-public",
};

/// One run of the hook Job: its container's arguments and what the process wrote to stderr.
struct HookRun {
    args: Vec<String>,
    log: String,
}

/// Runs `helm args` and, while it waits for its hook Jobs, runs `runs` Jobs named `job` (each
/// the next one with a new uid) as the cluster would; returns the runs once helm has succeeded.
fn helm_with_hooks(
    env: &Env,
    ns: &str,
    job: &str,
    dir: &Path,
    args: &[&str],
    runs: usize,
) -> Vec<HookRun> {
    std::fs::create_dir_all(dir).unwrap();
    let out_path = dir.join(format!("helm-{}.log", args[0]));
    let out = std::fs::File::create(&out_path).unwrap();
    let mut helm = Command::new(helm_path())
        .args(args)
        .args(["--timeout", "3m"])
        .current_dir(repo_root())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("helm runs");
    let helm_log = || std::fs::read_to_string(&out_path).unwrap_or_default();
    let mut seen = Vec::new();
    let mut done = Vec::new();
    for run in 0..runs {
        let job_obj = wait_for(
            Duration::from_secs(120),
            &format!("hook Job {job}, run {run}"),
            || {
                if let Some(status) = helm.try_wait().unwrap() {
                    panic!(
                        "helm {args:?} ended ({status}) before run {run} of Job {job}:\n{}",
                        helm_log()
                    );
                }
                match env.get("job", ns, job) {
                    Some(j) if !seen.contains(&j["metadata"]["uid"]) => Ok(j),
                    _ => Err(helm_log()),
                }
            },
        );
        seen.push(job_obj["metadata"]["uid"].clone());
        done.push(run_job(env, ns, job, &job_obj, dir));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = helm.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "helm {args:?} did not end:\n{}",
            helm_log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "helm {args:?}: {status}\n{}", helm_log());
    done
}

/// Runs the Job's one container as a process here, as its ServiceAccount, then writes the Job's
/// status: Complete when the process succeeded, Failed when not.
fn run_job(env: &Env, ns: &str, job: &str, obj: &Value, dir: &Path) -> HookRun {
    let pod = &obj["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "{job}: one container");
    let image = containers[0]["image"].as_str().unwrap();
    assert!(
        image.contains("/sluice:"),
        "{job} runs sluice's image: {image}"
    );
    let args: Vec<String> = containers[0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let account = pod["serviceAccountName"].as_str().unwrap();
    let kubeconfig = dir.join(format!("{account}.kubeconfig"));
    write_kubeconfig(env, account, ns, &kubeconfig);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(&args)
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .env_remove("POD_NAMESPACE")
        .output()
        .expect("sluice runs");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let condition = |type_: &str| json!({"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now});
    let status = if out.status.success() {
        json!({"status": {
            "startTime": now, "completionTime": now, "succeeded": 1,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        }})
    } else {
        json!({"status": {
            "startTime": now, "failed": 1,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        }})
    };
    env.kubectl_ok(&[
        "patch",
        "job",
        job,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{job} {args:?} failed:\n{}",
        tail(&log)
    );
    HookRun { args, log }
}

/// The caBundle of every webhook of the release's two configurations is `ca` (base64 PEM).
fn check_bundles(env: &Env, rel: &Rel, ca: &str) {
    for kind in [
        "validatingwebhookconfiguration",
        "mutatingwebhookconfiguration",
    ] {
        let config = get_json(env, &["get", kind, rel.fullname]);
        let hooks = config["webhooks"].as_array().unwrap();
        assert!(!hooks.is_empty(), "{kind}");
        for hook in hooks {
            assert_eq!(
                hook["clientConfig"]["caBundle"], ca,
                "{kind} {}",
                hook["name"]
            );
        }
    }
}

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn with_certgen_every_render_is_the_same_and_its_job_makes_the_certificates_once() {
    let env = env();
    let rel = &GITOPS;
    let class = format!("ingressClass.name={}", rel.class);
    let values = ["--set", "certgen.enabled=true", "--set", &class];

    // What a GitOps tool renders: the same every time, with no certificate in it.
    let template = [
        "template",
        rel.release,
        "charts/sluice",
        "-n",
        "gitops",
        "--kube-version",
        "1.34.0",
    ];
    let render = || helm(&[&template[..], &values[..]].concat());
    let first = render();
    assert_eq!(first, render(), "two renders differ");
    assert!(!first.contains("\nkind: Secret"), "a Secret rendered");
    assert!(!first.contains("caBundle"), "a caBundle rendered");

    // xDS certificates of one's own (cert-manager's, say): the pods mount the Secrets named,
    // neither the chart nor certgen makes xDS certificates, certgen still makes the webhook's;
    // one Secret without the other is refused.
    let own = [
        "--set",
        "xds.existingServerSecret=own-server",
        "--set",
        "xds.existingClientSecret=own-client",
    ];
    for certgen in ["true", "false"] {
        let certgen = format!("certgen.enabled={certgen}");
        let text = helm(&[&template[..], &own[..], &["--set", &certgen]].concat());
        assert!(text.contains("secretName: own-server"), "{certgen}");
        assert!(text.contains("secretName: own-client"), "{certgen}");
        assert!(
            !text.contains("-xds-server"),
            "{certgen}: an xDS Secret of the release"
        );
        assert!(
            !text.contains("-xds-client"),
            "{certgen}: an xDS Secret of the release"
        );
        assert_eq!(
            text.contains("--webhook-secret="),
            certgen.ends_with("true"),
            "{certgen}"
        );
    }
    let half = Command::new(helm_path())
        .args(template)
        .args(&own[..2])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&half.stderr);
    assert!(
        !half.status.success()
            && stderr.contains("xds.existingServerSecret and xds.existingClientSecret go together"),
        "{stderr}"
    );

    let ns = env.namespace("certgen");
    let _release = Release {
        name: rel.release,
        namespace: ns.clone(),
    };
    let dir = env.work.join(format!("chart-{ns}"));
    let job = format!("{}-certgen", rel.fullname);
    let fullname = rel.fullname;

    // Install: before it the Job makes the three Secrets (the webhook configurations do not
    // exist yet), after it sets their caBundle.
    let install = ["install", rel.release, "charts/sluice", "-n", &ns];
    let runs = helm_with_hooks(
        &env,
        &ns,
        &job,
        &dir,
        &[&install[..], &values[..]].concat(),
        2,
    );
    assert_eq!(runs[0].log.matches("created").count(), 3, "{}", runs[0].log);
    assert_eq!(
        runs[0].log.matches("not there yet").count(),
        2,
        "{}",
        runs[0].log
    );
    assert_eq!(
        runs[1].log.matches("caBundle set").count(),
        2,
        "{}",
        runs[1].log
    );
    assert!(!runs[1].log.contains("created"), "{}", runs[1].log);
    let certs = check_certificates(&env, rel, &ns, &dir);
    let secret = get_json(
        &env,
        &[
            "get",
            "secret",
            "-n",
            &ns,
            &format!("{fullname}-xds-client"),
        ],
    );
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "sluice-certgen"
    );
    check_bundles(&env, rel, &certs.webhook["ca.crt"]);
    // The Job's ServiceAccount and rights are gone with it.
    assert_eq!(env.get("serviceaccount", &ns, &job), None);
    assert!(
        !env.kubectl(&["get", "clusterrole", &job]).ok,
        "ClusterRole {job} left behind"
    );

    // Upgrade: the Job keeps what is there, and Helm leaves the caBundle it does not render.
    let upgrade = [
        "upgrade",
        rel.release,
        "charts/sluice",
        "-n",
        &ns,
        "--reuse-values",
        "--set",
        "logLevel=debug",
    ];
    let runs = helm_with_hooks(&env, &ns, &job, &dir, &upgrade, 2);
    for run in &runs {
        assert!(!run.log.contains("created"), "{}", run.log);
        assert!(run.log.contains("webhook certificate kept"), "{}", run.log);
        assert!(run.log.contains("xDS certificates kept"), "{}", run.log);
        assert_eq!(
            run.log.matches("caBundle already the webhook CA").count(),
            2,
            "{}",
            run.log
        );
    }
    let deployment = get_json(&env, &["get", "deployment", "-n", &ns, fullname]);
    assert!(
        deployment
            .to_string()
            .contains(r#""name":"RUST_LOG","value":"debug""#),
        "the upgrade applied"
    );
    same_certificates(&env, rel, &ns, &dir.join("after-upgrade"), &certs);
    check_bundles(&env, rel, &certs.webhook["ca.crt"]);

    serve_as_installed(&env, rel, &ns, &dir, &certs);

    // Half of the xDS pair gone, then a client certificate of another CA: certgen cannot sign
    // a certificate again, says what to do and touches nothing.
    let client_secret = format!("{fullname}-xds-client");
    env.kubectl_ok(&["delete", "secret", "-n", &ns, &client_secret]);
    let certgen = || {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(&runs[0].args)
            .output()
            .expect("sluice runs");
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = certgen();
    assert!(
        stderr.contains(&format!(
            "Secret {fullname}-xds-server exists but Secret {client_secret} does not"
        )) && stderr.contains(&format!(
            "delete Secret {fullname}-xds-server in namespace {ns}"
        )),
        "{stderr}"
    );
    let webhook = &certs.webhook_dir;
    let from = |key: &str| format!("--from-file={key}={}", webhook.join(key).display());
    env.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        &client_secret,
        "-n",
        &ns,
        "--type=kubernetes.io/tls",
        &from("ca.crt"),
        &from("tls.crt"),
        &from("tls.key"),
    ]);
    let stderr = certgen();
    assert!(
        stderr.contains(&format!(
            "Secrets {fullname}-xds-server and {client_secret} hold certificates of different CAs"
        )),
        "{stderr}"
    );
    for (name, ca) in [
        (format!("{fullname}-xds-server"), &certs.server["ca.crt"]),
        (client_secret, &certs.webhook["ca.crt"]),
    ] {
        let secret = get_json(&env, &["get", "secret", "-n", &ns, &name]);
        assert_eq!(
            secret["data"]["ca.crt"].as_str(),
            Some(ca.as_str()),
            "{name}"
        );
    }
}
