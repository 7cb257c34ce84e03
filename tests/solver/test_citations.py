"""Every file the project cites is one a reader who clones it can open: a file of the repository,
or a web address (libuipc's specification pages at a pinned commit, papers).

Read: the Markdown pages, and the docstrings and comments of the Python files. Cited: paths under
the repository's top-level folders (``docs/constitutions/25_fixed_joint.md``), Markdown link
targets, bare page names (``670_revolute_joint_limit.md``) and the names of other code bases'
source files (``.cu``, ``.cpp``, ``.h``, ``.txt``); web addresses are taken out first.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {".git", "build", "dist", "wheels", "node_modules", "__pycache__"}
TOP_FOLDERS = ("docs", "solver", "abd_addon", "tests", "benchmarks", "tools", "examples", "farm")
WEB = re.compile(r"(?:https?|mailto|file):[^\s)>\]`'\"]+")
#: A file name of the kind copied from elsewhere without its source: 3 digits, a 16-digit hash.
UNPUBLISHED = re.compile(r"\b\d{3}_[0-9a-f]{16}\b")
REPOSITORY_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w/?)" % "|".join(TOP_FOLDERS))
#: A Markdown link to a web address, its text included (which may name the page).
WEB_LINK = re.compile(r"\[[^\]]*\]\((?:https?|mailto):[^)\s]+\)")
#: The kinds of file a citation names (the others under a top folder are a user's files in examples).
CITED_SUFFIXES = (".md", ".py", ".toml", ".js", ".yaml", ".yml", ".txt", ".cfg", ".sh")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE_NAME = re.compile(r"(?<![\w./-])([\w-]+\.(?:md|cu|cuh|cpp|hpp|h|inl|txt))(?![\w/])")


def text_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(part in SKIPPED or part.startswith(".venv") for part in parts) or not path.is_file():
            continue
        if path.suffix in (".md", ".py"):
            files.append(path)
    return sorted(files)


def prose(path: Path) -> str:
    """A Markdown page whole; a Python file's comments and triple-quoted strings (its docstrings)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return text
    pieces = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.string.lstrip("rRbBuU")
                                              .startswith(('"""', "'''"))):
            pieces.append(token.string)
    return "\n".join(pieces)


def repository_names() -> set[str]:
    return {path.name for path in ROOT.rglob("*") if ".git" not in path.parts}


def unresolved_citations(path: Path, names: set[str]) -> list[str]:
    """The citations in ``path`` of files that are neither in the repository nor on the web."""
    text = prose(path)
    problems = [f"unpublished file {match.group(0)}" for match in UNPUBLISHED.finditer(text)]
    if path.suffix == ".md":
        for match in MARKDOWN_LINK.finditer(text):
            target = match.group(1).split("#")[0]
            if target and not WEB.match(target) and not (path.parent / target).exists():
                problems.append(f"link to {target}")
    text = WEB.sub(" ", WEB_LINK.sub(" ", text))
    for match in REPOSITORY_PATH.finditer(text):
        cited = match.group(1).rstrip(".")
        if not (cited.endswith("/") or Path(cited).suffix in CITED_SUFFIXES) or Path(cited).stem.isupper():
            continue  # a user's file in an example, or a placeholder (examples/NAME.py)
        if not (ROOT / cited).exists():
            problems.append(f"path {cited}")
    for match in BARE_NAME.finditer(text):
        if match.group(1) not in names:
            problems.append(f"file {match.group(1)}")
    return problems


@pytest.mark.parametrize("path", text_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_cited_file_is_in_the_repository_or_on_the_web(path):
    assert unresolved_citations(path, repository_names()) == []


def test_the_check_finds_each_kind_of_dangling_citation(tmp_path):
    """A page citing an unpublished file, a missing repository path, a missing link target and a
    foreign source file by name is caught (the unpublished file and the link target twice: as such
    and by name); the same names in web addresses pass."""
    page = tmp_path / "page.md"
    page.write_text("Source: `123_0123456789abcdef.txt`; docs/constitutions/99_missing.md; [a](nowhere.md);\n"
                    "libuipc's `affine_body_fixed_joint.cu`.\n"
                    "See https://github.com/spiriMirror/libuipc/blob/619a5412/src/affine_body_fixed_joint.cu and\n"
                    "[the page](https://example.org/docs/constitutions/99_missing.md).\n", encoding="utf-8")
    problems = unresolved_citations(page, repository_names())
    assert problems == ["unpublished file 123_0123456789abcdef", "link to nowhere.md",
                        "path docs/constitutions/99_missing.md", "file 123_0123456789abcdef.txt", "file nowhere.md",
                        "file affine_body_fixed_joint.cu"]
