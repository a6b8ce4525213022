#!/usr/bin/env python3
"""The e2e pod runner: runs the Pods kwok says are Running as local processes, gives them the
Services' ClusterIPs and names, and plays the load balancer of Services of type LoadBalancer.
Python 3 standard library only.

Started by e2e/lib/pods.sh (see docs/e2e.md, "Pods"). It talks to the apiserver with the admin
client certificate, and

* for every Pod with `status.podIP` and no `deletionTimestamp` (phase not Succeeded/Failed):
  - makes the network namespace `sp-<uid8>` with a veth pair (`vh<uid8>` on the host, attached
    to the bridge; `vp<uid8>` inside with the Pod IP/PREFIX, default route via the bridge, the
    service range via the Services' namespace); kwok reuses Pod IPs, so a namespace that still
    holds the IP is removed first;
  - writes its secret, configMap, projected, downwardAPI and emptyDir volumes under
    RUN_DIR/<uid>/volumes/<volume> (waiting until each Secret/ConfigMap/ServiceAccount exists),
    and, unless automountServiceAccountToken says no, the ServiceAccount volume the admission
    plugin would add (a TokenRequest token bound to the Pod, ca.crt, namespace), and the Pod's
    /etc/hosts (the Services' names, the runner's stand-in for cluster DNS), /etc/resolv.conf
    (no nameserver) and /etc/hostname under RUN_DIR/<uid>/etc;
  - runs its init containers one after the other, each to its end, then its containers, each
    as `ip netns exec sp-<uid8> podrunner.py exec SPEC`: a mount namespace of its own with the
    container's volumeMounts bind-mounted at their mountPaths (a missing mount point is made in
    an overlay of its nearest existing directory, the host's files untouched), a UTS namespace
    with the Pod's host name, the securityContext's user, groups, no_new_privs and read-only
    root, then exec of the image map's binary with the container's env (the kubelet's Service
    variables, envFrom, env); restarted (1 s, 2 s, ... 10 s) when it exits unless
    `restartPolicy: Never` (or `OnFailure` and it exited 0); its stdout and stderr go to
    RUN_DIR/<uid>/<container>.log in CRI format (its pid to <container>.pid), and a kwok `Logs`
    object named like the Pod points kwok at those files, so `kubectl logs` works;
  - annotates the Pod `sluice.e2e/started: "true"` once every readinessProbe (httpGet,
    tcpSocket) of the containers it runs passes, or, with none, once the first containerPort
    accepts TCP connections (at once when it runs nothing or no port is declared); kwok's stage
    pod-ready (e2e/lib/kwok-pod-stages.yaml) then makes the Pod Ready;
* on Pod deletion (or completion) it kills the processes and deletes the namespace;
* with --service-cidr: listens on every ClusterIP's TCP ports in the Services' namespace
  (--service-netns, where the whole range is local) and forwards each connection to a ready
  endpoint of the Service (round robin, the port picked by the Service port's name), the
  Service default/kubernetes to the apiserver itself;
* with --lb-pool, for every Service of type LoadBalancer with no loadBalancerClass: takes the
  lowest free address of the pool, writes it to status.loadBalancer.ingress[0].ip, and
  forwards TCP connections on ADDRESS:PORT (each TCP port of the Service) to a ready endpoint
  of its EndpointSlices (round robin), the port picked by the Service port's name.

Image map (--images, default $SLUICE_E2E_IMAGES): comma-separated `PREFIX=BINARY` entries. A
container whose image starts with PREFIX (the longest matching prefix wins) runs BINARY, an
absolute path (the image's entrypoint), with no arguments; `PREFIX=BINARY+args` appends the
container's `command` and then its `args`, a command whose first word is BINARY's file name
(`command: ["envoy"]` for .../envoy) standing for BINARY itself.
"""
import argparse
import asyncio
import base64
import ctypes
import datetime
import http.client
import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

STARTED = "sluice.e2e/started"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
CLUSTER_DOMAIN = "cluster.local"
RUNNER = os.path.abspath(__file__)


def log(*a):
    ts = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    print(ts, *a, file=sys.stderr, flush=True)


# --- a container's start (`podrunner.py exec SPEC`, inside the Pod's network namespace) ----

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_NO_NEW_PRIVS = 38

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                                ctypes.c_char_p]
    return _libc


def _check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(source, target, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)),
           f"mount {source or ''} {target} {fstype or ''} {data or ''}".replace("  ", " "))


def setns(path, kind):
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(libc().setns(fd, kind), f"setns {path}")
    finally:
        os.close(fd)


