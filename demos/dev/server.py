"""The dev server of demos/dev.yaml: the application's greeting over HTTP. A service under --watch: tuidag restarts it
when this file (or, through `build`, dev/app.py) changes, and the tests wait until it answers /health again."""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, str(Path(__file__).parent))

from app import greet


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/health":
            body = "ok\n"
        elif url.path == "/greet":
            body = greet(parse_qs(url.query).get("name", ["world"])[0]) + "\n"
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        print(format % args, flush=True)


port = int(os.environ.get("DEV_PORT", "48762"))
server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(f"serving on http://127.0.0.1:{port}", flush=True)
server.serve_forever()
