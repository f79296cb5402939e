"""The Python examples of docs/python.md run as written."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_the_python_page_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert blocks, f"no python example in {DOC}"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
