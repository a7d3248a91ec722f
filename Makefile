# commlab: `make run` serves the course with labs; `make test` runs everything CI runs.
GO      ?= go
BIN     := bin/commlab
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ADDR    ?= :8080
DATA    ?= ./data
# Learners in make bench's load run (BenchmarkLearnerLoad, docs/load.md).
LOAD_LEARNERS ?= 30
export CGO_ENABLED := 1

WEB_DIST := web/static/dist/lab.js

.PHONY: run build web test test-full test-short bench lint gpu-check deps-run deps-test deps-bench

build: $(WEB_DIST)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/commlab

# The browser bundle (xterm.js, uPlot) comes from npm and is embedded in the binary.
web: $(WEB_DIST)
$(WEB_DIST): web/frontend/package.json web/frontend/package-lock.json $(wildcard web/frontend/src/*)
	cd web/frontend && npm ci --no-audit --no-fund --loglevel=error && npm run -s build

run: deps-run build
	./$(BIN) serve --addr $(ADDR) --data $(DATA)

# Packages that use the host (namespaces, cgroups, labs that measure bandwidth and
# CPU) run one at a time; the others (and the host packages that measure nothing: Slurm's,
# the browser's and the CLI's labs) run beside them (scripts/test.sh says how).
# The end-to-end tests run the binary `build` just made instead of building their own.
# Chapter labs (labs/chapters) play one seed each; test-full plays every seed.
test: deps-test build lint
	COMMLAB_TEST_BIN=$(CURDIR)/$(BIN) GO=$(GO) scripts/test.sh

test-full:
	COMMLAB_E2E_SEEDS=all $(MAKE) test

# Authors' tier: unit tests only. Root tests (internal/testenv.RequireRoot: namespaces,
# tc, nftables, cgroups, sandboxes) skip themselves under -short, as root or not.
test-short: $(WEB_DIST)
	$(GO) test -short -count=1 ./...

bench: deps-test deps-bench build
	COMMLAB_LOAD_LEARNERS=$(LOAD_LEARNERS) $(GO) test -run '^$$' -bench . -benchtime 1x ./...
	@set -e; for s in scripts/bench-*.sh; do echo "== $$s"; "$$s"; done

# On a GPU node, as root: every gpu command and every GPU-node lab end to end, in one
# table (docs/gpu-validation.md). commlab must be readable by the learner uid.
gpu-check: build
	./$(BIN) gpu check --out artifacts/gpu-check

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./... # authors build on macOS: labs refuse there (labs.ErrNeedsLinux), the rest must compile
	GOOS=windows CGO_ENABLED=0 $(GO) vet ./... # and on Windows, the same way

deps-run:
	@scripts/deps.sh run
deps-test:
	@scripts/deps.sh test
deps-bench:
	@scripts/deps.sh bench
