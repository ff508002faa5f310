# logtrove — the two commands: `make run` and `make test`.
# Every target that needs the environment depends on `install`, which is idempotent:
# it (re)builds .venv only when pyproject.toml changed since the last install.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DATA   ?= ./data
LISTEN ?= 127.0.0.1:9092
# pytest-xdist workers of the test targets, with --dist loadgroup (the tests of one
# xdist_group, those using the Spark session or Apache Kafka, see tests/conftest.py, share
# a worker; the others are handed out one by one). Three on the project's two cores: most
# of a test's time is spent waiting on brokers, clients and JVMs (one process at a time
# used 42 % of one core), so a third worker fills the waits. `make test TEST_WORKERS=0`
# runs it in one process.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: install kafka-deps run test test-fast test-slow lint typecheck bench bench-quick clean

install: $(STAMP)

$(STAMP): pyproject.toml setup.py src/logtrove/storage/derived/_indexcore.c src/logtrove/storage/derived/_keyindex.c src/logtrove/records/_walk.c src/logtrove/storage/cleaner/_passes.c src/logtrove/records/_columnar.c src/logtrove/records/_encoder.c src/logtrove/records/varint.h scripts/install-system-deps.sh
	@bash scripts/install-system-deps.sh
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	@$(BIN)/python -c "from logtrove.storage.derived.blockentries import IMPLEMENTATION as I; print('indexer loop:', I)"
	@$(BIN)/python -c "from logtrove.records.columnar import IMPLEMENTATION as I; print('columnar decoder:', I)"
	@touch $(STAMP)

# Apache Kafka's jars for the differential tests (scripts/kafka.sh: Maven, pinned version,
# cached outside the repository, a no-op once fetched). Only the tests need them.
kafka-deps:
	@bash scripts/kafka.sh

run: install
	$(BIN)/logtrove serve --data $(DATA) --listen $(LISTEN)

test: install kafka-deps lint typecheck
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: install kafka-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow"

test-slow: install kafka-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m slow

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/run_all.py

bench-quick: install
	BENCH_QUICK=1 $(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info src/logtrove/storage/derived/_indexcore*.so src/logtrove/records/_walk*.so src/logtrove/storage/cleaner/_passes*.so src/logtrove/records/_columnar*.so src/logtrove/records/_encoder*.so .mypy_cache .ruff_cache .pytest_cache
