#!/usr/bin/python3
"""`fpguard check --html` and `fpguard plan --html` rendered in headless Chromium.

For each page: Chromium loads it (no network: the page must be self-contained), its DOM
dump is parsed and every section is looked for, the numbers it shows are compared with
the JSON of the same run (exact values in data-v, their text with the report layer's
number policy re-implemented here), the charts are counted against the JSON (one point
per floating node, one bar per exponent of each origin's histogram), and a screenshot is
taken (PNG, written to --screenshots for docs/report.md). A 1,000-node model's page stays
under 2 MB. Bad --html paths give one line and exit 2, and leave nothing.

    html_test.py --fpguard PATH --examples DIR [--screenshots DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, failures, num, run  # noqa: E402


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(html, *args):
    """Runs headless Chromium on a local file; returns its stdout."""
    exe = chromium()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-background-networking", "--user-data-dir=" +
           os.path.join(os.path.dirname(html), "chromium-profile"), *args,
           "file://" + os.path.abspath(html)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r


class Dom(HTMLParser):
    """Elements with their attributes, text and parents' classes/ids."""

    def __init__(self):
        super().__init__()
        self.stack = []
        self.elements = []  # (tag, attrs, ancestors, element index)
        self.text = {}      # element index -> text

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        idx = len(self.elements)
        self.elements.append((tag, a, [dict(x[1]) for x in self.stack]))
        self.text[idx] = ""
        if tag not in ("meta", "br", "img", "input", "link"):
            self.stack.append((idx, a))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), [dict(x[1]) for x in self.stack]))
        self.text[len(self.elements) - 1] = ""

    def handle_endtag(self, tag):
        for k in range(len(self.stack) - 1, -1, -1):
            if self.elements[self.stack[k][0]][0] == tag:
                del self.stack[k:]
                break

    def handle_data(self, data):
        for idx, _ in self.stack:
            self.text[idx] += data

    def find(self, tag=None, cls=None, id_=None, inside=None):
        out = []
        for i, (t, a, anc) in enumerate(self.elements):
            if tag and t != tag:
                continue
            if cls and cls not in a.get("class", "").split():
                continue
            if id_ and a.get("id") != id_:
                continue
            if inside and not any(x.get("id") == inside for x in anc):
                continue
            out.append(i)
        return out

    def attrs(self, i):
        return self.elements[i][1]


def render(f, tmp, name, args):
    html = os.path.join(tmp, name + ".html")
    js = os.path.join(tmp, name + ".json")
    r = run(f, *args, "--html", html, "--json" if args[0] == "check" else "-o", js, "--quiet")
    check(r.returncode in (0, 1), f"{name}: {args[0]} --html runs", r.stderr)
    if r.returncode not in (0, 1) or not os.path.exists(html):
        return None, None, None
    with open(js) as fh:
        j = json.load(fh)
    d = browse(html, "--dump-dom")
    check(d.returncode == 0 and "</html>" in d.stdout, f"{name}: Chromium loads the page",
          d.stderr[-300:])
    dom = Dom()
    dom.feed(d.stdout)
    return html, j, dom


def self_contained(name, html):
    with open(html) as fh:
        text = fh.read()
    for bad in ("<script", "<link", " src=", "@import", "url("):
        check(bad not in text, f"{name}: no {bad!r} (self-contained)")
    stripped = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    check("http://" not in stripped and "https://" not in stripped, f"{name}: no URL")


def screenshot(name, html, shots):
    png = os.path.join(os.path.dirname(html), name + ".png")
    r = browse(html, "--screenshot=" + png, "--window-size=1200,2400")
    ok = r.returncode == 0 and os.path.exists(png)
    check(ok, f"{name}: screenshot taken", r.stderr[-300:])
    if ok:
        with open(png, "rb") as fh:
            head = fh.read(8)
        check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 20000,
              f"{name}: the screenshot is a PNG with content", os.path.getsize(png))
        if shots:
            os.makedirs(shots, exist_ok=True)
            shutil.copy(png, os.path.join(shots, name + ".png"))


def values(dom, idxs):
    return [dom.attrs(i).get("data-v") for i in idxs]


