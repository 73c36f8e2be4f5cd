#!/usr/bin/python3
"""The Makefile as a newcomer meets it:

- `make run` builds only what it runs. Its build commands (read from `make -n run`) are
  replayed on a fresh configuration as ninja's command lists (`ninja -t commands T`): the
  fpguard executable is linked with its ONNX module (and its MPI module where MPI is
  found), and no source
  under tests/ or bench/ is compiled. The same
  lists for `make build` must hold the tests and the benchmarks, or the check proves
  nothing.
- `make install` installs the binary under $(PREFIX)/bin and its modules under
  LIBDIR/fpguard (the ONNX module, and the MPI module where built): `cmake --install` of an
  existing build into a temporary prefix gives an fpguard that runs, and that loads the
  ONNX module to read a model (src/lazy/library.hpp). With the Python
  module built (--python ON), Debian's python3 imports the installed package when that
  prefix is its user base (PYTHONUSERBASE; the default prefix ~/.local is the default
  user base), from outside the build tree.

    make_test.py --source DIR --build DIR [--python ON|OFF]
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clitest  # noqa: E402
from clitest import check  # noqa: E402


def make_commands(source, goal, build):
    """The shell commands `make GOAL` would run, with BUILD=build."""
    r = subprocess.run(["make", "-n", "-C", source, goal, f"BUILD={build}"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"make -n {goal}", r.stderr)
    return r.stdout.splitlines()


def ninja_targets(source, goal, build):
    """The ninja targets that the `cmake --build` commands of `make GOAL` build."""
    targets = []
    builds = [shlex.split(line) for line in make_commands(source, goal, build)
              if line.startswith("cmake --build")]
    check(len(builds) == 1, f"make {goal}: one cmake --build command", builds)
    argv = builds[0]
    for i, a in enumerate(argv):
        if a == "--target":
            targets += argv[i + 1:i + 2]
    return targets or ["all"]


def compiled(build, targets):
    """Every source compiled and every executable linked to build `targets`."""
    r = subprocess.run(["ninja", "-C", build, "-t", "commands", *targets],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"ninja -t commands {targets}", r.stderr[-500:])
    sources = re.findall(r" -c (\S+)", r.stdout)
    linked = re.findall(r" -o (\S+) ", " ".join(ln for ln in r.stdout.splitlines()
                                                if " -c " not in ln))
    return sources, [os.path.basename(x) for x in linked]


def check_python_install(prefix, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONUSERBASE"] = prefix
    code = ("import fpguard, os, numpy; print(os.path.dirname(fpguard.__file__));"
            "print(float(fpguard.round(numpy.float32([1/3]), 'bfloat16')[0]))")
    r = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=cwd, env=env)
    lines = r.stdout.split()
    check(r.returncode == 0 and len(lines) == 2, "the installed Python package imports",
          (r.returncode, r.stdout, r.stderr[-500:]))
    if len(lines) == 2:
        check(lines[0].startswith(os.path.join(prefix, "lib", "python3")),
              "fpguard is imported from the prefix", lines[0])
        check(lines[1] == "0.333984375", "the installed module rounds", lines[1])
        check(os.path.isfile(os.path.join(lines[0], "py.typed")), "py.typed is installed",
              lines[0])


def cache_value(build, name):
    """`name`'s value in the build's CMakeCache.txt (upper case), or None."""
    with open(os.path.join(build, "CMakeCache.txt")) as fh:
        for ln in fh:
            if ln.startswith(name + ":"):
                return ln.split("=", 1)[1].strip().upper()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--python", default="OFF")
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = os.path.join(tmp, "build")
        # The configuration `make run` makes (its cmake -S line), in a fresh directory.
        (configure,) = [ln for ln in make_commands(source, "run", fresh)
                        if ln.startswith("cmake -S")]
        r = subprocess.run(configure, shell=True, cwd=source, capture_output=True, text=True,
                           timeout=600)
        check(r.returncode == 0, "configure a fresh build directory", r.stderr[-1000:])

        run_sources, run_linked = compiled(fresh, ninja_targets(source, "run", fresh))
        check("fpguard" in run_linked, "make run links fpguard", run_linked)
        check(run_sources, "make run compiles the sources", run_sources[:3])
        stray = [s for s in run_sources if re.search(r"(^|/)(tests|bench)/", s)]
        check(not stray, "make run compiles nothing under tests/ or bench/", stray[:5])
        # (with the ONNX module, and where CMake found MPI the module fpguard loads under
        # mpirun)
        check("libfpguard_onnx.so" in run_linked, "make run links the ONNX module", run_linked)
        check(set(run_linked) <= {"fpguard", "libfpguard_onnx.so", "libfpguard_mpi.so"},
              "make run links only fpguard and its modules", run_linked)

        all_sources, all_linked = compiled(fresh, ninja_targets(source, "build", fresh))
        check(any("/tests/" in s for s in all_sources) and
              any("/bench/" in s for s in all_sources),
              "make build compiles the tests and benchmarks (the check above can fail)",
              len(all_sources))

        # make install = cmake --install of the CLI's build into $(PREFIX).
        install = [ln for ln in make_commands(source, "install", a.build)
                   if ln.startswith("cmake --install")]
        check(len(install) == 1 and "--prefix" in install[0], "make install: cmake --install",
              install)
        prefix = os.path.join(tmp, "prefix")
        r = subprocess.run(["cmake", "--install", a.build, "--prefix", prefix],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "cmake --install", r.stderr)
        exe = os.path.join(prefix, "bin", "fpguard")
        check(os.path.isfile(exe), "cmake --install puts fpguard in PREFIX/bin", r.stdout)
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60) \
            if os.path.isfile(exe) else r
        check(r.returncode == 0 and r.stdout.startswith("fpguard "),
              "the installed fpguard runs", (r.returncode, r.stdout, r.stderr))
        # (the ONNX module where the build loads the libraries lazily, the MPI module where
        # it found MPI)
        for module, what, built in (
                ("libfpguard_onnx.so", "ONNX",
                 cache_value(a.build, "FPGUARD_LAZY_LIBS") not in ("OFF", "0", "FALSE", "NO")),
                ("libfpguard_mpi.so", "MPI", os.path.isfile(os.path.join(a.build,
                                                                         "libfpguard_mpi.so")))):
            if not built:
                continue
            modules = [os.path.relpath(os.path.join(d, f), prefix)
                       for d, _, fs in os.walk(prefix) for f in fs if f == module]
            check(len(modules) == 1 and
                  re.fullmatch(r"lib[^/]*(/[^/]+)?/fpguard/" + re.escape(module),
                               modules[0]) is not None,
                  f"cmake --install puts the {what} module in LIBDIR/fpguard", modules)
        # A model is read through the ONNX module (where built), found from PREFIX/bin.
        model = os.path.join(source, "examples", "clean_cnn", "model.onnx")
        r = subprocess.run([exe, "run", model], capture_output=True, text=True, timeout=120) \
            if os.path.isfile(exe) else r
        check(r.returncode == 0 and "load" in r.stdout,
              "the installed fpguard runs a model",
              (r.returncode, r.stdout[-500:], r.stderr[-500:]))
        if a.python.upper() in ("ON", "1", "TRUE", "YES"):
            check_python_install(prefix, tmp)
    print(f"make_test: {len(clitest.failures)} failed")
    sys.exit(1 if clitest.failures else 0)


if __name__ == "__main__":
    main()
