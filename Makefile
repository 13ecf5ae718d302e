# The two commands a new user needs: `make run` and `make test`. Both create .venv on first use:
# `make run` installs the runtime dependencies only; `make test` and `make lint` add the dev extra
# (pytest, playwright, ruff, mypy, the providers' clients) to the same .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# One stamp per set of dependencies installed into .venv, each remade when pyproject.toml changes.
RUNTIME_STAMP := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.installed-stamp
DOCS_STAMP := $(VENV)/.docs-stamp

.PHONY: run test test-fast lint format migrate clean docs docs-serve reference chaos

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "autoprovision needs Python 3.11 or newer" or 0)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME_STAMP)

# Everything: the runtime dependencies and the dev extra.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(RUNTIME_STAMP) $(STAMP)

run: $(RUNTIME_STAMP)  ## serve the API (SQLite file ./autoprovision.db unless configured otherwise)
	$(BIN)/autoprovision serve

# Tests run on every core (pytest-xdist; `auto` is a worker more than the cores, as
# tests/workers.py says why); each worker makes its own template databases, and workers take
# the next test as they finish (worksteal: the slow ones are uneven).
XDIST := -n auto --dist worksteal

test: $(STAMP)  ## the whole test suite (PostgreSQL too when AUTOPROVISION_TEST_DATABASE_URL is set)
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)  ## all but the slow tests (browser, processes, real clock): the loop while coding
	$(BIN)/pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

# The chaos run (bench/chaos.py): minutes of faults, kills and orders with the money invariants
# checked throughout; a broken one fails it. SQLite with a fixed seed and PostgreSQL with a
# random one (printed, to replay) run at once, each on its own ports and database; their reports
# follow each other when both have ended, a failed one last. Loopback only; each stops by itself.
CHAOS_MINUTES ?= 3
CHAOS_POSTGRES_URL ?= postgresql+asyncpg://postgres@127.0.0.1:5432/test
CHAOS_LOGS := test-artifacts/chaos

chaos: $(STAMP)  ## chaos for CHAOS_MINUTES (3) on SQLite (seed 1) and on PostgreSQL (random seed), at once
	@mkdir -p $(CHAOS_LOGS)
	@$(BIN)/python bench/chaos.py --minutes $(CHAOS_MINUTES) --database sqlite --seed 1 \
		> $(CHAOS_LOGS)/sqlite.log 2>&1 & lite=$$!; \
	$(BIN)/python bench/chaos.py --minutes $(CHAOS_MINUTES) --database postgres \
		--postgres-url "$(CHAOS_POSTGRES_URL)" > $(CHAOS_LOGS)/postgres.log 2>&1; pg=$$?; \
	wait $$lite; lite=$$?; \
	if [ $$lite -ne 0 ]; then first=postgres; last=sqlite; else first=sqlite; last=postgres; fi; \
	for db in $$first $$last; do echo "== chaos on $$db ($(CHAOS_LOGS)/$$db.log)"; \
		cat $(CHAOS_LOGS)/$$db.log; done; \
	[ $$lite -eq 0 ] && [ $$pg -eq 0 ]

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check app migrations tests bench scripts
	$(BIN)/ruff format --check app migrations tests bench scripts
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix app migrations tests bench scripts
	$(BIN)/ruff format app migrations tests bench scripts

# The documentation site (docs/, mkdocs.yml). Its tools are the optional extra `.[docs]`, in
# this venv only when a docs target runs, so `make run` installs no more than before.
$(DOCS_STAMP): $(RUNTIME_STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)  ## build the site into site/; a broken link or a stale reference page fails it
	$(BIN)/mkdocs build --strict

DOCS_PORT ?= 8008
docs-serve: $(DOCS_STAMP)  ## serve the site on http://127.0.0.1:$(DOCS_PORT) (DOCS_PORT=...), rebuilt as pages change
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

reference: $(STAMP)  ## regenerate docs/reference/ and .env.example from the code (settings, CLI, API...)
	$(BIN)/python scripts/gen_reference.py

migrate: $(RUNTIME_STAMP)
	$(BIN)/autoprovision migrate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info site
