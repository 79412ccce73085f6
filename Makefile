# edgequorum — build, test and lint. `make help` lists the targets.

GO            ?= go
BIN           := $(CURDIR)/bin
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 60m
# Tests that need the control plane look for its binaries here.
export EDGEQUORUM_BIN_DIR := $(BIN)

.PHONY: all build test lint clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: ## build bin/edgequorum
	$(GO) build -o $(BIN)/edgequorum ./cmd/edgequorum

test: build ## run every test with -race (control-plane tests need `make controlplane`)
	$(GO) test -race -timeout $(TEST_TIMEOUT) ./...

lint: ## gofmt check, go vet, staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/controlplane/')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean: ## remove build outputs (keeps the cached control plane unless CLEAN_CONTROLPLANE=1)
	rm -f $(BIN)/edgequorum
	@if [ "$(CLEAN_CONTROLPLANE)" = 1 ]; then rm -rf $(BIN); fi
