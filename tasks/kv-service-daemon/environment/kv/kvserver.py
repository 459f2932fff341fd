#!/usr/bin/env python3
"""kvserver: a tiny in-memory key-value HTTP service.

    python3 kvserver.py --port PORT --data FILE [--bind ADDRESS]

GET /health        -> 200 "ok"
GET /kv/<key>      -> 200 value, or 404
PUT /kv/<key>      -> 204; the request body is the value
DELETE /kv/<key>   -> 204

Values live in memory. They are loaded from FILE (JSON) at start-up and written back to
FILE only on a clean shutdown (SIGTERM or SIGINT). The directory holding FILE must exist.
The server runs in the foreground and logs requests to stderr.
"""

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORE: dict[str, str] = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def _reply(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _key(self):
        return self.path[len("/kv/"):] if self.path.startswith("/kv/") and len(self.path) > 4 else None

    def do_GET(self):
        if self.path == "/health":
            return self._reply(200, b"ok")
        key = self._key()
        with LOCK:
            value = STORE.get(key) if key else None
        if value is None:
            return self._reply(404, b"not found")
        return self._reply(200, value.encode())

    def do_PUT(self):
        key = self._key()
        if not key:
            return self._reply(400, b"bad key")
        length = int(self.headers.get("Content-Length") or 0)
        value = self.rfile.read(length).decode()
        with LOCK:
            STORE[key] = value
        return self._reply(204)

    def do_DELETE(self):
        key = self._key()
        with LOCK:
            STORE.pop(key, None)
        return self._reply(204)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--bind", default="127.0.0.1")
    args = parser.parse_args()

    data_dir = os.path.dirname(os.path.abspath(args.data))
    if not os.path.isdir(data_dir):
        print(f"kvserver: data directory {data_dir} does not exist", file=sys.stderr)
        return 1
    if os.path.exists(args.data):
        with open(args.data) as fh:
            STORE.update(json.load(fh))

    server = ThreadingHTTPServer((args.bind, args.port), Handler)

    def shutdown(signum, _frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    print(f"kvserver: listening on {args.bind}:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()
    server.server_close()
    tmp = args.data + ".tmp"
    with LOCK, open(tmp, "w") as fh:
        json.dump(STORE, fh)
    os.replace(tmp, args.data)
    print("kvserver: saved, bye", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
