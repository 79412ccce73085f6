# edgequorum — build, test and lint. `make help` lists the targets.

GO            ?= go
BIN           := $(CURDIR)/bin
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 60m
# Tests that need the control plane look for its binaries here.
export EDGEQUORUM_BIN_DIR := $(BIN)

.PHONY: all build test lint clean help demo

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# Static (no cgo): the binary runs in a scratch or distroless image.
build: ## build bin/edgequorum (static)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/edgequorum ./cmd/edgequorum

test: build ## run every test with -race (control-plane tests need `make controlplane`)
	$(GO) test -race -timeout $(TEST_TIMEOUT) ./...

demo: build controlplane ## play the story on a local real control plane (builds everything first)
	$(BIN)/edgequorum demo $(DEMO_ARGS)

lint: ## gofmt check, go vet, staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/controlplane/')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean: ## remove build outputs (keeps the cached control plane unless CLEAN_CONTROLPLANE=1)
	rm -f $(BIN)/edgequorum
	@if [ "$(CLEAN_CONTROLPLANE)" = 1 ]; then rm -rf $(BIN); fi

# The control plane (etcd, kube-apiserver, kube-controller-manager) is built from
# the tools module in hack/controlplane, whose replace lines pin the k8s.io
# staging modules; see hack/controlplane/README.md. The binaries depend only on
# that module's go.mod and go.sum, so a second `make controlplane` is a no-op.
CONTROLPLANE_DIR  := hack/controlplane
CONTROLPLANE_DEPS := $(CONTROLPLANE_DIR)/go.mod $(CONTROLPLANE_DIR)/go.sum
CONTROLPLANE_BINS := $(BIN)/etcd $(BIN)/kube-apiserver $(BIN)/kube-controller-manager
# Stamp the Kubernetes version that a source build leaves as v0.0.0-master.
KUBE_LDFLAGS      := -X k8s.io/component-base/version.gitVersion=v1.36.0 \
                     -X k8s.io/component-base/version.gitMajor=1 \
                     -X k8s.io/component-base/version.gitMinor=36 \
                     -X k8s.io/component-base/version.gitTreeState=clean

.PHONY: controlplane
controlplane: $(CONTROLPLANE_BINS) ## build etcd, kube-apiserver, kube-controller-manager into bin/ (first build 5-7 min)

$(BIN)/etcd: $(CONTROLPLANE_DEPS)
	@echo "building etcd (first build takes ~1 min)..."
	$(GO) build -C $(CONTROLPLANE_DIR) -o $@ go.etcd.io/etcd/server/v3
	@touch $@

$(BIN)/kube-apiserver: $(CONTROLPLANE_DEPS)
	@echo "building kube-apiserver (first build takes ~5 min)..."
	$(GO) build -C $(CONTROLPLANE_DIR) -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-apiserver
	@touch $@

$(BIN)/kube-controller-manager: $(CONTROLPLANE_DEPS)
	@echo "building kube-controller-manager (~1 min after kube-apiserver, longer alone)..."
	$(GO) build -C $(CONTROLPLANE_DIR) -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-controller-manager
	@touch $@

# Zone-size benchmark suite (benchmarks/README.md): edgequorum against the
# SuperEdge edge-health baseline on the real control plane. Both build the
# baseline daemon into bin/ first.
BENCH_OUT       ?= benchmarks/results
BENCH_QUICK_OUT ?= benchmarks/results/quick
BENCH_FLAGS     ?=

.PHONY: bench bench-quick bench-tools
bench-tools: build $(CONTROLPLANE_BINS)
	$(GO) build -o $(BIN)/edgehealth-baseline ./benchmarks/baseline/cmd/edgehealth
	$(GO) build -o $(BIN)/bench ./benchmarks/cmd/bench

bench: bench-tools ## zone sizes 3-129, edgequorum vs the SuperEdge baseline; results in benchmarks/results (about 75 min)
	$(BIN)/bench -out $(BENCH_OUT) -readme README.md,benchmarks/README.md $(BENCH_FLAGS)

bench-quick: bench-tools ## CI smoke of the benchmark suite: zone sizes 3, 5, 9 (about 7 min)
	$(BIN)/bench -quick -out $(BENCH_QUICK_OUT) $(BENCH_FLAGS)