def check_article(name, dom, j):
    """One precision's article: sections, numbers and charts against its JSON."""
    art = "check-" + j["precision"]
    check(dom.find("article", id_=art), f"{name}: article {art}")
    for cls in ("check-verdict", "origins", "headroom", "errors", "worst", "rules"):
        check(dom.find("section", cls=cls, inside=art), f"{name}/{art}: section {cls}")
    words = [dom.text[i] for i in dom.find("span", cls="verdict", inside=art)]
    check(words == [j["verdict"].upper()], f"{name}/{art}: verdict", words)
    # What the verdict holds under (generated inputs, absorbed origins), as in the JSON.
    quals = [dom.text[i] for i in dom.find("span", cls="qualifiers", inside=art)]
    check(len(quals) == int(bool(j["absorbed"] or j["generated_inputs"])),
          f"{name}/{art}: verdict qualifiers shown when they apply", quals)
    for n in j["absorbed"] + [g["name"] for g in j["generated_inputs"]]:
        check(any(n in q for q in quals), f"{name}/{art}: qualifier names {n}", quals)
    # The outputs table: each number shown with its exact value and the report policy's text.
    cells = dom.find("span", cls="n", inside=art)
    shown = [(dom.attrs(i)["data-v"], dom.text[i]) for i in cells]

    def printed(want, text):
        if want is None:  # no value: nothing finite in both runs
            return ("nan", "n/a") in shown
        return any(dv not in ("nan", "inf", "-inf") and float(dv) == want and t == text
                   for dv, t in shown)

    for o in j["outputs"]:
        for k in ("max_abs_error", "max_rel_error", "max_scaled_error", "rel_rms_error"):
            check(printed(o[k], num(o[k])),
                  f"{name}/{art}: {o['name']} {k} = {o[k]} printed as {num(o[k])}")
        c = o["cosine"]
        check(printed(c, f"{c:.6f}" if c is not None else "n/a"),
              f"{name}/{art}: {o['name']} cosine {c}")
    shown_values = {dv for dv, _ in shown}
    # Origins: one block each, with the counts of the JSON.
    blocks = dom.find("div", cls="origin", inside=art)
    check(len(blocks) == len(j["origins"]), f"{name}/{art}: one block per origin",
          (len(blocks), len(j["origins"])))
    for o in j["origins"]:
        want = {str(o["affected"]), str(o["total"])}
        check(want <= shown_values, f"{name}/{art}: origin {o['node']} counts shown", want)
        check(any(o["message"] in dom.text[b] for b in blocks),
              f"{name}/{art}: origin {o['node']} explained as in the JSON")
    # Headroom chart: one point per floating node with a non-zero reference.
    floating = [n for n in j["nodes"] if any(t["ref_absmax"] for t in n["outputs"])]
    charts = dom.find("svg", cls="headroom-chart", inside=art)
    if floating:
        check(len(charts) == 1, f"{name}/{art}: headroom chart")
        circles = [i for i in dom.find("circle", inside=art)
                   if any("headroom-chart" in a.get("class", "") for a in dom.elements[i][2])]
        check(len(circles) == len(floating), f"{name}/{art}: a point per floating node",
              (len(circles), len(floating)))
        red = sum(dom.attrs(i).get("fill") == "#c62828" for i in circles)
        node_origins = {o["node"] for o in j["origins"]} & {n["name"] for n in floating}
        check(red == len(node_origins), f"{name}/{art}: origins drawn red", (red, node_origins))
    # Each origin tensor's histogram: a bar per exponent, counts as in the JSON.
    tensors = {t["name"]: t for n in j["nodes"] for t in n["outputs"]}
    hist_svgs = dom.find("svg", cls="histogram", inside=art)
    want_hists = [tensors[t] for o in j["origins"] for t in o["outputs"] if t in tensors and
                  tensors[t]["exponent_histogram"]]
    check(len(hist_svgs) == len(want_hists), f"{name}/{art}: a histogram per origin tensor")
    titles = [dom.text[i] for i in dom.find("title", inside=art)]
    for t in want_hists:
        for e, c in t["exponent_histogram"].items():
            check(f"2^{e}: {c:,} values" in titles, f"{name}/{art}: bar 2^{e} of {t['name']}")
    # Worst nodes: ranked as docs/check.md says, from the JSON's numbers.
    rows = dom.find("table", cls="worst-table", inside=art)
    check(len(rows) == 1, f"{name}/{art}: worst-node table")
    cells = [dom.text[i] for i in in_table(dom, "td", "worst-table", art)]
    shown_order = cells[0::8]
    check(shown_order == worst_order(j)[:25], f"{name}/{art}: worst nodes ranked by damage",
          (shown_order, worst_order(j)[:25]))
    # Rules: one row per finding, worded as in the JSON, with its severity.
    rule_text = "".join(dom.text[i] for i in dom.find("table", cls="rules-table", inside=art))
    for r in j["rules"]:
        check(r["message"] in rule_text, f"{name}/{art}: rule {r['id']} at {r['node']}")
    minor = [i for i in in_table(dom, "tr", "rules-table", art)
             if "minor" in dom.attrs(i).get("class", "").split()]
    check(len(minor) == sum(r["severity"] == "minor" for r in j["rules"]),
          f"{name}/{art}: the minor findings marked", len(minor))
    # Two or more origins: one line fixes them all, with the union of their float32 sets.
    fix_all = [dom.text[i] for i in dom.find("p", cls="fix-all", inside=art)]
    check(len(fix_all) == (len(j["origins"]) >= 2), f"{name}/{art}: a fix-all line", fix_all)
    for o in j["origins"] if fix_all else []:
        check(all(n in fix_all[0] for n in o["keep_fp32"]), f"{name}/{art}: fix-all keeps "
              f"{o['node']}'s nodes", fix_all)


