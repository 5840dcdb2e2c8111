# limiterd — run `make help` for the targets.
GO        ?= go
BIN       := bin
HTTP_ADDR ?= 127.0.0.1:8080
RULES     ?= testdata/rules.yaml
FUZZTIME  ?= 30s
JOBS      ?= 1

.PHONY: help build run run-one test check lint vet race sims k8s-check image fuzz bench bench-micro bench-loopback bench-sync bench-sim bench-scale bench-e2e bench-others bench-cluster bench-hs2 soak plots seed clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  make %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build limiterd, limitsim and limitload into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

run: build ## start an 8-node cluster on 127.0.0.1 (HTTP 8081-8088) with $(RULES); Ctrl-C stops it
	BIN=$(BIN) RULES=$(RULES) scripts/run-cluster.sh

run-one: build ## start one limiterd, alone, on $(HTTP_ADDR) with $(RULES)
	$(BIN)/limiterd -http-addr $(HTTP_ADDR) -rules $(RULES)

# The three parts of test after the static checks run side by side: the
# race run is mostly the fault scenarios waiting on their clocks, the
# Kubernetes check mostly compiling Helm and the API types, so on two
# cores they overlap rather than follow one another (about 6 minutes from
# a fresh clone with warm Go caches, 9 with cold ones, instead of 13; vet
# run beside them too took 10 from cold ones: more to compile at once).
test: lint vet ## everything CI runs: gofmt, go vet, then side by side go test -race, the simulations at full size, the Kubernetes manifests', chart's and image's check
	@$(MAKE) --no-print-directory -j3 race sims k8s-check

check: lint vet ## the edit-test loop (under 2 minutes): gofmt, go vet, go test without the race detector, the end-to-end packages left out
	$(GO) test -count=1 $$($(GO) list ./... | grep -v '/e2e')

lint: ## fail if any file needs gofmt
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet ./...

# The fault tests (e2e/faults, as root: network namespaces; and e2e's
# flood of keys) log one line of figures each; go test shows a passing test's
# log only with -v, so they also go to $(FIGURES), printed at the end.
# e2e/faults takes about 8 minutes beside the others on two cores: past go
# test's 10-minute default.
FIGURES := $(CURDIR)/$(BIN)/fault-figures.txt

# The packages whose long deterministic simulations are built without the
# race detector (their full-size tests are in //go:build !race files; a
# short version of each runs under it): race runs them again without it.
SIM_PKGS := ./cmd/limitsim ./internal/burst ./internal/scale ./internal/seedplot

race: ## go test -race over every package; prints the fault tests' figures
	@mkdir -p $(BIN) && rm -f $(FIGURES)
	LIMITERD_FIGURES=$(FIGURES) $(GO) test -race -count=1 -timeout 30m ./...
	@if [ -s $(FIGURES) ]; then echo "== fault tests (docs/faults.md)"; cat $(FIGURES); fi

sims: ## the simulations' full-size tests, which the race run leaves to a run without the race detector
	$(GO) test -count=1 $(SIM_PKGS)

k8s-check: ## check deploy/kubernetes and the Helm chart against the Kubernetes API types, build and run the image (a module of its own)
	cd deploy/kubernetes/check && $(GO) vet ./... && $(GO) test -count=1 ./...

# The image's name: deploy/kubernetes/limiterd.yaml and the Helm chart
# (appVersion) run this one; k8s-check fails when they differ.
IMAGE_REPO ?= ghcr.io/limiterd/limiterd
IMAGE_TAG  ?= 0.1.0
IMAGE      ?= $(IMAGE_REPO):$(IMAGE_TAG)
# docker, podman or buildah; empty: the first that works, in that order.
IMAGE_BUILDER ?=

image: ## build the container image (IMAGE: ghcr.io/limiterd/limiterd:IMAGE_TAG) from Dockerfile with docker, podman or buildah
	@b='$(IMAGE_BUILDER)'; \
	if [ -z "$$b" ]; then \
		if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then b=docker; \
		elif command -v podman >/dev/null 2>&1; then b=podman; \
		elif command -v buildah >/dev/null 2>&1; then b=buildah; \
		elif command -v docker >/dev/null 2>&1; then \
			echo "make image: docker is installed but its engine does not answer (docker info), and there is no podman or buildah: start the engine, or install podman (Debian: apt-get install podman)" >&2; exit 1; \
		else \
			echo "make image: no container builder: install docker, podman or buildah (Debian: apt-get install podman), or set IMAGE_BUILDER" >&2; exit 1; \
		fi; \
	fi; \
	case "$$b" in buildah) cmd="buildah bud";; *) cmd="$$b build";; esac; \
	echo "$$cmd -t $(IMAGE) ."; \
	$$cmd -t '$(IMAGE)' .

fuzz: ## run every fuzz target for FUZZTIME (30s) each, JOBS (1) at once; new corpus entries go to testdata/fuzz
	GO=$(GO) FUZZTIME=$(FUZZTIME) JOBS=$(JOBS) scripts/fuzz.sh

bench: bench-micro bench-loopback bench-sync bench-sim bench-scale bench-e2e bench-others bench-cluster bench-hs2 ## every figure in BENCHMARKS.md (long; parts below)

