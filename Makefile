# The book in two commands: `make book` and `make test` (see README.md).
PROFILE ?= cpu
ONLY ?=
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: book test venv clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

book: venv
	$(PY) -m mechbook build --profile $(PROFILE) $(if $(ONLY),--only $(ONLY))

test: venv
	$(PY) -m pytest

clean:
	rm -rf _build