def in_table(dom, tag, table_class, art):
    """The `tag` elements of the table of class `table_class` in article `art`."""
    return [i for i in dom.find(tag, inside=art)
            if any(table_class in a.get("class", "").split() for a in dom.elements[i][2])]


def worst_order(j):
    """The worst-node ranking of docs/check.md from the JSON: emulated nodes with floating
    outputs, by damage (null: unbounded), then their local inf/NaN, local error (n/a
    lowest), propagated inf/NaN; stable in topological order."""
    inf = float("inf")

    def key(n):
        outs = n["outputs"]
        local = [inf if o["local"]["rel_rms_error"] is None else o["local"]["rel_rms_error"]
                 for o in outs if o["local"]["finite"] > 0]
        return (-(inf if n["damage"] is None else n["damage"]),
                -sum(o["local"]["overflow"] + o["local"]["nan"] for o in outs),
                -(max(local) if local else -1),
                -sum(o["overflow"] + o["nan"] for o in outs))

    nodes = [n for n in j["nodes"] if n["emulated"] and n["outputs"]]
    return [n["name"] for n in sorted(nodes, key=key)]


def test_check(f, ex, tmp, shots):
    for name, args in (
            ("superres", ["superres", "--precision", "float16,bfloat16"]),
            ("transformer_block", ["transformer_block", "--precision", "float16"]),
            ("clean_cnn", ["clean_cnn", "--precision", "float16"])):
        model = os.path.join(ex, args[0], "model.onnx")
        inputs = os.path.join(ex, args[0], "inputs")
        html, j, dom = render(f, tmp, "check_" + name,
                              ["check", model, "--inputs", inputs] + args[1:])
        if html is None:
            continue
        self_contained(name, html)
        checks = j["checks"] if "checks" in j else [j]
        for c in checks:
            check_article(name, dom, c)
        if len(checks) > 1:
            check(dom.find("table", id_="side-table"), f"{name}: side by side")
            rows = dom.find("tr", inside="side-by-side")
            check(len(rows) == len(checks) + 1, f"{name}: a row per precision")
        if name in ("superres", "transformer_block"):
            screenshot("check_" + name, html, shots)


def test_plan(f, ex, tmp, shots):
    model = os.path.join(ex, "transformer_block", "model.onnx")
    inputs = os.path.join(ex, "transformer_block", "inputs")
    html, p, dom = render(f, tmp, "plan_transformer_block",
                          ["plan", model, "--inputs", inputs, "--precision", "float16",
                           "--scale", "none"])
    if html is None:
        return
    self_contained("plan", html)
    for id_ in ("verdict", "scaled", "islands", "nodes", "final"):
        check(dom.find("section", id_=id_), f"plan: section {id_}")
    islands = dom.find("div", cls="origin", inside="islands")
    check(len(islands) == len(p["islands"]), "plan: one block per island",
          (len(islands), len(p["islands"])))
    text = "".join(dom.text[i] for i in islands)
    for isl in p["islands"]:
        check(isl["reason"] in text and all(n in text for n in isl["nodes"]),
              "plan: island nodes and reason", isl)
    rows = dom.find("tr", inside="nodes")
    kept = [dom.text[r] for r in rows if "float32" in dom.text[r]]
    for n in p["fp32_nodes"]:
        check(any(n in t for t in kept), f"plan: {n} listed as float32")
    check(dom.find("article", id_="final-check"), "plan: the final plan's check")
    screenshot("plan_transformer_block", html, shots)


