"""The solver's two kinds of compiled (Numba) functions, and the options each is compiled with.

- :data:`kernel` compiles a function that Python calls: a term's energy, gradient and Hessian
  loops, the assembly's scatters, the banded matrix's layout, the stepper's motion.
- :data:`helper` compiles a function that only compiled functions call: the per-element
  formulas (F-space energies and derivatives, PSD projections, the limit penalty) and the small
  vector routines the kernels share.

Both are cached on disk (``cache=True``, in the folder :func:`solver.numba_cache.choose_folder`
chooses), and neither is given the C callback wrapper (``no_cfunc_wrapper``), which serves only a
function's raw address (``.address``, ``.ctypes``) and which nothing here uses. A helper is not
given the CPython wrapper either (``no_cpython_wrapper``, the option Numba's maintainers name for
functions called only from other jitted functions, numba/numba#2078): Numba builds and optimises
both wrappers at every function's first compilation, whether Python calls it or not, and the
solver has more helpers than kernels (docs/performance.md, "First compilation and warm-up").

A helper must not be called from Python: it has no entry point there, and the call would jump to
a null address and end the process. ``tests/solver/test_jit.py`` checks statically that no
Python code in the project refers to one (tests call a helper through a small kernel of their
own).
"""

from __future__ import annotations

import numba

from . import numba_cache

# Numba picks a cached function's folder when the decorator is applied: the folder first.
numba_cache.configure()

#: Decorator for a compiled function that Python calls.
# (Numba's type stubs do not list the wrapper options, hence the type: ignore comments.)
kernel = numba.njit(cache=True, no_cfunc_wrapper=True)  # type: ignore[call-overload]

#: Decorator for a compiled function that only other compiled functions call (never Python).
helper = numba.njit(cache=True, no_cfunc_wrapper=True, no_cpython_wrapper=True)  # type: ignore[call-overload]
