# The book in two commands: `make book` and `make test` (see README.md).
#   make book [PROFILE=smoke|cpu|paper] [ONLY=<notebook stem>]   execute + site in _build/html
#   make test                                                    the whole test suite, then test-other-paths
#   make spread [PROFILE=smoke] [SEEDS=5] [ONLY=<stem>]           records over seeds -> book/thresholds
#   make pdf                                                     the built site as one PDF
#   make lock                                                    requirements.txt -> requirements.lock
PROFILE ?= cpu
ONLY ?=
SEEDS ?= 5
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOCK := requirements.lock
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

.PHONY: book pdf test test-other-paths lint spread venv lock clean

venv: $(STAMP) $(MATHJAX)

# On the platform the lock was resolved for (its second line), every package at the version the
# lock names and nothing it does not name (--no-deps; pip check then fails if the lock misses a
# dependency). Elsewhere (another OS, CPU architecture or Python) the lock's wheels may not exist:
# the direct pins of requirements.txt, resolved there, with a line that says so.
PLATFORM_OF = import platform, sys; print(f"\# platform: {platform.system()}-{platform.machine()} CPython {sys.version_info[0]}.{sys.version_info[1]}")
$(STAMP): $(LOCK) requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	if [ "$$($(PY) -c '$(PLATFORM_OF)')" = "$$(sed -n 2p $(LOCK))" ]; then \
	  $(PY) -m pip install -q --no-deps -r $(LOCK) && $(PY) -m pip check; \
	else \
	  echo "$(LOCK) was resolved for another platform ($$(sed -n 2p $(LOCK) | cut -c13-)): installing requirements.txt's pins"; \
	  $(PY) -m pip install -q -r requirements.txt; \
	fi
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# MathJax for the offline site, pinned by package-lock.json.
$(MATHJAX): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $(MATHJAX)

book: venv
	$(PY) -m mechbook build --profile $(PROFILE) $(if $(ONLY),--only $(ONLY))

# The site of the last `make book` printed by headless Chromium into _build/html/_downloads/mechbook.pdf.
pdf: venv
	$(PY) -m mechbook pdf

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

# The lock: requirements.txt's pins and everything they pull in, resolved afresh in a scratch
# environment and frozen with exact versions (pip, setuptools and wheel included).
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q -r requirements.txt
	{ echo "# Every Python package of the environment, exact: written by \`make lock\` from requirements.txt"; \
	  $(LOCK_VENV)/bin/python -c '$(PLATFORM_OF)'; \
	  echo "# (edit requirements.txt, never this file); \`make venv\` installs exactly these on that platform."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

clean:
	rm -rf _build
