# abd-joints: two set-up commands that work on a fresh clone (see README.md).
#   make demo   builds the bundled examples in Blender (bpy wheel), bakes them headless, writes build/demo/
#   make test   runs the solver and add-on test suites
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed

.PHONY: venv test test-solver test-addon demo extension benchmark clean

venv: $(STAMP)

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

test: test-solver test-addon

test-solver: venv
	timeout 1500 $(PY) -m pytest tests/solver -q -p no:cacheprovider

test-addon: venv
	timeout 1500 $(PY) -m pytest tests/addon -q -p no:cacheprovider

demo: venv
	timeout 1800 $(PY) tools/demo.py --out build/demo

extension: venv
	timeout 900 $(PY) tools/build_extension.py

benchmark: venv
	$(PY) benchmarks/chains.py

clean:
	rm -rf build dist wheels
