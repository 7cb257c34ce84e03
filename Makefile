# abd-joints: two set-up commands that work on a fresh clone (see README.md).
#   make demo   builds the bundled examples in Blender (bpy wheel), bakes them headless, writes build/demo/
#   make check  lint, and the solver's and the add-on's quick tests (under 3 minutes), while editing
#   make test   runs the solver and add-on test suites, the add-on's also on the oldest and newest
#               Blender the manifest admits (bpy wheels BPY_RANGE), the solver's also on NumPy 2,
#               and the farm jobs' tests (tests/farm)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
# The oldest and newest Blender the manifest admits (blender_version_min 4.2.0, max 5.1.0 exclusive):
# the add-on suite also runs on these bpy wheels, each in a venv of its own (requirements.txt with
# its bpy pin replaced).
BPY_RANGE := 4.2.23 5.0.1
# The solver without Blender on NumPy 2 (what `pip install` of the solver's wheel gives a render-farm
# node today, and what CuPy 14 needs): the solver suite again in .venv-numpy2, requirements.txt
# without bpy and with these pins in place of NumPy 1.26's.
NUMPY2_PINS := numpy==2.4.6 scipy==1.17.1

.PHONY: venv lint check test test-solver test-solver-numpy2 test-addon test-addon-range test-farm demo extension benchmark clean

venv: $(STAMP)

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

test: lint test-solver test-solver-numpy2 test-addon test-addon-range test-farm

# ruff (pycodestyle, Pyflakes, bugbear and docstring rules) on every Python file of the project,
# mypy on the solver; their settings are in pyproject.toml.
lint: venv
	$(PY) -m ruff check --no-cache .
	$(PY) -m mypy

# The add-on's quick tests: registration, the operators, the export and the bake (the batch, the
# examples, the install and the other Blender versions are left to `make test`).
ADDON_QUICK := tests/addon/test_registration.py tests/addon/test_operators.py tests/addon/test_export.py \
	tests/addon/test_bake.py

# Quick: the tests not marked slow (the warm-up's compilations, the wheel's build and install, the
# command line's subprocess runs and the scene fuzzing are left to `make test`).
check: lint venv
	timeout 900 $(PY) -m pytest tests/solver -m "not slow" -q -p no:cacheprovider
	timeout 900 $(PY) -m pytest $(ADDON_QUICK) -m "not slow" -q -p no:cacheprovider

test-solver: venv
	timeout 1500 $(PY) -m pytest tests/solver -q -p no:cacheprovider

test-solver-numpy2: .venv-numpy2/.requirements-installed
	timeout 1500 .venv-numpy2/bin/python -m pytest tests/solver -q -p no:cacheprovider

.venv-numpy2/.requirements-installed: requirements.txt
	$(PYTHON) -m venv .venv-numpy2
	sed -e '/^bpy==/d' $(foreach pin,$(NUMPY2_PINS),-e 's/^$(firstword $(subst ==, ,$(pin)))==.*/$(pin)/') \
		requirements.txt > .venv-numpy2/requirements.txt
	.venv-numpy2/bin/python -m pip install --quiet --disable-pip-version-check -r .venv-numpy2/requirements.txt
	touch $@

test-addon: venv
	timeout 1500 $(PY) -m pytest tests/addon -q -p no:cacheprovider

# The farm jobs (Dask, Open Job Description, Flamenco) once, in .venv: they run the batch bake
# in subprocesses, so the add-on's range of Blender versions adds nothing here.
test-farm: venv
	timeout 900 $(PY) -m pytest tests/farm -q -p no:cacheprovider

test-addon-range: $(foreach version,$(BPY_RANGE),.venv-bpy-$(version)/.requirements-installed)
	set -e; for version in $(BPY_RANGE); do \
		echo "add-on tests on bpy $$version"; \
		timeout 1500 .venv-bpy-$$version/bin/python -m pytest tests/addon -q -p no:cacheprovider; \
	done

.venv-bpy-%/.requirements-installed: requirements.txt
	$(PYTHON) -m venv .venv-bpy-$*
	sed 's/^bpy==.*/bpy==$*/' requirements.txt > .venv-bpy-$*/requirements.txt
	.venv-bpy-$*/bin/python -m pip install --quiet --disable-pip-version-check -r .venv-bpy-$*/requirements.txt
	touch $@

demo: venv
	timeout 1800 $(PY) tools/demo.py --out build/demo

extension: venv
	timeout 900 $(PY) tools/build_extension.py

benchmark: venv
	$(PY) benchmarks/chains.py

clean:
	rm -rf build dist wheels
