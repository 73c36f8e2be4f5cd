#!/usr/bin/python3
"""Every console example of README.md and docs/*.md, run: the text cannot drift from
what fpguard prints.

A ```console block holds commands (`$ fpguard ...`, continued by a trailing backslash)
each followed by the output it shows. Each command runs in bash from a scratch directory,
one a page, that links the repository's top-level entries (so `examples/...` resolves, the
commands of a page share what they write, and nothing is written into the tree), with `fpguard` the binary under test and stderr
joined to stdout. Then:

- every shown output line must match the next printed line, whitespace at the ends
  ignored; a shown line ending in " ..." matches any printed line that starts with the
  text before it; a line "..." alone skips any number of printed lines (up to the next
  shown line, or to the end);
- a command with no output shown must still succeed: exit 0, or 1 (a completed check
  that found trouble); an example showing an error line ("fpguard: error: ...") may exit 2.

Every relative link of these pages must name a file of the repository (a clone has
nothing outside it).

Blocks fenced as ```sh are sketches (placeholders such as model.onnx) and are not run.

    docs_test.py --fpguard PATH --source DIR
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile


def examples(path):
    """(line number, command, [shown output lines]) of every console block of `path`."""
    out, block, cmd, shown, start = [], False, None, [], 0
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not block:
            block = line.strip() == "```console"
            i += 1
            continue
        if line.strip() == "```" or line.startswith("$ "):
            if cmd is not None:
                out.append((start, cmd, shown))
            cmd, shown = None, []
            if line.strip() == "```":
                block = False
                i += 1
                continue
            start, cmd = i + 1, line[2:]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
        else:
            shown.append(line)
        i += 1
    return out


def matches(shown, printed):
    """None when `printed` (lines) is what `shown` shows, else the first mismatch."""
    s = [x.rstrip() for x in shown]
    p = [x.rstrip() for x in printed]

    def line_ok(want, got):
        if want.endswith(" ..."):
            return got.strip().startswith(want[:-4].strip())
        return want.strip() == got.strip()

    def walk(i, j):
        if i == len(s):
            return None if j == len(p) else f"printed more than shown, from {p[j]!r}"
        if s[i].strip() == "...":
            if i + 1 == len(s):
                return None
            for k in range(j, len(p)):
                if line_ok(s[i + 1], p[k]) and walk(i + 1, k) is None:
                    return None
            return f"no printed line matches {s[i + 1]!r} after the skip"
        if j == len(p):
            return f"printed nothing for {s[i]!r}"
        if not line_ok(s[i], p[j]):
            return f"shown {s[i]!r}, printed {p[j]!r}"
        return walk(i + 1, j + 1)

    return walk(0, 0)


def broken_links(page, source):
    """The relative links of `page` that leave the repository or name no file."""
    bad = []
    text = open(page, encoding="utf-8").read()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target.split("#")[0]))
        if os.path.relpath(path, source).startswith("..") or not os.path.exists(path):
            bad.append(target)
    for target in re.findall(r"`(\.\./[^`]+)`", text):
        bad.append(target)  # a path outside the clone, quoted as code
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    binary = os.path.abspath(a.fpguard)
    pages = [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "*.md")))
    failures, count = [], 0
    bindir = tempfile.mkdtemp(prefix="fpguard-docs-bin-")
    os.symlink(binary, os.path.join(bindir, "fpguard"))
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
               NO_COLOR="1", COLUMNS="100")
    for page in pages:
        rel = os.path.relpath(page, source)
        for target in broken_links(page, source):
            failures.append(f"{rel}: the link {target!r} leaves the repository or names no file")
        # One scratch directory a page: its commands run in order and share what they
        # write (a plan.json that convert reads).
        with tempfile.TemporaryDirectory(prefix="fpguard-docs-") as tmp:
            for entry in os.listdir(source):
                if not entry.startswith("."):
                    os.symlink(os.path.join(source, entry), os.path.join(tmp, entry))
            for line, cmd, shown in examples(page):
                count += 1
                r = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, capture_output=True,
                                   text=True, timeout=600, stdin=subprocess.DEVNULL)
                printed = (r.stdout + r.stderr).splitlines()
                error_shown = any("fpguard: error:" in x for x in shown)
                allowed = {0, 1} | ({2} if error_shown else set())
                where = f"{rel}:{line}: $ {cmd}"
                if r.returncode not in allowed:
                    failures.append(f"{where}\n  exit {r.returncode}: "
                                    f"{(r.stdout + r.stderr)[-400:]}")
                    continue
                if shown:
                    why = matches(shown, printed)
                    if why:
                        failures.append(f"{where}\n  {why}")
    for f in failures:
        print("FAIL " + f)
    print(f"docs_test: {count} console examples, {len(failures)} failed")
    sys.exit(1 if failures or count == 0 else 0)


if __name__ == "__main__":
    main()