bench-micro: ## counter, limiter and handler micro-benchmarks
	$(GO) test ./counter -run '^$$' -bench . -benchtime 2s -cpu 1,2 -count 3
	$(GO) test ./limiter ./httpapi -run '^$$' -bench . -benchtime 2s

bench-loopback: ## /check vs a no-op handler over loopback with wrk (DURATION, CONNS, KEYS, ROUNDS)
	scripts/bench-loopback.sh

bench-sync: ## sync traffic of 3 and 8 in-process nodes at HS2 load; one node's sync path; a coordinator's round trip and hot-key rate
	$(GO) test ./cluster/engine -run '^$$' -bench 'Syncer' -benchmem -count 3
	$(GO) test ./cluster -run '^$$' -bench SyncTransport -benchtime 50x
	BENCH_NODES=8 $(GO) test ./cluster -run '^$$' -bench 'SyncTransport/nodes=8/(alone|udp|tcp)$$' -benchtime 50x
	$(GO) test ./cluster -run '^$$' -bench 'CoordinateRoundTrip' -benchtime 20000x -count 3
	$(GO) test ./cluster -run '^$$' -bench 'CoordinateHotKey' -benchtime 5s -count 3

bench-sim: build ## limitsim: seed tables, cross-node burst, cluster scale, charts
	$(BIN)/limitsim seed
	$(BIN)/limitsim burst
	$(BIN)/limitsim scale --mesh
	$(BIN)/limitsim scale --mesh --rate-per-node 5000 --nodes 8,16,32
	$(BIN)/limitsim seed --plot docs/img >/dev/null

bench-scale: build ## limitsim scale, routed sync from 8 to 1,000 nodes (BENCHMARKS.md "Issue 20": healthy and fallback runs; about 75 min, 12 GB)
	$(BIN)/limitsim scale --nodes 8,64,256 --json > bin/scale-routed.jsonl
	$(BIN)/limitsim scale --nodes 1000 --seconds 5 --scenarios healthy --json >> bin/scale-routed.jsonl
	$(BIN)/limitsim scale --from bin/scale-routed.jsonl --svg bin/scale-routed.svg

bench-e2e: ## real 8-process cluster: 9x / 0.9x accuracy runs, SIGKILL 3 of 8
	LIMITERD_E2E_LONG=1 $(GO) test ./e2e -count=1 -run TestAccuracyOverHTTP -v
	LIMITERD_E2E_LONG=1 LIMITERD_E2E_LIMIT=600 $(GO) test ./e2e -count=1 -run TestAccuracyOverHTTP -v
	LIMITERD_E2E_LONG=1 LIMITERD_E2E_LIMIT=600 LIMITERD_E2E_SYNC=200ms $(GO) test ./e2e -count=1 -run TestAccuracyOverHTTP -v
	LIMITERD_E2E_NODES=8 $(GO) test ./e2e -count=1 -run TestClusterEndToEnd -v

bench-others: ## limiterd beside gubernator and envoyproxy/ratelimit + Redis: their HTTP APIs (issue 17's table), then behind the real Envoy
	OTHERS_BENCH_KEYS=1000 $(GO) test ./e2e -run '^$$' -bench AgainstOthers -benchtime 1x -v -timeout 30m
	OTHERS_BENCH_KEYS=100000 $(GO) test ./e2e -run '^$$' -bench AgainstOthers -benchtime 1x -v -timeout 30m
	$(GO) test ./e2e -run '^$$' -bench EnvoyRecipe -benchtime 1x -v -timeout 20m

bench-cluster: build ## the seed's experiments against a real 8-node cluster with limitload (WINDOW, LIMIT)
	scripts/bench-cluster.sh

bench-hs2: build ## HS2 on this machine: 8 nodes, 200,000 keys, a fresh cluster per run (RATE, DURATION, STEPS, SYNC, NODE_ARGS, LOAD_ARGS)
	scripts/bench-hs2.sh

# The soak's length and rate come as DURATION and RATE, as the benchmarks'
# do; they are not defaulted globally, where bench-loopback and bench-hs2
# would take them for their own. The test's timeout is DURATION plus 10m,
# written "30m10m": Go adds up a duration's parts.
SOAK_DURATION = $(if $(DURATION),$(DURATION),30m)
SOAK_RATE     = $(if $(RATE),$(RATE),6000)

soak: build ## 8 nodes at half HS2's sustained rate, one restarted every minute, for DURATION (30m) at RATE (6000/s), not in CI; writes docs/faults.md's Soak, docs/img/soak.svg
	LIMITERD_SOAK_DURATION=$(SOAK_DURATION) LIMITERD_SOAK_RATE=$(SOAK_RATE) $(GO) test ./e2e/soak -run '^TestSoak$$' -count=1 -v -timeout $(SOAK_DURATION)10m

plots: build ## regenerate the charts in docs/img
	$(BIN)/limitsim seed --plot docs/img >/dev/null

seed: build ## print the seed's tables with limiterd's rows
	$(BIN)/limitsim seed

clean: ## remove build output
	rm -rf $(BIN)
