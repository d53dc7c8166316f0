"""The tests of demos/dev.yaml's application."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from app import greet

assert greet("tuidag") == "hello, tuidag", greet("tuidag")
print("1 test passed")
