# The single entry point for people and CI. `make test` and `make demo` (the
# README's two commands) set up whatever is missing first:
#   * a venv in .venv with requirements-dev.txt (and python_client, once it
#     has a pyproject.toml), rebuilt when either file changes;
#   * a server: RUNQ_DATABASE_URL if set, else the PG* variables' server if
#     PGHOST is set, else the throwaway cluster under .pg/ (scripts/pg), which
#     is started on demand and LEFT RUNNING so the next command reuses it;
#     `make pg-stop` stops it and deletes its data.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
SERVER = RUNQ_DATABASE_URL="$$(scripts/pg server)"

.PHONY: test demo bench bench-full bench-cpu bench-instructions sql docs schema pg-start pg-stop

test: $(STAMP)
	$(SERVER) tests/run

demo: $(STAMP)
	$(SERVER) scripts/demo

# Benchmarks against the ceiling and a minimal queue, in one run on one server
# (bench/run.py): a quick pass, and the sizes of the README's table.
bench: $(STAMP)
	$(SERVER) $(VENV)/bin/python bench/run.py --out bench/results/quick.md

bench-full: $(STAMP)
	$(SERVER) $(VENV)/bin/python bench/run.py --full --out bench/results/full.md

# Backend CPU per cycle (bench/cpu.py), to judge a hot-path change against a
# commit: make bench-cpu REV=8ce5eac
bench-cpu: $(STAMP)
	$(SERVER) $(VENV)/bin/python bench/cpu.py --cycles 8000 --reps 9 $(if $(REV),--rev $(REV))

# Instructions per cycle (bench/instructions.py, callgrind): the same count
# however loaded the machine is: make bench-instructions REV=832e655
bench-instructions: $(STAMP)
	$(VENV)/bin/python bench/instructions.py --kinds $(if $(REV),--rev $(REV))

# Generated files: committed, and tests fail when they are stale.
sql:
	scripts/gen-sql

docs: sql $(STAMP)
	$(SERVER) $(VENV)/bin/python scripts/gen-api-doc

# sql/schema.sql: the schema as the whole plan leaves it, for reading.
schema:
	$(SERVER) scripts/gen-schema

pg-start:
	@scripts/pg start

pg-stop:
	scripts/pg stop

$(STAMP): requirements-dev.txt $(wildcard python_client/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r requirements-dev.txt
	if [ -f python_client/pyproject.toml ]; then \
	    $(VENV)/bin/pip install --disable-pip-version-check -q -e 'python_client[dev]'; fi
	touch $@
