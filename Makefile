VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-deps test check bench demo clean

# The sandbox needs bubblewrap; the MCP bridge's tests run reference servers from the npm registry.
MCP_SERVERS := tests/fixtures/mcp_servers
NPM_STAMP := $(MCP_SERVERS)/node_modules/.installed
# The gateway's OIDC tests run a real OpenID provider (panva's oidc-provider) with node.
OIDC_PROVIDER := tests/fixtures/oidc
OIDC_NPM_STAMP := $(OIDC_PROVIDER)/node_modules/.installed
# The TypeScript worker SDK; tests/sdk run its built example workers with node.
TS_SDK := sdk/typescript
TS_SDK_STAMP := $(TS_SDK)/dist/.built

setup: $(STAMP) system-deps $(NPM_STAMP) $(OIDC_NPM_STAMP) $(TS_SDK_STAMP)

# Debian packages the tests need, installed when missing and we may (root, apt-get): bubblewrap
# for the sandbox, chromium for the console's browser tests (Playwright drives it).
SYSTEM_PACKAGES := bwrap:bubblewrap chromium:chromium
system-deps:
	@for pair in $(SYSTEM_PACKAGES); do \
	  cmd=$${pair%%:*}; pkg=$${pair##*:}; \
	  command -v $$cmd >/dev/null 2>&1 && continue; \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -q $$pkg >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && apt-get install -y -q $$pkg >/dev/null)) || \
	    echo "make setup: could not install $$pkg"; \
	  else echo "make setup: $$cmd is missing: install the Debian package $$pkg"; fi; \
	done

$(NPM_STAMP): $(MCP_SERVERS)/package-lock.json
	cd $(MCP_SERVERS) && npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)

$(OIDC_NPM_STAMP): $(OIDC_PROVIDER)/package-lock.json
	cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund --loglevel=error
	touch $(OIDC_NPM_STAMP)

$(TS_SDK_STAMP): $(TS_SDK)/package-lock.json $(TS_SDK)/tsconfig.json $(wildcard $(TS_SDK)/*/*.ts)
	cd $(TS_SDK) && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent
	touch $(TS_SDK_STAMP)

# AgentDojo (bench/injection.py) without its declared dependencies: [dev] brings what it imports
# (the [injection] extra); its declared langchain is never imported (see pyproject.toml).
AGENTDOJO := agentdojo==0.1.35

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps '$(AGENTDOJO)'
	touch $(STAMP)

# pytest exits 5 when it collects no test: say so loudly rather than fail an empty selection.
# `make coverage` (or `make test COVERAGE=1`, as CI runs it) runs the whole suite under coverage.py
# and writes .coverage for `make check`: line coverage of src/tackroom in the test process (not in
# the processes tests spawn). It about doubles the CPU of the tests that run tackroom in process,
# so a plain `make test` does not measure.
COVERAGE ?=
test: setup
	@if [ -n "$(COVERAGE)" ] && [ -z "$(PYTEST_ARGS)" ]; then rm -f .coverage; \
	run="-m coverage run -m pytest"; else run="-m pytest"; fi; \
	$(PY) $$run $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; exit 0; fi; exit $$rc

.PHONY: coverage
coverage:
	@$(MAKE) --no-print-directory test COVERAGE=1 PYTEST_ARGS=

# The coverage floor is `fail_under` in pyproject.toml ([tool.coverage.report]): set a little below
# what the whole suite measures, so a change that drops tested code fails here.
check: setup
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-logo --no-cache
	@test -f .coverage || { echo "make check: no coverage data (.coverage): run the whole suite under coverage with \`make coverage\` first"; exit 1; }
	@out=$$($(PY) -m coverage report --format=total); rc=$$?; \
	if [ $$rc -eq 2 ]; then echo "make check: $$(echo "$$out" | head -1) % of src/tackroom's lines ran in the tests, under the floor (fail_under in pyproject.toml): test the code you added"; exit 1; fi; \
	if [ $$rc -ne 0 ]; then echo "make check: coverage report failed: $$out"; exit 1; fi; \
	echo "coverage: $$out % of src/tackroom's lines ran in the tests"

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache .coverage
