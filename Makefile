# alkstore — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck imports docs unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

CHROMIUM := /usr/bin/chromium

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The browser tests drive Debian's Chromium (Playwright cannot download one here).
$(CHROMIUM):
	apt-get install -y --no-install-recommends chromium || \
		(apt-get update && apt-get install -y --no-install-recommends chromium)

demo: $(STAMP)
	$(BIN)/alkstore demo

lint: $(STAMP)
	$(BIN)/ruff check alkstore tests bench
	$(BIN)/ruff format --check alkstore tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# The guide as a site (docs/ → site/); --strict fails on a broken link or a page left out.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck imports docs $(CHROMIUM)
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run.py
	$(BIN)/python bench/features.py
	$(BIN)/python bench/worker_throughput.py --pg $${ALKSTORE_BENCH_PG_URL:-postgresql://root@127.0.0.1:5432/test}
	$(BIN)/python bench/cancel_latency.py --pg $${ALKSTORE_BENCH_PG_URL:-postgresql://root@127.0.0.1:5432/test}

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