def test_inspect(f, tmp, shots):
    """inspect --html: a summary row and a section per tensor, numbers as in --json."""
    import numpy as np
    rng = np.random.default_rng(7)
    files = []
    for name, data in (("acts", rng.normal(0, 30000, 4096).astype(np.float32)),
                       ("grads", (rng.normal(0, 1, 4096) * 1e-6).astype(np.float32))):
        path = os.path.join(tmp, name + ".npy")
        np.save(path, data)
        files.append(path)
    html = os.path.join(tmp, "inspect.html")
    formats = ["--formats", "float16,bfloat16,float8_e4m3fn,float8_e5m2,mxfp4_e2m1,nvfp4"]
    r = run(f, "inspect", *files, *formats, "--html", html)
    check(r.returncode == 0 and os.path.exists(html), "inspect --html", r.stderr)
    rj = run(f, "inspect", *files, *formats, "--json")
    if r.returncode != 0 or rj.returncode != 0:
        return
    j = json.loads(rj.stdout)
    self_contained("inspect", html)
    d = browse(html, "--dump-dom")
    dom = Dom()
    dom.feed(d.stdout)
    sections = dom.find("section", cls="tensor")
    check(len(sections) == len(j["tensors"]), "inspect: a section per tensor")
    for i, t in enumerate(j["tensors"]):
        sid = f"tensor-{i}"
        shown = {dom.attrs(k)["data-v"] for k in dom.find("span", cls="n", inside=sid)}
        check(str(t["count"]) in shown, f"inspect {t['name']}: count")
        check(any(x not in ("nan", "inf", "-inf") and float(x) == t["absmax"] for x in shown),
              f"inspect {t['name']}: absmax exact")
        rows = dom.find("tr", inside=sid)
        text = [dom.text[k] for k in rows]
        for fname, fs in t["formats"].items():
            check(any(fname in x and fs["verdict"] in x for x in text),
                  f"inspect {t['name']}: {fname} verdict {fs['verdict']}")
            check(str(fs["overflow"]) in shown, f"inspect {t['name']}: {fname} overflow count")
        for fname, fs in t["scaled_formats"].items():
            check(any(x.startswith(fname) and fs["verdict"] in x for x in text),
                  f"inspect {t['name']}: {fname} verdict {fs['verdict']}")
            check(str(fs["flushed"]) in shown and str(fs["blocks"]) in shown,
                  f"inspect {t['name']}: {fname} flushed values and blocks")
        bars = [dom.text[k] for k in dom.find("title", inside=sid) if " values" in dom.text[k]]
        check(len(bars) == len(t["exponent_histogram"]) * len(t["formats"]),
              f"inspect {t['name']}: a bar per exponent per format",
              (len(bars), len(t["exponent_histogram"]), len(t["formats"])))
    screenshot("inspect", html, shots)
    r = run(f, "inspect", files[0], "--html", files[0])
    check(r.returncode == 2 and "--html" in r.stderr, "inspect --html onto its input: exit 2",
          r.stderr)


