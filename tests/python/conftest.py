"""pytest fixtures for the Python module's tests (tests/python.cmake runs them with
Debian's /usr/bin/python3, PYTHONPATH=BUILD/python and FPGUARD_CLI=BUILD/fpguard)."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest


def pytest_configure(config):
    # The fpguard under test is the build tree's, not an installed copy.
    import fpguard

    build = os.environ.get("FPGUARD_PYTHONPATH")
    if build and not os.path.abspath(fpguard.__file__).startswith(os.path.abspath(build)):
        raise pytest.UsageError(f"fpguard imported from {fpguard.__file__}, not from {build}")


@pytest.fixture(scope="session")
def cli():
    """The fpguard binary of the same build, for the CLI comparisons."""
    path = os.environ.get("FPGUARD_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"FPGUARD_CLI must name the fpguard binary (got {path!r})")

    def run(*argv, check=True):
        r = subprocess.run([path, *argv], capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            pytest.fail(f"fpguard {' '.join(argv)}: exit {r.returncode}: {r.stderr}")
        return r

    run.json = lambda *argv: json.loads(run(*argv, "--json").stdout)
    return run


def cli_error(r):
    """The CLI's error line without its "fpguard: error: " prefix (exit 2, one line)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fpguard: error: "), r.stderr
    return lines[0][len("fpguard: error: "):]


def assert_gil_released(call, what):
    """While one thread is inside `call`, another runs Python code: some of the main
    thread's timestamps fall strictly inside the call. With the GIL held through the call
    none could: the switch interval is made long, so the worker is never forced to give
    the GIL up between its two timestamps, and the main thread only gives it up itself
    (time.sleep(0))."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    try:
        for _ in range(5):  # a loaded machine may not schedule the main thread in time
            span, stamps = [], []

            def work():
                t0 = time.perf_counter()
                call()
                span.append((t0, time.perf_counter()))

            worker = threading.Thread(target=work)
            worker.start()
            while worker.is_alive():
                stamps.append(time.perf_counter())
                time.sleep(0)
            worker.join()
            (t0, t1), = span
            if any(t0 < s < t1 for s in stamps):
                return
    finally:
        sys.setswitchinterval(interval)
    pytest.fail(f"no Python code ran in another thread while {what} ran")


def peak_allocation(f):
    """The peak of what NumPy (which reports to tracemalloc) allocates while f runs."""
    import tracemalloc

    tracemalloc.start()
    f()
    _, p = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return p
