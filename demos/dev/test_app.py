"""The tests of demos/dev.yaml's application: the function, then the dev server that serves it."""

import os
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from app import greet

assert greet("tuidag") == "hello, tuidag", greet("tuidag")
port = os.environ.get("DEV_PORT", "48762")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the server is on this machine
with opener.open(f"http://127.0.0.1:{port}/greet?name=tuidag", timeout=10) as reply:
    served = reply.read().decode().strip()
assert served == "hello, tuidag", served
print("2 tests passed")
