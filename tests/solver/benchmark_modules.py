"""The scripts under ``benchmarks/`` loaded as modules, for the tests of what they compute
(``benchmarks`` is no package: each script is run by path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``<name>_benchmark``, registered in ``sys.modules``
    (its dataclasses look their module up there); loaded once per test session.

    Raises:
        FileNotFoundError: no such script.
    """
    module_name = f"{name}_benchmark"
    if module_name in sys.modules:
        return sys.modules[module_name]
    if str(BENCHMARKS) not in sys.path:  # the scripts import their shared module, as when run by path
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
