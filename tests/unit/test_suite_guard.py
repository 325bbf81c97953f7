"""The suite refuses to start on a nearly full disk, naming the place (tests/conftest.py).

Stop 57's CI ran out of disk and failed 37 unrelated tests without a word about space. Run here as a
user runs it, in a subprocess, with the needed space set above any disk's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_suite_without_the_space_it_needs_stops_before_any_test_naming_the_place():
    env = {**os.environ, "MIRRORFLOW_TEST_MIN_FREE_MB": str(2**40)}
    command = [sys.executable, "-m", "pytest", "tests/unit/test_formats.py", "-n0", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 3, out[-2000:]
    assert "MB free where" in out and f"the suite needs about {2**40} MB" in out, out[-2000:]
    assert " passed" not in out
