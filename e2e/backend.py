#!/usr/bin/env python3
"""An e2e HTTP backend: answers every request with who it is and what it saw.

Runs inside the test's network namespace (see e2e/lib/controlplane.sh). The answer is one line of
JSON: {"backend": "backend-PORT", "path": ..., "host": ...}; /healthz answers "ok".
"""
import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    name = f"backend-{args.port}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            if self.path == "/healthz":
                body = b"ok\n"
            else:
                body = (json.dumps({"backend": name, "path": self.path,
                                    "host": self.headers.get("Host", "")}) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    ThreadingHTTPServer((args.address, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
