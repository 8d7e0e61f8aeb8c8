VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test check bench demo clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# pytest exits 5 when it collects no test: say so loudly rather than fail an empty selection.
test: setup
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$rc

check: setup
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-logo --no-cache

bench: setup
	$(PY) bench/engine.py
	$(PY) bench/turn.py

# The fault-injection suite's long mode: many more trials; prints its figures (bench/faults.py).
.PHONY: soak
soak: setup
	@$(PY) bench/faults.py --soak

demo: setup
	$(VENV)/bin/tackroom demo

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
