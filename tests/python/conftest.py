"""pytest fixtures for the Python module's tests (tests/python.cmake runs them with
Debian's /usr/bin/python3, PYTHONPATH=BUILD/python and FPGUARD_CLI=BUILD/fpguard)."""
import json
import os
import subprocess

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