def nearest_existing(path):
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def setup_container(spec):
    """In a mount and UTS namespace of its own: the container's mounts, host name and user.

    `spec["mounts"]`: [{target, source, readOnly, file}], shallow targets first. A target whose
    mount point does not exist on the host gets one in an overlay of its nearest existing
    directory (upper layer on a tmpfs of this namespace), so the host's files stay as they are;
    a target inside another mount is made in that volume, as runc does."""
    _check(libc().unshare(CLONE_NEWNS | CLONE_NEWUTS), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    socket.sethostname(spec["hostname"])
    scratch = spec["scratch"]
    mount("tmpfs", scratch, "tmpfs", 0, "mode=0755")
    mounts = spec["mounts"]
    for m in mounts:
        m["real"] = os.path.realpath(m["target"])
    reals = [m["real"] for m in mounts]

    def inside_another(t):
        return any(o != t and t.startswith(o.rstrip("/") + "/") for o in reals)

    overlays = set()
    for m in mounts:
        t = m["real"]
        if os.path.exists(t) or inside_another(t):
            continue
        a = nearest_existing(t)
        if a == "/":
            raise RuntimeError(f"mountPath {m['target']}: no directory on the host to mount it on "
                               "(a top-level directory is not made)")
        overlays.add(a)
    overlays = sorted(a for a in overlays
                      if not any(o != a and a.startswith(o.rstrip("/") + "/") for o in overlays))
    for i, a in enumerate(overlays):
        upper, work = f"{scratch}/o{i}/upper", f"{scratch}/o{i}/work"
        os.makedirs(upper)
        os.makedirs(work)
        st = os.stat(a)
        os.chmod(upper, st.st_mode & 0o7777)
        mount("overlay", a, "overlay", 0, f"lowerdir={a},upperdir={upper},workdir={work}")
    for m in mounts:
        t = os.path.realpath(m["target"])
        m["real"] = t
        if m["file"]:
            os.makedirs(os.path.dirname(t), exist_ok=True)
            if not os.path.exists(t):
                open(t, "a").close()
        else:
            os.makedirs(t, exist_ok=True)
        mount(m["source"], t, None, MS_BIND | MS_REC)
    ro = [m["real"] for m in mounts if m["readOnly"]]
    if spec.get("readOnlyRoot"):
        ro = ["/"] + overlays + ro
    for t in ro:
        mount(None, t, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    if spec.get("noNewPrivs"):
        _check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    os.setgroups(spec.get("groups") or [])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    os.chdir(spec["cwd"])


def container_exec(spec_path):
    """`podrunner.py exec SPEC`: sets the container up and execs its binary (same pid)."""
    with open(spec_path) as f:
        spec = json.load(f)
    try:
        setup_container(spec)
    except Exception as e:  # noqa: BLE001 - the container's log says why it did not start
        print(f"podrunner: container setup failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        sys.exit(126)
    argv = spec["argv"]
    try:
        os.execve(argv[0], argv, spec["env"])
    except OSError as e:
        print(f"podrunner: exec {argv[0]}: {e}", file=sys.stderr, flush=True)
        sys.exit(127)


# --- apiserver client ----------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body[:300]!r}")
        self.status = status


class Api:
    def __init__(self, server, ca, cert, key):
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def _conn(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None, ctype="application/json", timeout=30):
        """The decoded JSON answer; raises ApiError on a non-2xx status."""
        c = self._conn(timeout)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = ctype
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            text = r.read()
            if r.status >= 300:
                raise ApiError(r.status, text.decode(errors="replace"))
            return json.loads(text) if text else None
        finally:
            c.close()

    def get(self, path):
        """The object, or None when it does not exist."""
        try:
            return self.call("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def patch(self, path, body):
        return self.call("PATCH", path, body, ctype="application/merge-patch+json")

    def watch(self, path, rv):
        """Yields watch events of `path` from resourceVersion `rv` until the server ends it."""
        sep = "&" if "?" in path else "?"
        q = f"{path}{sep}watch=1&allowWatchBookmarks=true&timeoutSeconds=240&resourceVersion={rv}"
        c = self._conn(300)
        try:
            c.request("GET", q, headers={"Accept": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise ApiError(r.status, r.read().decode(errors="replace"))
            while True:
                line = r.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            c.close()


def informer(api, path, name, on_list, on_event, stop):
    """List-then-watch `path` forever (a thread): on_list(items) after every (re)list,
    on_event(type, obj) for each change. Relists after a 410 or a broken watch it cannot resume."""
    while not stop.is_set():
        try:
            lst = api.call("GET", path, timeout=60)
            rv = lst["metadata"]["resourceVersion"]
            on_list(lst.get("items") or [])
            failures = 0
            while not stop.is_set():
                try:
                    for ev in api.watch(path, rv):
                        t, obj = ev["type"], ev["object"]
                        if t == "ERROR":
                            raise ApiError(obj.get("code", 500), json.dumps(obj))
                        rv = obj["metadata"]["resourceVersion"]
                        if t != "BOOKMARK":
                            on_event(t, obj)
                    failures = 0
                except ApiError as e:
                    if e.status == 410:
                        break  # too old: relist
                    raise
                except (OSError, http.client.HTTPException, ValueError) as e:
                    failures += 1
                    if failures > 3:
                        raise
                    log(f"{name}: watch broke ({e}); resuming")
                    time.sleep(0.5)
        except Exception as e:  # noqa: BLE001 - keep the loop alive whatever happens
            if stop.is_set():
                return
            log(f"{name}: {type(e).__name__}: {e}; relisting in 1 s")
            time.sleep(1)


# --- image map ---------------------------------------------------------------------------


def parse_images(spec):
    """[(prefix, binary, with_args)], longest prefix first."""
    out = []
    for entry in filter(None, (e.strip() for e in (spec or "").split(","))):
        prefix, sep, target = entry.partition("=")
        if not sep or not prefix or not target:
            raise SystemExit(f"image map entry {entry!r} is not PREFIX=BINARY[+args]")
        with_args = target.endswith("+args")
        if with_args:
            target = target[: -len("+args")]
        if not os.path.isabs(target):
            raise SystemExit(f"image map entry {entry!r}: {target} is not an absolute path")
        out.append((prefix, target, with_args))
    out.sort(key=lambda e: -len(e[0]))
    return out


def image_target(images, image):
    for prefix, binary, with_args in images:
        if image.startswith(prefix):
            return binary, with_args
    return None


def container_argv(binary, with_args, c, env):
    """BINARY, then (with `+args`) the container's command and args, $(VAR) expanded; a command
    whose first word is BINARY's file name names the image's binary, BINARY itself."""
    if not with_args:
        return [binary]
    command = [expand(a, env) for a in c.get("command") or []]
    args = [expand(a, env) for a in c.get("args") or []]
    if command and os.path.basename(command[0]) == os.path.basename(binary):
        command = command[1:]
    return [binary] + command + args


# --- pods ----------------------------------------------------------------------------------


def sh(*cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def netns_pids(ns):
    r = sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split()]


def delete_netns(ns, host_if):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = netns_pids(ns)
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        if pids and sig == signal.SIGTERM:
            deadline = time.time() + 2
            while time.time() < deadline and netns_pids(ns):
                time.sleep(0.05)
    sh("ip", "link", "del", host_if, check=False)
    sh("ip", "netns", "del", ns, check=False)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CriLog:
    """One container's log file in the CRI format kwok reads (`TIME STREAM F LINE`)."""

    def __init__(self, path, streams):
        self.f = open(path, "ab", buffering=0)
        self.lock = threading.Lock()
        self.open_streams = streams

    def pump(self, pipe, stream):
        tag = stream.encode()
        for line in iter(pipe.readline, b""):
            line = line.rstrip(b"\n")
            with self.lock:
                self.f.write(now_rfc3339().encode() + b" " + tag + b" F " + line + b"\n")
        pipe.close()
        with self.lock:
            self.open_streams -= 1
            if self.open_streams == 0:
                self.f.close()


def expand(value, env):
    """Kubernetes' $(VAR) expansion ($$ escapes)."""

    def rep(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", rep, value)


def field_value(pod, path):
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
    m = re.fullmatch(r"metadata\.(labels|annotations)", path)
    if m:  # a downwardAPI volume's file: key="value" lines
        items = sorted((pod["metadata"].get(m.group(1)) or {}).items())
        return "".join(f"{k}={json.dumps(v)}\n" for k, v in items)
    simple = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"]["uid"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
        "spec.serviceAccount": pod["spec"].get("serviceAccountName", ""),
        "status.podIP": pod["status"].get("podIP", ""),
        "status.hostIP": pod["status"].get("hostIP", ""),
    }
    if path not in simple:
        log(f"fieldRef {path} is not supported; empty")
    return simple.get(path, "")


class Container:
    """One container (or init container) the image map names, as it will be started."""

    def __init__(self, spec, init, argv, env, mounts, sec):
        self.spec = spec
        self.name = spec["name"]
        self.init = init
        # An init container with restartPolicy Always is a sidecar: started, not waited for.
        self.sidecar = init and spec.get("restartPolicy") == "Always"
        self.argv = argv
        self.env = env
        self.mounts = mounts
        self.sec = sec  # uid, gid, groups, readOnlyRoot, noNewPrivs


def security(pod_sc, c_sc):
    """The user and restrictions of a container from its and the Pod's securityContext. The
    image's USER is not known here: an unset runAsUser is root, or nobody (65534) when
    runAsNonRoot asks for a non-root user. None when runAsNonRoot refuses runAsUser 0 (the
    kubelet does not start such a container)."""
    def pick(key, default=None):
        return c_sc.get(key, pod_sc.get(key, default))

    non_root = pick("runAsNonRoot", False)
    uid = pick("runAsUser")
    if uid is None:
        uid = 65534 if non_root else 0
    if non_root and uid == 0:
        return None
    gid = pick("runAsGroup", 0)
    groups = list(pod_sc.get("supplementalGroups") or [])
    if pod_sc.get("fsGroup") is not None:
        groups.append(pod_sc["fsGroup"])
    return {
        "uid": uid,
        "gid": gid,
        "groups": groups,
        "readOnlyRoot": bool(c_sc.get("readOnlyRootFilesystem", False)),
        "noNewPrivs": c_sc.get("allowPrivilegeEscalation") is False,
    }


class PodRun:
    """One Pod: its namespace, volumes, processes and Logs object."""

    def __init__(self, mgr, pod):
        self.mgr = mgr
        self.pod = pod
        md = pod["metadata"]
        self.uid, self.name, self.ns = md["uid"], md["name"], md["namespace"]
        self.key = f"{self.ns}/{self.name}"
        self.ip = pod["status"]["podIP"]
        self.hostname = (pod["spec"].get("hostname") or self.name)[:63]
        u8 = self.uid.replace("-", "")[:8]
        self.netns, self.host_if, self.pod_if = f"sp-{u8}", f"vh{u8}", f"vp{u8}"
        self.dir = os.path.join(mgr.run_dir, self.uid)
        self.etc = os.path.join(self.dir, "etc")
        self.stopping = threading.Event()
        self.stopped = threading.Event()
        self.stop_lock = threading.Lock()
        self.hosts_lock = threading.Lock()
        self.hosts_text = None
        self.procs = {}  # container name -> Popen
        self.net_up = False
        self.thread = threading.Thread(target=self.run, name=self.key, daemon=True)

    # The Pod's life here.
    def run(self):
        try:
            self.setup_net()
            if self.stopping.is_set():
                return
            self.write_etc()
            automount = self.automount()
            if automount is None:
                return
            vols = self.volumes(automount)
            if vols is None:
                return
            inits, ctrs = self.plan(vols, automount)
            self.write_logs_object()
            sidecars = self.run_inits(inits)
            if sidecars is None:
                return
            for c in ctrs:
                self.start(c)
            # Beside supervise: a container that exits before it is ready is restarted.
            threading.Thread(target=self.guard, args=(self.announce, sidecars + ctrs), daemon=True).start()
            self.supervise(sidecars + ctrs)
        except Exception as e:  # noqa: BLE001
            if not self.stopping.is_set():
                log(f"{self.key}: {type(e).__name__}: {e}")

    def guard(self, f, *args):
        try:
            f(*args)
        except Exception as e:  # noqa: BLE001
            if not self.stopping.is_set():
                log(f"{self.key}: {type(e).__name__}: {e}")

    def setup_net(self):
        while True:
            with self.mgr.net_lock:
                old = self.mgr.by_ip.get(self.ip)
                if old is None or old is self:
                    self._make_net()
                    return
            # kwok gave this Pod the IP of a Pod whose namespace is still here: remove that first
            # (outside net_lock: stop() takes it).
            log(f"{self.key}: {self.ip} still held by {old.key} ({old.netns}); removing it")
            old.stop()

    def _make_net(self):
        """Under net_lock."""
        if self.stopping.is_set():
            return
        self.mgr.by_ip[self.ip] = self
        self.mgr.record(self.netns, True)
        ns, h, p = self.netns, self.host_if, self.pod_if
        delete_netns(ns, h)  # a leftover of the same Pod (a restarted runner)
        self.net_up = True
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", h, "type", "veth", "peer", "name", p)
        sh("ip", "link", "set", p, "netns", ns)
        sh("ip", "link", "set", h, "master", self.mgr.bridge)
        sh("ip", "link", "set", h, "up")
        sh("ip", "-n", ns, "addr", "add", f"{self.ip}/{self.mgr.prefix_len}", "dev", p)
        # kwok hands a deleted Pod's address to the next Pod: neighbours on the bridge (the host,
        # other Pods) may still hold the old Pod's MAC for it and would not reach this one for
        # half a minute. A gratuitous ARP when the link comes up (arp_notify) updates theirs;
        # the host's entry goes for good measure.
        sh("ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > /proc/sys/net/ipv4/conf/{p}/arp_notify")
        sh("ip", "neigh", "del", self.ip, "dev", self.mgr.bridge, check=False)
        sh("ip", "-n", ns, "link", "set", p, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", self.mgr.gateway)
        if self.mgr.service_cidr and self.mgr.service_via:
            # The ClusterIPs live in the Services' namespace (ClusterIPs below).
            sh("ip", "-n", ns, "route", "add", self.mgr.service_cidr, "via", self.mgr.service_via)
        log(f"{self.key}: {ns} holds {self.ip}")

    def write_etc(self):
        """The Pod's /etc/hostname, /etc/resolv.conf and /etc/hosts (the last kept up to date
        with the Services' names by ClusterIPs). resolv.conf names no nameserver: a lookup of a
        name /etc/hosts does not hold fails inside the Pod's namespace."""
        os.makedirs(self.etc, exist_ok=True)
        with open(os.path.join(self.etc, "hostname"), "w") as f:
            f.write(self.hostname + "\n")
        with open(os.path.join(self.etc, "resolv.conf"), "w") as f:
            f.write(f"# written by e2e/podrunner.py: no cluster DNS; the Services' names are in /etc/hosts\n"
                    f"search {self.ns}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n"
                    "options ndots:5\n")
        if self.mgr.cluster is not None:
            self.mgr.cluster.add_pod(self)
        else:
            self.write_hosts([])

    def write_hosts(self, service_lines):
        """/etc/hosts as the kubelet writes it, plus a line per Service (its ClusterIP, or each
        ready endpoint of a headless one). Rewritten in place: the containers' bind mounts see it."""
        text = "".join(line + "\n" for line in [
            "# Kubernetes-managed hosts file (e2e/podrunner.py: the Services' names stand in for cluster DNS).",
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
            f"{self.ip}\t{self.hostname}",
        ] + service_lines)
        with self.hosts_lock:
            if text == self.hosts_text:
                return
            with open(os.path.join(self.etc, "hosts"), "w") as f:
                f.write(text)
            self.hosts_text = text

    def wait_object(self, kind, name, optional, ns=None):
        """The object `name` (`kind`: secrets, configmaps, serviceaccounts) of the Pod's
        namespace, waiting until it exists; None when optional and missing, or when the Pod goes
        away first."""
        path = f"/api/v1/namespaces/{ns or self.ns}/{kind}/{name}"
        said = False
        while not self.stopping.is_set():
            obj = self.mgr.api.get(path)
            if obj is not None:
                return obj
            if optional:
                return None
            if not said:
                log(f"{self.key}: waiting for {kind} {ns or self.ns}/{name}")
                said = True
            self.stopping.wait(0.5)
        return None

    def source_data(self, kind, obj):
        data = {}
        if obj is None:
            return data
        if kind == "secrets":
            for k, v in (obj.get("data") or {}).items():
                data[k] = base64.b64decode(v)
        else:
            for k, v in (obj.get("data") or {}).items():
                data[k] = v.encode()
            for k, v in (obj.get("binaryData") or {}).items():
                data[k] = base64.b64decode(v)
        return data

    def service_account(self):
        return self.pod["spec"].get("serviceAccountName") or self.pod["spec"].get("serviceAccount") or "default"

    def automount(self):
        """Whether the Pod gets the ServiceAccount volume the ServiceAccount admission plugin
        adds (the e2e apiserver runs without it): not when a container mounts something at its
        path, else as the Pod's automountServiceAccountToken, else its ServiceAccount's, says
        (true when neither does). None when the Pod went away while waiting."""
        spec = self.pod["spec"]
        ctrs = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        if any((m.get("mountPath") or "").rstrip("/") == SA_MOUNT
               for c in ctrs for m in c.get("volumeMounts") or []):
            return False
        flag = spec.get("automountServiceAccountToken")
        if flag is None:
            sa = self.wait_object("serviceaccounts", self.service_account(), False)
            if sa is None:
                return None
            flag = sa.get("automountServiceAccountToken")
        return flag is not False

    def token(self, src):
        """A TokenRequest token of the Pod's ServiceAccount, bound to the Pod (None when the Pod
        goes away first). 3607 s, as the kubelet asks: the apiserver makes that a year
        (--service-account-extend-token-expiration), so nothing here refreshes it."""
        sa = self.service_account()
        spec = {"expirationSeconds": src.get("expirationSeconds", 3607)}
        if self.pod["spec"].get("serviceAccountName"):
            # Bound to the Pod (the apiserver refuses that for a Pod that names no ServiceAccount:
            # one created while the admission plugin was off).
            spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid}
        if src.get("audience"):
            spec["audiences"] = [src["audience"]]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        said = False
        while not self.stopping.is_set():
            try:
                r = self.mgr.api.call("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", body)
                return r["status"]["token"].encode()
            except ApiError as e:
                if e.status != 404:
                    raise
            if not said:
                log(f"{self.key}: waiting for serviceaccount {self.ns}/{sa}")
                said = True
            self.stopping.wait(0.5)
        return None

    def object_files(self, kind, src, name):
        """[(path, bytes, mode)] of a secret/configMap source; None when the Pod went away."""
        obj = self.wait_object(kind, name, src.get("optional", False))
        if self.stopping.is_set():
            return None
        data = self.source_data(kind, obj)
        items = src.get("items")
        files = [(i["key"], i["path"], i.get("mode")) for i in items] if items else [(k, k, None) for k in data]
        out = []
        for key, rel, mode in files:
            if key not in data:
                if not src.get("optional", False):
                    log(f"{self.key}: {kind} {name} has no key {key}")
                continue
            out.append((rel, data[key], mode))
        return out

    def downward_files(self, src):
        return [(i["path"], field_value(self.pod, i["fieldRef"]["fieldPath"]).encode(), i.get("mode"))
                for i in src.get("items") or [] if "fieldRef" in i]

    def projected_files(self, src):
        out = []
        for s in src.get("sources") or []:
            if "secret" in s:
                files = self.object_files("secrets", s["secret"], s["secret"].get("name", ""))
            elif "configMap" in s:
                files = self.object_files("configmaps", s["configMap"], s["configMap"].get("name", ""))
            elif "downwardAPI" in s:
                files = self.downward_files(s["downwardAPI"])
            elif "serviceAccountToken" in s:
                tok = self.token(s["serviceAccountToken"])
                files = None if tok is None else [(s["serviceAccountToken"]["path"], tok, None)]
            else:
                log(f"{self.key}: projected source {list(s)} is not supported; left out")
                files = []
            if files is None:
                return None
            out += files
        return out

    def volumes(self, automount):
        """{volume name: host directory}; None when the Pod went away while waiting."""
        vols = list(self.pod["spec"].get("volumes") or [])
        if automount:
            vols.append(AUTOMOUNT_VOLUME)
        out = {}
        for v in vols:
            d = os.path.join(self.dir, "volumes", v["name"])
            os.makedirs(d, exist_ok=True)
            out[v["name"]] = d
            if "emptyDir" in v:
                os.chmod(d, 0o777)  # as the kubelet makes it: any user of the Pod writes there
                continue
            mode = 0o644
            if "secret" in v:
                src = v["secret"]
                files = self.object_files("secrets", src, src.get("secretName", ""))
            elif "configMap" in v:
                src = v["configMap"]
                files = self.object_files("configmaps", src, src.get("name", ""))
            elif "projected" in v:
                src = v["projected"]
                files = self.projected_files(src)
            elif "downwardAPI" in v:
                src = v["downwardAPI"]
                files = self.downward_files(src)
            else:
                log(f"{self.key}: volume {v['name']} ({[k for k in v if k != 'name']}) is not supported: an empty directory")
                continue
            if files is None:
                return None
            mode = src.get("defaultMode", mode)
            for rel, data, fmode in files:
                path = os.path.join(d, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
                os.chmod(path, fmode if fmode is not None else mode)
        return out

    def plan(self, vols, automount):
        """([init Container], [Container]) of the containers the image map names."""
        spec = self.pod["spec"]
        cluster = self.mgr.cluster
        svc_env = cluster.env_for(self.ns, spec.get("enableServiceLinks", True) is not False) if cluster else {}
        pod_sc = spec.get("securityContext") or {}
        inits, ctrs = [], []
        for init, c in ([(True, c) for c in spec.get("initContainers") or []]
                        + [(False, c) for c in spec.get("containers") or []]):
            target = image_target(self.mgr.images, c.get("image", ""))
            if target is None:
                if init:
                    log(f"{self.key}: init container {c['name']}: image {c.get('image')} is not in the image map; skipped")
                continue
            sec = security(pod_sc, c.get("securityContext") or {})
            if sec is None:
                log(f"{self.key}: container {c['name']}: runAsNonRoot with runAsUser 0; not started")
                continue
            env = {"PATH": DEFAULT_PATH, "HOME": "/", "HOSTNAME": self.hostname}
            env.update(svc_env)
            for ef in c.get("envFrom") or []:
                prefix = ef.get("prefix", "")
                for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
                    if key in ef:
                        ref = ef[key]
                        obj = self.wait_object(kind, ref["name"], ref.get("optional", False))
                        for k, v in self.source_data(kind, obj).items():
                            env[prefix + k] = v.decode(errors="replace")
            for e in c.get("env") or []:
                if "value" in e:
                    val = expand(e["value"], env)
                elif "valueFrom" in e:
                    vf = e["valueFrom"]
                    val = ""
                    if "fieldRef" in vf:
                        val = field_value(self.pod, vf["fieldRef"]["fieldPath"])
                    else:
                        for kind, key in (("configmaps", "configMapKeyRef"), ("secrets", "secretKeyRef")):
                            if key in vf:
                                ref = vf[key]
                                obj = self.wait_object(kind, ref["name"], ref.get("optional", False))
                                raw = self.source_data(kind, obj).get(ref["key"])
                                val = raw.decode(errors="replace") if raw is not None else ""
                        if "resourceFieldRef" in vf:
                            log(f"{self.key}: env {e['name']}: resourceFieldRef is not supported; empty")
                else:
                    val = ""
                env[e["name"]] = val
            binary, with_args = target
            argv = container_argv(binary, with_args, c, env)
            mounts = []
            vm = list(c.get("volumeMounts") or [])
            if automount:
                vm.append({"name": AUTOMOUNT_VOLUME["name"], "mountPath": SA_MOUNT, "readOnly": True})
            for m in vm:
                host = vols.get(m["name"])
                if host is None:
                    log(f"{self.key}: container {c['name']}: no volume {m['name']}")
                    continue
                if m.get("subPath"):
                    host = os.path.join(host, m["subPath"])
                    if not os.path.exists(host):
                        os.makedirs(host)
                mounts.append({"target": os.path.normpath(m["mountPath"]), "source": host,
                               "readOnly": bool(m.get("readOnly")), "file": os.path.isfile(host)})
            # The Pod's files the kubelet mounts into every container.
            for name in ("hosts", "hostname", "resolv.conf"):
                if not any(m["target"] == f"/etc/{name}" for m in mounts):
                    mounts.append({"target": f"/etc/{name}", "source": os.path.join(self.etc, name),
                                   "readOnly": False, "file": True})
            mounts.sort(key=lambda m: m["target"].rstrip("/").count("/"))
            (inits if init else ctrs).append(Container(c, init, argv, env, mounts, sec))
        return inits, ctrs

    def log_path(self, container):
        return os.path.join(self.dir, f"{container}.log")

    def write_logs_object(self):
        """The kwok Logs object (named like the Pod) pointing at every container's log file."""
        os.makedirs(self.dir, exist_ok=True)
        logs = []
        spec = self.pod["spec"]
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            path = self.log_path(c["name"])
            open(path, "ab").close()
            logs.append({"containers": [c["name"]], "logsFile": path, "follow": True})
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": self.name,
                "namespace": self.ns,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": self.name, "uid": self.uid}],
            },
            "spec": {"logs": logs},
        }
        base = f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{self.ns}/logs"
        for _ in range(5):
            try:
                self.mgr.api.call("POST", base, body)
                return
            except ApiError as e:
                if e.status != 409:
                    raise
            # A same-named Pod's Logs object the garbage collector has not removed yet: take it.
            old = self.mgr.api.get(f"{base}/{self.name}")
            if old is None:
                continue
            body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            try:
                self.mgr.api.call("PUT", f"{base}/{self.name}", body)
                return
            except ApiError as e:
                if e.status not in (404, 409):
                    raise
            body["metadata"].pop("resourceVersion", None)

    def start(self, ctr):
        scratch = os.path.join(self.dir, "ctr", ctr.name)
        os.makedirs(scratch, exist_ok=True)
        spec = {
            "argv": ctr.argv,
            "env": ctr.env,
            "cwd": ctr.spec.get("workingDir") or "/",
            "hostname": self.hostname,
            "scratch": scratch,
            "mounts": ctr.mounts,
        }
        spec.update(ctr.sec)
        spec_path = scratch + ".json"
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        cmd = ["ip", "netns", "exec", self.netns, sys.executable, "-S", RUNNER, "exec", spec_path]
        # Under stop_lock, so stop() either sees the process or start() sees stopping.
        with self.stop_lock:
            if self.stopping.is_set():
                return None
            p = subprocess.Popen(cmd, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            self.procs[ctr.name] = p
        with open(os.path.join(self.dir, f"{ctr.name}.pid"), "w") as f:
            f.write(f"{p.pid}\n")
        logf = CriLog(self.log_path(ctr.name), streams=2)
        for pipe, stream in ((p.stdout, "stdout"), (p.stderr, "stderr")):
            threading.Thread(target=logf.pump, args=(pipe, stream), daemon=True).start()
        what = "init container" if ctr.init else "container"
        log(f"{self.key}: {what} {ctr.name} runs {' '.join(ctr.argv)} (pid {p.pid}, uid {ctr.sec['uid']})")
        return p

    def run_inits(self, inits):
        """Runs the init containers in order, each to its end (restarted after a failure unless
        restartPolicy Never); sidecars (restartPolicy Always) are started and left running.
        Returns the sidecars, or None when the Pod went away or an init container failed for
        good."""
        policy = self.pod["spec"].get("restartPolicy", "Always")
        sidecars = []
        for ctr in inits:
            if ctr.sidecar:
                self.start(ctr)
                sidecars.append(ctr)
                continue
            delay = 1
            while True:
                p = self.start(ctr)
                if p is None:
                    return None
                code = p.wait()
                if self.stopping.is_set():
                    return None
                with self.stop_lock:
                    self.procs.pop(ctr.name, None)
                if code == 0:
                    log(f"{self.key}: init container {ctr.name} completed")
                    break
                if policy == "Never":
                    log(f"{self.key}: init container {ctr.name} exited {code}; the Pod goes no further (restartPolicy Never)")
                    return None
                log(f"{self.key}: init container {ctr.name} exited {code}; restarting in {delay}s")
                if self.stopping.wait(delay):
                    return None
                delay = min(delay * 2, 10)
        return sidecars

    def first_port(self, ctrs):
        for c in ctrs:
            for port in c.spec.get("ports") or []:
                if port.get("protocol", "TCP") == "TCP" and port.get("containerPort"):
                    return port["containerPort"]
        return None

    def probe(self, c, probe):
        """One try of an httpGet or tcpSocket readinessProbe from the host, as the kubelet
        probes: to the Pod IP, the port by number or by the container's port name."""
        act = probe.get("httpGet") or probe.get("tcpSocket")
        port = act.get("port")
        if isinstance(port, str) and not port.isdigit():
            port = next((p["containerPort"] for p in c.spec.get("ports") or [] if p.get("name") == port), None)
            if port is None:
                return False
        port = int(port)
        host = act.get("host") or self.ip
        timeout = probe.get("timeoutSeconds", 1)
        try:
            if "tcpSocket" in probe:
                with socket.create_connection((host, port), timeout=timeout):
                    return True
            if act.get("scheme", "HTTP").upper() == "HTTPS":
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {h["name"]: h["value"] for h in act.get("httpHeaders") or []}
                conn.request("GET", act.get("path") or "/", headers=headers)
                return 200 <= conn.getresponse().status < 400
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            return False

    def announce(self, ctrs):
        """Annotates the Pod started (kwok then makes it Ready) once the readinessProbes of the
        containers it runs pass, or, when none has one, once the first containerPort answers."""
        t0 = time.time()
        probes = [(c, c.spec["readinessProbe"]) for c in ctrs
                  if {"httpGet", "tcpSocket"} & set(c.spec.get("readinessProbe") or {})]
        if probes:
            for c, probe in probes:
                while not self.stopping.is_set() and not self.probe(c, probe):
                    self.stopping.wait(0.2)
                if self.stopping.is_set():
                    return
                log(f"{self.key}: container {c.name}'s readinessProbe passes after {time.time() - t0:.2f}s")
        else:
            port = self.first_port(ctrs)
            if port is not None:
                while not self.stopping.is_set():
                    try:
                        with socket.create_connection((self.ip, port), timeout=1):
                            break
                    except OSError:
                        self.stopping.wait(0.1)
                if self.stopping.is_set():
                    return
                log(f"{self.key}: {self.ip}:{port} answers after {time.time() - t0:.2f}s")
        if (self.pod["metadata"].get("annotations") or {}).get(STARTED) == "true":
            return
        try:
            self.mgr.api.patch(f"/api/v1/namespaces/{self.ns}/pods/{self.name}",
                               {"metadata": {"annotations": {STARTED: "true"}}})
        except ApiError as e:
            if e.status != 404:
                raise

    def supervise(self, ctrs):
        policy = self.pod["spec"].get("restartPolicy", "Always")
        backoff = {}
        while not self.stopping.wait(0.2):
            for ctr in ctrs:
                p = self.procs.get(ctr.name)
                if p is None or p.poll() is None:
                    continue
                code = p.returncode
                if not ctr.sidecar and (policy == "Never" or (policy == "OnFailure" and code == 0)):
                    log(f"{self.key}: container {ctr.name} exited {code}; not restarted ({policy})")
                    self.procs.pop(ctr.name)
                    continue
                delay = backoff.get(ctr.name, 1)
                log(f"{self.key}: container {ctr.name} exited {code}; restarting in {delay}s")
                self.procs.pop(ctr.name)
                if self.stopping.wait(delay):
                    return
                backoff[ctr.name] = min(delay * 2, 10)
                self.start(ctr)

    def stop(self):
        """Kills the processes and removes the namespace (idempotent; waits until done)."""
        self.stopping.set()
        with self.stop_lock:
            if self.stopped.is_set():
                return
            if self.mgr.cluster is not None:
                self.mgr.cluster.remove_pod(self)
            for p in list(self.procs.values()):
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.time() + 2
            for p in list(self.procs.values()):
                try:
                    p.wait(max(0.01, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            with self.mgr.net_lock:
                if self.net_up:
                    delete_netns(self.netns, self.host_if)
                    self.mgr.record(self.netns, False)
                    self.net_up = False
                if self.mgr.by_ip.get(self.ip) is self:
                    del self.mgr.by_ip[self.ip]
            self.stopped.set()
            log(f"{self.key}: stopped, {self.netns} removed")


# The volume the ServiceAccount admission plugin adds (kube-api-access-*), for PodRun.automount.
AUTOMOUNT_VOLUME = {
    "name": "kube-api-access",
    "projected": {
        "defaultMode": 0o644,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
    },
}


class Pods:
    def __init__(self, api, args, cluster):
        self.api = api
        self.cluster = cluster  # ClusterIPs, or None
        self.images = parse_images(args.images)
        self.run_dir = args.run_dir
        self.bridge = args.bridge
        self.gateway = args.gateway
        self.prefix_len = args.prefix_len
        self.state_dir = args.state_dir
        self.service_cidr = args.service_cidr
        self.service_via = args.service_addr
        self.lock = threading.Lock()  # runs
        # by_ip and the namespaces: one set up or torn down at a time. Order: a PodRun's
        # stop_lock, then net_lock, never the other way round.
        self.net_lock = threading.Lock()
        self.runs = {}  # uid -> PodRun
        self.by_ip = {}  # pod IP -> PodRun holding it
        os.makedirs(self.run_dir, exist_ok=True)
        if self.state_dir:
            os.makedirs(os.path.join(self.state_dir, "netns"), exist_ok=True)

    def record(self, netns, present):
        """Lists the namespaces this run made in STATE_DIR/netns, for a later run to reap."""
        if not self.state_dir:
            return
        path = os.path.join(self.state_dir, "netns", netns)
        if present:
            open(path, "w").close()
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    @staticmethod
    def wanted(pod):
        st = pod.get("status") or {}
        return (not pod["metadata"].get("deletionTimestamp")
                and pod.get("spec", {}).get("nodeName")
                and st.get("podIP")
                and st.get("phase") not in ("Succeeded", "Failed")
                and not pod.get("spec", {}).get("hostNetwork"))

    def on_event(self, kind, pod):
        uid = pod["metadata"]["uid"]
        with self.lock:
            run = self.runs.get(uid)
            if kind != "DELETED" and self.wanted(pod):
                if run is None:
                    run = PodRun(self, pod)
                    self.runs[uid] = run
                    run.thread.start()
                return
            if run is None:
                return
            del self.runs[uid]
        threading.Thread(target=run.stop, daemon=True).start()

    def on_list(self, pods):
        seen = {p["metadata"]["uid"] for p in pods}
        with self.lock:
            gone = [r for uid, r in self.runs.items() if uid not in seen]
        for r in gone:
            self.on_event("DELETED", r.pod)
        for p in pods:
            self.on_event("MODIFIED", p)

    def stop_all(self):
        with self.lock:
            runs = list(self.runs.values())
            self.runs.clear()
        threads = [threading.Thread(target=r.stop) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


# --- Services: endpoints, a TCP splice ------------------------------------------------------


def svc_key(obj):
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def ready_endpoints(slices, key, port_name):
    """[(address, port)] of the ready endpoints of Service `key` in `slices` (EndpointSlices),
    the port the slice port named `port_name`, sorted."""
    ns, name = key.split("/", 1)
    out = []
    for s in slices:
        md = s["metadata"]
        if md.get("namespace") != ns or (md.get("labels") or {}).get("kubernetes.io/service-name") != name:
            continue
        if s.get("addressType") not in ("IPv4", "IPv6"):
            continue
        port = next((p.get("port") for p in s.get("ports") or [] if (p.get("name") or "") == port_name), None)
        if port is None:
            continue
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            out.extend((a, port) for a in ep.get("addresses") or [])
    return sorted(out)


async def splice(reader, writer, host, port):
    """Connects to host:port (from the host's network namespace) and copies both ways until
    each side has closed; closes `writer` at once when the connection fails."""
    try:
        ur, uw = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
    except (OSError, asyncio.TimeoutError):
        writer.close()
        return

    async def pipe(r, w):
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                w.write(data)
                await w.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            try:
                if w.can_write_eof():
                    w.write_eof()
            except OSError:
                pass

    await asyncio.gather(pipe(reader, uw), pipe(ur, writer))
    uw.close()
    writer.close()


# --- ClusterIPs and the Services' names ------------------------------------------------------


class ClusterIPs:
    """The Services' ClusterIPs and names for the Pods (there is no kube-proxy and no cluster
    DNS). Every address of the service range is local in the Services' namespace (SERVICE_NETNS,
    on the bridge: e2e/lib/pods.sh makes it, with `ip route add local SERVICE_CIDR dev lo`), and
    each Pod routes the range there; the runner listens on CLUSTER_IP:PORT for each TCP port of
    each Service, in that namespace, and splices each connection to a ready endpoint of the
    Service (round robin; the slice port named like the Service port), from the host, so the
    endpoint sees the bridge's address as its client. default/kubernetes goes to the apiserver
    (`apiserver`: its loopback host and port). Each Pod's /etc/hosts gets a line per Service:
    NAME.NS.svc.cluster.local, NAME.NS.svc, NAME.NS (and NAME in its own namespace), at the
    ClusterIP or, for a headless Service, at each ready endpoint. Nothing touches the host's
    routes or netfilter, so two runs (two slots) with the same service range do not meet.

    Informer callbacks come from the informer threads; the listeners are made by a thread that
    lives in the Services' namespace (a socket stays in the namespace it was made in) and served
    on the asyncio `loop`."""

    def __init__(self, loop, netns, cidr, apiserver):
        self.loop = loop
        self.netns = netns
        self.cidr = ipaddress.ip_network(cidr)
        self.apiserver = apiserver
        self.lock = threading.Lock()
        self.services = {}  # "ns/name" -> Service
        self.slices = {}  # uid -> EndpointSlice
        self.listeners = {}  # (ip, port) -> [asyncio.Server, "ns/name", port name]
        self.rr = {}
        self.pods = {}  # uid -> PodRun, whose /etc/hosts follows the Services
        self.dirty = threading.Event()
        self.synced = threading.Event()  # the first list of Services and of EndpointSlices
        self._seen = set()
        threading.Thread(target=self._reconcile_loop, name="clusterips", daemon=True).start()

    # Informer callbacks.
    def on_service_list(self, items):
        with self.lock:
            self.services = {svc_key(s): s for s in items}
        self._listed("services")

    def on_service(self, kind, obj):
        with self.lock:
            if kind == "DELETED":
                self.services.pop(svc_key(obj), None)
            else:
                self.services[svc_key(obj)] = obj
        self.dirty.set()

    def on_slice_list(self, items):
        with self.lock:
            self.slices = {s["metadata"]["uid"]: s for s in items}
        self._listed("slices")

    def on_slice(self, kind, obj):
        with self.lock:
            if kind == "DELETED":
                self.slices.pop(obj["metadata"]["uid"], None)
            else:
                self.slices[obj["metadata"]["uid"]] = obj
        self.dirty.set()  # headless Services' names follow their endpoints

    def _listed(self, what):
        self._seen.add(what)
        self.dirty.set()
        if self._seen >= {"services", "slices"}:
            self.synced.set()

    # What the Pods see.
    def env_for(self, ns, links):
        """The kubelet's Service variables for a Pod of `ns`: default/kubernetes's
        (KUBERNETES_SERVICE_HOST, ...) always, with `links` (enableServiceLinks) those of every
        Service of `ns` with a ClusterIP."""
        out = {}
        with self.lock:
            svcs = sorted(self.services.items())
        for key, svc in svcs:
            sns, name = key.split("/", 1)
            spec = svc.get("spec") or {}
            ip = spec.get("clusterIP")
            ports = spec.get("ports") or []
            if not ip or ip == "None" or not ports:
                continue
            if key != "default/kubernetes" and not (links and sns == ns):
                continue
            prefix = name.upper().replace("-", "_")
            first = ports[0]
            out[f"{prefix}_SERVICE_HOST"] = ip
            out[f"{prefix}_SERVICE_PORT"] = str(first["port"])
            for p in ports:
                if p.get("name"):
                    out[f"{prefix}_SERVICE_PORT_{p['name'].upper().replace('-', '_')}"] = str(p["port"])
            out[f"{prefix}_PORT"] = f"{first.get('protocol', 'TCP').lower()}://{ip}:{first['port']}"
            for p in ports:
                proto = p.get("protocol", "TCP")
                base = f"{prefix}_PORT_{p['port']}_{proto}"
                out[base] = f"{proto.lower()}://{ip}:{p['port']}"
                out[f"{base}_PROTO"] = proto.lower()
                out[f"{base}_PORT"] = str(p["port"])
                out[f"{base}_ADDR"] = ip
        return out

    def host_lines(self, ns):
        """/etc/hosts lines of every Service, for a Pod of `ns`."""
        lines = []
        with self.lock:
            svcs = sorted(self.services.items())
            slices = list(self.slices.values())
        for key, svc in svcs:
            sns, name = key.split("/", 1)
            names = [f"{name}.{sns}.svc.{CLUSTER_DOMAIN}", f"{name}.{sns}.svc", f"{name}.{sns}"]
            if sns == ns:
                names.append(name)
            ip = (svc.get("spec") or {}).get("clusterIP")
            if ip == "None":
                addrs = sorted({a for s in slices
                                if s["metadata"].get("namespace") == sns
                                and (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == name
                                for ep in s.get("endpoints") or []
                                if (ep.get("conditions") or {}).get("ready") is not False
                                for a in ep.get("addresses") or []})
            else:
                addrs = [ip] if ip else []
            lines += [f"{a}\t{' '.join(names)}" for a in addrs]
        return lines

    def add_pod(self, run):
        with self.lock:
            self.pods[run.uid] = run
        run.write_hosts(self.host_lines(run.ns))

    def remove_pod(self, run):
        with self.lock:
            self.pods.pop(run.uid, None)

    # The listeners, from the thread in the Services' namespace.
    def _reconcile_loop(self):
        if self.netns:
            try:
                setns(f"/run/netns/{self.netns}", CLONE_NEWNET)
            except OSError as e:
                log(f"clusterips: {e}: no ClusterIP answers")
                self.netns = None
        while True:
            self.dirty.wait()
            time.sleep(0.05)  # a burst of changes, one pass
            self.dirty.clear()
            if self.netns:
                try:
                    self._sync_listeners()
                except Exception as e:  # noqa: BLE001
                    log(f"clusterips: {type(e).__name__}: {e}")
                    self.dirty.set()
                    time.sleep(1)
            with self.lock:
                runs = list(self.pods.values())
            lines = {}
            for run in runs:
                try:
                    if run.ns not in lines:
                        lines[run.ns] = self.host_lines(run.ns)
                    run.write_hosts(lines[run.ns])
                except OSError as e:
                    log(f"clusterips: /etc/hosts of {run.key}: {e}")

    def _sync_listeners(self):
        want = {}
        with self.lock:
            for key, svc in self.services.items():
                spec = svc.get("spec") or {}
                ip = spec.get("clusterIP")
                try:
                    if not ip or ipaddress.ip_address(ip) not in self.cidr:
                        continue
                except ValueError:
                    continue
                for p in spec.get("ports") or []:
                    if p.get("protocol", "TCP") == "TCP":
                        want[(ip, p["port"])] = (key, p.get("name") or "")
            have = set(self.listeners)
            for lk in have & set(want):
                self.listeners[lk][1:] = want[lk]
            gone = [(lk, self.listeners.pop(lk)[0]) for lk in have - set(want)]
        for lk, server in gone:
            self.loop.call_soon_threadsafe(server.close)
            log(f"clusterips: {lk[0]}:{lk[1]} closed")
        for lk in sorted(set(want) - have):
            sock = socket.socket(socket.AF_INET6 if ":" in lk[0] else socket.AF_INET)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(lk)
            except OSError as e:
                log(f"clusterips: cannot listen on {lk[0]}:{lk[1]}: {e}")
                sock.close()
                continue
            sock.listen(128)
            sock.setblocking(False)

            def handler(r, w, lk=lk):
                return self._proxy(r, w, lk)

            server = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(handler, sock=sock), self.loop).result(10)
            with self.lock:
                self.listeners[lk] = [server, *want[lk]]
            log(f"clusterips: {want[lk][0]} answers on {lk[0]}:{lk[1]}")

    async def _proxy(self, reader, writer, lk):
        with self.lock:
            entry = self.listeners.get(lk)
            key, port_name = (entry[1], entry[2]) if entry else (None, None)
            eps = ready_endpoints(list(self.slices.values()), key, port_name) if entry else []
        if key == "default/kubernetes":
            eps = [self.apiserver]
        if not eps:
            writer.close()
            return
        n = self.rr.get(lk, 0)
        self.rr[lk] = n + 1
        host, port = eps[n % len(eps)]
        await splice(reader, writer, host, port)


# --- load balancer -------------------------------------------------------------------------


class LoadBalancer:
    """Addresses from a loopback pool for Services of type LoadBalancer, and a TCP proxy on
    each to the Service's ready endpoints. Runs on the shared asyncio loop; the informer
    threads hand it the Services and EndpointSlices."""

    def __init__(self, api, pool, loop):
        self.api = api
        net = ipaddress.ip_network(pool)
        self.pool = [str(a) for a in net.hosts()]
        self.loop = loop
        self.services = {}  # "ns/name" -> Service
        self.slices = {}  # slice uid -> EndpointSlice
        self.alloc = {}  # "ns/name" -> ip
        self.listeners = {}  # ("ns/name", port, ip) -> asyncio.Server
        self.rr = {}
        self.synced = set()
        self.lock = threading.Lock()

    # Informer callbacks (other threads): hand over to the loop.
    def on_service_list(self, items):
        self.loop.call_soon_threadsafe(self._svc_list, items)

    def on_service(self, kind, obj):
        self.loop.call_soon_threadsafe(self._svc_event, kind, obj)

    def on_slice_list(self, items):
        self.loop.call_soon_threadsafe(self._slice_list, items)

    def on_slice(self, kind, obj):
        self.loop.call_soon_threadsafe(self._slice_event, kind, obj)

    @staticmethod
    def _key(obj):
        return svc_key(obj)

    @staticmethod
    def _ours(svc):
        spec = svc.get("spec") or {}
        return (spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")
                and not svc["metadata"].get("deletionTimestamp"))

    def _svc_list(self, items):
        keys = {self._key(s) for s in items}
        for k in list(self.services):
            if k not in keys:
                self._svc_event("DELETED", self.services[k])
        # Keep the addresses Services already hold first (a restarted runner), then the rest.
        items = sorted(items, key=lambda s: 0 if self._held(s) else 1)
        for s in items:
            self._svc_event("MODIFIED", s)

    def _held(self, svc):
        ing = (((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [])
        ip = ing[0].get("ip") if ing else None
        return ip if ip in self.pool else None

    def _svc_event(self, kind, svc):
        key = self._key(svc)
        if kind == "DELETED" or not self._ours(svc):
            self.services.pop(key, None)
            ip = self.alloc.pop(key, None)
            self._sync_listeners(key, None, [])
            if ip:
                log(f"lb: {key} released {ip}")
            return
        self.services[key] = svc
        ip = self.alloc.get(key)
        if ip is None:
            held = self._held(svc)
            used = set(self.alloc.values())
            ip = held if held and held not in used else next((a for a in self.pool if a not in used), None)
            if ip is None:
                log(f"lb: pool exhausted; {key} gets no address")
                return
            self.alloc[key] = ip
            log(f"lb: {key} gets {ip}")
        ports = [p for p in svc["spec"].get("ports") or [] if p.get("protocol", "TCP") == "TCP"]
        self._sync_listeners(key, ip, ports)
        if self._held(svc) != ip:
            threading.Thread(target=self._write_status, args=(svc, ip), daemon=True).start()

    def _write_status(self, svc, ip):
        md = svc["metadata"]
        try:
            self.api.patch(f"/api/v1/namespaces/{md['namespace']}/services/{md['name']}/status",
                           {"status": {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}})
        except ApiError as e:
            if e.status != 404:
                log(f"lb: status of {self._key(svc)}: {e}")

    def _sync_listeners(self, key, ip, ports):
        want = {(key, p["port"], ip): p for p in ports} if ip else {}
        for lk in [lk for lk in self.listeners if lk[0] == key and lk not in want]:
            self.listeners.pop(lk).close()
        for lk, port in want.items():
            if lk in self.listeners:
                continue
            self.listeners[lk] = None
            self.loop.create_task(self._listen(lk, port.get("name", "")))

    async def _listen(self, lk, port_name):
        key, port, ip = lk
        try:
            server = await asyncio.start_server(
                lambda r, w: self._proxy(r, w, key, port_name), ip, port, reuse_address=True)
        except OSError as e:
            log(f"lb: {key}: cannot listen on {ip}:{port}: {e}")
            self.listeners.pop(lk, None)
            return
        if lk not in self.listeners:  # dropped while binding
            server.close()
            return
        self.listeners[lk] = server
        log(f"lb: {key} listens on {ip}:{port}")

    def _slice_list(self, items):
        self.slices = {s["metadata"]["uid"]: s for s in items}

    def _slice_event(self, kind, obj):
        if kind == "DELETED":
            self.slices.pop(obj["metadata"]["uid"], None)
        else:
            self.slices[obj["metadata"]["uid"]] = obj

    def endpoints(self, key, port_name):
        return ready_endpoints(self.slices.values(), key, port_name)

    async def _proxy(self, reader, writer, key, port_name):
        eps = self.endpoints(key, port_name)
        if not eps:
            writer.close()
            return
        n = self.rr.get((key, port_name), 0)
        self.rr[(key, port_name)] = n + 1
        host, port = eps[n % len(eps)]
        await splice(reader, writer, host, port)


# --- main ----------------------------------------------------------------------------------


class FanOut:
    """Hands one informer's callbacks to several handlers."""

    def __init__(self, handlers, list_name, event_name):
        self.handlers = handlers
        self.list_name, self.event_name = list_name, event_name

    def on_list(self, items):
        for h in self.handlers:
            getattr(h, self.list_name)(items)

    def on_event(self, kind, obj):
        for h in self.handlers:
            getattr(h, self.event_name)(kind, obj)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "exec":
        container_exec(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="https://127.0.0.1:PORT")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--bridge", required=True, help="host bridge the Pods' veths join")
    ap.add_argument("--gateway", required=True, help="the bridge's address, the Pods' default route")
    ap.add_argument("--prefix-len", type=int, default=16, help="prefix length of the Pod addresses")
    ap.add_argument("--run-dir", required=True, help="volumes and logs, one directory per Pod uid")
    ap.add_argument("--state-dir", default="", help="records the namespaces made, for reaping")
    ap.add_argument("--images", default=os.environ.get("SLUICE_E2E_IMAGES", ""),
                    help="PREFIX=BINARY[+args],... (default $SLUICE_E2E_IMAGES)")
    ap.add_argument("--lb-pool", default="", help="CIDR of LoadBalancer addresses (empty: no LB)")
    ap.add_argument("--service-cidr", default="",
                    help="the apiserver's --service-cluster-ip-range (empty: no ClusterIPs, no Service names)")
    ap.add_argument("--service-netns", default="",
                    help="network namespace on the bridge where the service range is local")
    ap.add_argument("--service-addr", default="",
                    help="its address on the bridge, where the Pods route the service range")
    args = ap.parse_args()

    api = Api(args.server, args.ca, args.cert, args.key)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="loop", daemon=True).start()
    cluster = None
    if args.service_cidr:
        cluster = ClusterIPs(loop, args.service_netns or None, args.service_cidr, (api.host, api.port))
    pods = Pods(api, args, cluster)
    stop = threading.Event()

    def on_signal(*_):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log(f"podrunner: images {pods.images}, bridge {args.bridge}, lb pool {args.lb_pool or 'none'}, "
        f"services {args.service_cidr or 'none'} in {args.service_netns or 'no namespace'}")
    handlers = [h for h in (cluster,) if h is not None]
    if args.lb_pool:
        handlers.append(LoadBalancer(api, args.lb_pool, loop))
    if handlers:
        svcs = FanOut(handlers, "on_service_list", "on_service")
        slices = FanOut(handlers, "on_slice_list", "on_slice")
        threading.Thread(target=informer, daemon=True, args=(
            api, "/api/v1/services", "services", svcs.on_list, svcs.on_event, stop)).start()
        threading.Thread(target=informer, daemon=True, args=(
            api, "/apis/discovery.k8s.io/v1/endpointslices", "endpointslices",
            slices.on_list, slices.on_event, stop)).start()
    if cluster is not None and not cluster.synced.wait(30):
        log("podrunner: no list of Services and EndpointSlices in 30 s; starting Pods anyway")
    threading.Thread(target=informer, daemon=True, args=(
        api, "/api/v1/pods?fieldSelector=spec.nodeName%21%3D", "pods", pods.on_list, pods.on_event, stop)).start()
    while not stop.wait(1):
        pass
    log("podrunner: stopping every Pod")
    pods.stop_all()
    log("podrunner: done")


if __name__ == "__main__":
    main()
