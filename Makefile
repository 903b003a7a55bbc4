# The book in two commands: `make book` and `make test` (see README.md).
#   make book [PROFILE=smoke|cpu|paper] [ONLY=<notebook stem>]   execute + site in _build/html
#   make test                                                    the whole test suite, then test-other-paths
#   make spread [PROFILE=smoke] [SEEDS=5] [ONLY=<stem>]           records over seeds -> book/thresholds
PROFILE ?= cpu
ONLY ?=
SEEDS ?= 5
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MATHJAX := node_modules/mathjax/es5/tex-mml-chtml.js

# Without MECHBOOK_TINYSTORIES the book downloads TinyStories once; beside this checkout there may
# be an offline sample, used when present and nothing else was chosen.
SAMPLE := $(abspath ../shared/data/tinystories/tinystories-sample.txt)
ifeq ($(origin MECHBOOK_TINYSTORIES),undefined)
ifneq ($(wildcard $(SAMPLE)),)
export MECHBOOK_TINYSTORIES := $(SAMPLE)
endif
endif
# Likewise the authors' released Assign-and-Add checkpoints (reference data, never committed): used
# from beside the checkout when present, else the loader downloads them at the pinned commit.
RELEASE := $(abspath ../shared/data/assign-and-add-release)
ifeq ($(origin MECHBOOK_AA_RELEASE),undefined)
ifneq ($(wildcard $(RELEASE)/checkpoints),)
export MECHBOOK_AA_RELEASE := $(RELEASE)
endif
endif

.PHONY: book test test-other-paths lint spread venv clean

venv: $(STAMP) $(MATHJAX)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# MathJax for the offline site, pinned by package-lock.json.
$(MATHJAX): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(MATHJAX)

book: venv
	$(PY) -m mechbook build --profile $(PROFILE) $(if $(ONLY),--only $(ONLY))

test: venv lint
	$(PY) -m pytest
	$(MAKE) --no-print-directory test-other-paths

# A second processor, simulated on this one: the unit and determinism tests again on other kernel
# paths (torch's scalar kernels, OpenBLAS's AVX ones, MKL's compatible mode), which round otherwise,
# so a test that passes only by one CPU's rounding fails on the developer's machine first.
OTHER_PATHS := ATEN_CPU_CAPABILITY=default OPENBLAS_CORETYPE=Sandybridge MKL_CBWR=COMPATIBLE
test-other-paths: venv
	$(OTHER_PATHS) $(PY) -m pytest -q tests/unit tests/integration/test_determinism.py

# Ruff (settings in pyproject.toml) over the package, the tests and the notebooks' code cells.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

spread: venv
	$(PY) -m mechbook spread --profile $(if $(filter file,$(origin PROFILE)),smoke,$(PROFILE)) --seeds $(SEEDS) $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf _build
