"""What the benchmark scripts share: a worker subprocess's result, Markdown tables, and the
generated block of a docs page that ``--update-docs`` rewrites."""

from __future__ import annotations

import json
import subprocess


def worker_result(command: list[str], mark: str, timeout: int) -> dict:
    """Run ``command`` (a script's own worker, such as Blender's rigid-body world in the ``bpy``
    wheel, which can deadlock at exit and so leaves by ``os._exit``) under ``timeout`` s, killed
    10 s after that, and return the JSON object printed after ``mark`` on its last line starting
    with it.

    Raises:
        RuntimeError: the worker timed out, exited non-zero, or printed no result; the message
            holds the last line of its standard error.
    """
    done = subprocess.run(["timeout", "--kill-after=10", str(timeout)] + command, capture_output=True, text=True,
                          timeout=timeout + 60)
    lines = [line for line in done.stdout.splitlines() if line.startswith(mark)]
    if done.returncode == 124:
        raise RuntimeError(f"the worker timed out after {timeout} s")
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the worker exited {done.returncode}: {tail}")
    return json.loads(lines[-1][len(mark):])


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of ``rows`` (cells as text, ``|`` escaped) under ``columns``."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                              for row in rows]) + "\n"


def docs_markers(script: str) -> tuple[str, str]:
    """The comments around the generated block of ``benchmarks/<script>`` in a docs page."""
    return (f"<!-- benchmarks/{script} --update-docs: begin (generated, do not edit) -->",
            f"<!-- benchmarks/{script} --update-docs: end -->")


def with_docs_block(page: str, block: str, script: str) -> str:
    """``page`` with the text between ``script``'s :func:`docs_markers` replaced by ``block``, or
    with a "Latest `<script>` run" section holding it appended where the markers are absent.

    Raises:
        ValueError: when only one marker is there, or the end comes first.
    """
    begin_mark, end_mark = docs_markers(script)
    begin, end = page.find(begin_mark), page.find(end_mark)
    if begin < 0 and end < 0:
        return page.rstrip("\n") + f"\n\n## Latest `{script}` run\n" + begin_mark + "\n" + block + end_mark + "\n"
    if begin < 0 or end < begin:
        raise ValueError(f"the page's {script} markers are incomplete or out of order")
    return page[: begin + len(begin_mark)] + "\n" + block + page[end:]
