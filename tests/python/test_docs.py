"""The `>>>` examples of docs/python.md, run as doctests, one session for the page: the
page cannot drift from what the module does."""
import doctest
import os
import re

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "python.md")


def test_python_md_examples(monkeypatch):
    # The page's model examples run from the repository root, as its readers do.
    monkeypatch.chdir(os.path.join(os.path.dirname(DOC), ".."))
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
    test = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, "python.md", DOC, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    r = runner.summarize(verbose=False)
    assert r.attempted >= 10 and r.failed == 0, r
