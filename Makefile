# limiterd — run `make help` for the targets.
GO        ?= go
BIN       := bin
HTTP_ADDR ?= 127.0.0.1:8080
RULES     ?= testdata/rules.yaml
FUZZTIME  ?= 30s

.PHONY: help build run run-one test lint vet race fuzz bench seed clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build limiterd and limitsim into ./bin
	$(GO) build -o $(BIN)/ ./cmd/...

run: build ## start an 8-node cluster on 127.0.0.1 (HTTP 8081-8088) with $(RULES); Ctrl-C stops it
	BIN=$(BIN) RULES=$(RULES) scripts/run-cluster.sh

run-one: build ## start one limiterd, alone, on $(HTTP_ADDR) with $(RULES)
	$(BIN)/limiterd -http-addr $(HTTP_ADDR) -rules $(RULES)

test: lint vet race ## everything CI runs: gofmt, go vet, go test -race

lint: ## fail if any file needs gofmt
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet ./...

race: ## go test -race over every package
	$(GO) test -race -count=1 ./...

fuzz: ## run every fuzz target for $(FUZZTIME) each
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
	  done; \
	done

bench: ## the benchmarks behind BENCHMARKS.md
	$(GO) test ./counter -run '^$$' -bench . -benchtime 2s -cpu 1,2
	$(GO) test ./limiter ./httpapi -run '^$$' -bench . -benchtime 2s
	scripts/bench-loopback.sh

seed: build ## print the seed's tables with limiterd's rows
	$(BIN)/limitsim seed

clean: ## remove build output
	rm -rf $(BIN)
