#!/usr/bin/env python3
"""The e2e test image `sluice-e2e/podecho` (e2e/run.sh maps it here with `+args`): an HTTP
server that answers every request with one line of JSON saying which Pod it is and what it saw.

Run by e2e/podrunner.py inside the Pod's network namespace, with the Pod's env: POD_NAME,
POD_NAMESPACE and POD_IP (from fieldRefs) and, when set, the contents of the files named by
GREETING_FILE and SECRET_FILE (volumes the runner wrote). Logs one line per request to stdout
(`kubectl logs` shows them). Not http.server.HTTPServer: its bind looks the host name up in DNS,
which takes seconds in a namespace with no resolver.
"""
import argparse
import json
import os
import socketserver
from http.server import BaseHTTPRequestHandler


def read(var):
    path = os.environ.get(var)
    if not path:
        return None
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"error: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args()
    me = {k: os.environ.get(v, "") for k, v in
          (("pod", "POD_NAME"), ("namespace", "POD_NAMESPACE"), ("ip", "POD_IP"))}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            body = dict(me, path=self.path, host=self.headers.get("Host", ""),
                        greeting=read("GREETING_FILE"), secret=read("SECRET_FILE"))
            data = (json.dumps(body) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            print(f"podecho {me['pod']}: GET {self.path} from {self.client_address[0]}", flush=True)

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
        allow_reuse_address = True
        daemon_threads = True

    server = Server(("0.0.0.0", args.port), Handler)
    print(f"podecho {me['pod']}: listening on {me['ip']}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