def chain_model(path, n):
    """x -> (Mul, Add) x n/2: a 1,000-node page."""
    nodes, prev = [], "x"
    inits = [helper.make_tensor("c", TensorProto.FLOAT, [], [1.001])]
    for i in range(n):
        op = "Mul" if i % 2 == 0 else "Add"
        nodes.append(helper.make_node(op, [prev, "c"], [f"v{i}"], name=f"n{i}"))
        prev = f"v{i}"
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [64])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_reference_model(f, tmp, shots):
    """`check converted.onnx --reference-model original.onnx --html`: the against-original
    section counts the matched tensors and lists those outside the pass criterion in the
    JSON's topological order, with their cosine and relative RMS error. The converted model
    is the mimic converter's (reference_model_test.py)."""
    import numpy as np
    from reference_model_test import layernorm, mimic_convert
    orig, conv = os.path.join(tmp, "ln.onnx"), os.path.join(tmp, "ln_fp16.onnx")
    layernorm(orig)
    mimic_convert(orig, conv)
    d_in = os.path.join(tmp, "ln_in")
    os.makedirs(d_in)
    np.save(os.path.join(d_in, "x.npy"),
            np.array([[0, 300, -300, 10, 5, -5, 0, 1], [1, 2, 3, 4, 5, 6, 7, 8]], np.float32))
    html, j, dom = render(f, tmp, "check_reference_model",
                          ["check", conv, "--inputs", d_in, "--precision", "fp16",
                           "--reference-model", orig])
    if html is None:
        return
    self_contained("reference_model", html)
    check_article("reference_model", dom, j)
    art = "check-" + j["precision"]
    check(dom.find("section", cls="against-original", inside=art),
          "reference_model: section against-original")
    min_cos = j["tolerance"]["min_cosine"]
    matched, off = 0, []
    for n in j["nodes"]:
        for t in n["outputs"]:
            c = t.get("against_original")
            if not t.get("floating", True) or not c or not c["count"]:
                continue
            matched += 1
            cos = c["cosine"]
            if c["overflow"] + c["nan"] > 0 or cos is None or not cos >= min_cos:
                off.append((t["name"], t["original"], c))
    check(matched > 0 and off, "reference_model: the JSON has matched tensors, some outside",
          (matched, len(off)))
    sub = [dom.text[i] for i in dom.find("p", cls="sub", inside=art)]
    check(any(f"{matched - len(off)} of {matched} within" in s for s in sub),
          "reference_model: the count of matched tensors within the criterion", sub)
    rows = in_table(dom, "tr", "original-table", art)[1:]
    check(len(rows) == len(off), "reference_model: a row per tensor outside the criterion",
          (len(rows), [o[0] for o in off]))
    cells = in_table(dom, "td", "original-table", art)
    per_row = len(cells) // max(len(rows), 1)
    for k, (name, original, c) in enumerate(off[:len(rows)]):
        row = cells[k * per_row:(k + 1) * per_row]
        check([dom.text[i] for i in row[:2]] == [name, original],
              f"reference_model: row {k} is {name} (matched to {original})",
              [dom.text[i] for i in row[:2]])
        # A number cell holds one span with the exact value: the element right after it.
        for col, key in ((4, "cosine"), (5, "rel_rms_error")):
            shown, want = dom.attrs(row[col] + 1).get("data-v"), c[key]
            ok = dom.text[row[col] + 1] == "n/a" if want is None else (
                shown is not None and float(shown) == want)
            check(ok, f"reference_model: {name}'s {key}", (shown, want))
    if shots:
        screenshot("check_reference_model", html, shots)

def test_size(f, tmp):
    model = os.path.join(tmp, "chain.onnx")
    chain_model(model, 1000)
    html = os.path.join(tmp, "chain.html")
    r = run(f, "check", model, "--precision", "float16", "--html", html, "--quiet")
    check(r.returncode in (0, 1), "1,000 nodes: check --html", r.stderr)
    if os.path.exists(html):
        size = os.path.getsize(html)
        check(size < 2 * 1024 * 1024, "1,000 nodes: the page is under 2 MB", size)


def test_bad_paths(f, ex, tmp):
    model = os.path.join(ex, "clean_cnn", "model.onnx")
    inputs = os.path.join(ex, "clean_cnn", "inputs")
    copy = os.path.join(tmp, "copy.onnx")
    shutil.copy(model, copy)
    before = open(copy, "rb").read()
    os.makedirs(os.path.join(tmp, "adir"), exist_ok=True)
    for cmd in ("check", "plan"):
        for bad, what in ((copy, "the model itself"), (os.path.join(tmp, "adir"), "a directory"),
                          (os.path.join(tmp, "missing", "x.html"), "an unwritable path")):
            args = [cmd, copy, "--inputs", inputs, "--precision", "float16", "--html", bad,
                    "--quiet"]
            r = run(f, *args)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and len(lines) == 1 and "--html" in lines[0],
                  f"{cmd} --html {what}: one line naming --html, exit 2",
                  (r.returncode, r.stderr))
        check(open(copy, "rb").read() == before, f"{cmd}: the model is untouched")
    check(os.listdir(os.path.join(tmp, "adir")) == [], "nothing written into the directory")
    check(not os.path.exists(os.path.join(tmp, "missing")), "no directory created")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fpguard", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--screenshots", default="")
    a = ap.parse_args()
    if chromium() is None:
        print("FAIL: headless Chromium is not installed (scripts/setup installs `chromium`)")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        test_check(a.fpguard, a.examples, tmp, a.screenshots)
        test_plan(a.fpguard, a.examples, tmp, a.screenshots)
        test_reference_model(a.fpguard, tmp, a.screenshots)
        test_inspect(a.fpguard, tmp, a.screenshots)
        test_size(a.fpguard, tmp)
        test_bad_paths(a.fpguard, a.examples, tmp)
    print(f"html_test: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
