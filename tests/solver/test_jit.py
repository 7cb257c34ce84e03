"""The solver's compiled functions are declared as the kind their callers need (solver/jit.py).

A :data:`solver.jit.helper` has no CPython entry point: called from Python it would jump to a
null address and end the process. These tests read the project's sources (no import, nothing
compiled) and check that no Python code refers to a helper, only compiled functions do, and that
every kernel is one that the solver's Python code calls.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Where Python code that could call a solver function lives.
SOURCE_FOLDERS = ("solver", "abd_addon", "tests", "benchmarks", "examples", "tools")
#: Decorators that compile a function (its body is compiled code, which may call helpers).
COMPILING_DECORATORS = {"helper", "kernel", "njit", "numba.njit", "jit", "numba.jit"}


def decorator_name(decorator: ast.expr) -> str:
    """``helper`` for ``@helper``, ``numba.njit`` for ``@numba.njit(...)``."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    return ast.unparse(decorator)


def compiled_functions(tree: ast.Module) -> dict[str, tuple[str, ast.FunctionDef]]:
    """The module's compiled functions: name -> (decorator name, definition)."""
    functions = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if decorator_name(decorator) in COMPILING_DECORATORS:
                    functions[node.name] = (decorator_name(decorator), node)
    return functions


def python_references(tree: ast.Module) -> dict[str, int]:
    """Names the module's Python code (outside compiled functions) reads, as variables or
    attributes: name -> first line."""
    inside = {id(child) for _, node in compiled_functions(tree).values() for child in ast.walk(node)}
    names = {}
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.Name):
            names.setdefault(node.id, node.lineno)
        elif isinstance(node, ast.Attribute):
            names.setdefault(node.attr, node.lineno)
    return names


def sources(folders=SOURCE_FOLDERS) -> dict[str, ast.Module]:
    """The parsed Python files under ``folders`` of the repository: relative path -> module."""
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
    }


def misused_helpers(helpers: set[str], modules: dict[str, ast.Module]) -> list[str]:
    """``path:line name`` for each Python-code reference to a helper's name in ``modules``."""
    return [
        f"{path}:{line} {name}"
        for path, tree in modules.items()
        for name, line in python_references(tree).items()
        if name in helpers
    ]


def solver_functions(modules: dict[str, ast.Module]) -> dict[str, str]:
    """The compiled functions of ``modules`` (the solver's): name -> its decorator (``kernel``, ``helper``...)."""
    functions = {}
    for tree in modules.values():
        functions.update({name: kind for name, (kind, _) in compiled_functions(tree).items()})
    return functions


def test_the_solver_compiles_only_through_solver_jit():
    functions = solver_functions(sources(("solver",)))
    assert set(functions.values()) == {"helper", "kernel"}, functions
    assert sum(kind == "helper" for kind in functions.values()) >= 30  # the checks below see them


def test_no_python_code_calls_a_helper():
    modules = sources()
    solver = {path: tree for path, tree in modules.items() if path.startswith("solver/")}
    helpers = {name for name, kind in solver_functions(solver).items() if kind == "helper"}
    assert misused_helpers(helpers, modules) == []


def test_every_kernel_is_called_from_the_solvers_python_code():
    """A kernel that only compiled code calls should be a helper (its CPython wrapper is compiled for nothing)."""
    modules = sources(("solver",))
    kernels = {name for name, kind in solver_functions(modules).items() if kind == "kernel"}
    called = set()
    for tree in modules.values():
        called |= set(python_references(tree))
    assert sorted(kernels - called) == []


@pytest.mark.parametrize("snippet, expected", [
    ("from solver.constitutions.joint_limit_penalty import penalty\nenergy = penalty(1.0, 0.0, 0.5, 2.0)\n",
     ["snippet.py:2 penalty"]),
    ("from solver.constitutions import joint_limit_penalty\nsee = joint_limit_penalty.penalty\n",
     ["snippet.py:2 penalty"]),
    ("import numba\nfrom solver.constitutions.joint_limit_penalty import penalty\n\n"
     "@numba.njit\ndef energy(x):\n    return penalty(x, 0.0, 0.5, 2.0)[0]\n", []),
])
def test_the_check_finds_python_calls_of_a_helper(snippet, expected):
    assert misused_helpers({"penalty"}, {"snippet.py": ast.parse(snippet)}) == expected
