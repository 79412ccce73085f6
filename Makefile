# edgequorum — build, test and lint. `make help` lists the targets.

GO            ?= go
BIN           := $(CURDIR)/bin
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Writes the release's SBOMs (CycloneDX JSON) from each Go binary's build info.
SBOM_TOOL     := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
TEST_TIMEOUT  ?= 60m
# Tests that need the control plane look for its binaries here.
export EDGEQUORUM_BIN_DIR := $(BIN)

# The release version lives in VERSION; the image tag and the manifests in
# deploy/ name it (a test keeps them equal). The revision marks a changed tree.
VERSION    := $(shell cat VERSION)
REVISION   := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git status --porcelain 2>/dev/null | grep -q . && echo -dirty)
# Commit time, so images built twice from one commit are the same bytes.
BUILD_TIME := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILDINFO  := github.com/edgequorum/edgequorum/internal/buildinfo
LDFLAGS    := -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION)
IMAGE_REPO ?= ghcr.io/edgequorum/edgequorum
# Edge fleets are mostly arm64 and armv7.
IMAGE_PLATFORMS := linux/amd64 linux/arm64 linux/arm/v7

.PHONY: all build test lint clean help demo image release

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# Static (no cgo): the binary runs in an image with nothing else in it.
build: ## build bin/edgequorum and the narrow agent bin/edgequorum-agent (static, version-stamped) and bin/edgequorum-dev (the demo)
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/edgequorum ./cmd/edgequorum
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/edgequorum-agent ./cmd/edgequorum-agent
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/edgequorum-dev ./cmd/edgequorum-dev

# Two stripped static binaries per platform (edgequorum and the narrow agent
# it hands over to), then mkimage lays them into images
# (no Docker daemon, no base image): bin/image/oci is the multi-arch OCI layout,
# bin/image/edgequorum-<version>-<platform>.tar one image per platform.
image: ## build the OCI images for linux/amd64, arm64 and arm/v7 into bin/image and print their sizes
	@set -e; args=; for p in $(IMAGE_PLATFORMS); do \
	  os=$${p%%/*}; rest=$${p#*/}; arch=$${rest%%/*}; variant=; \
	  case $$rest in */*) variant=$${rest#*/};; esac; \
	  out=$(BIN)/image/bin/$$(echo $$p | tr / -)/edgequorum; \
	  echo "building $$out and $$out-agent"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$${variant#v} $(GO) build -trimpath \
	    -ldflags '-s -w $(LDFLAGS)' -o $$out ./cmd/edgequorum; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=$${variant#v} $(GO) build -trimpath \
	    -ldflags '-s -w $(LDFLAGS)' -o $$out-agent ./cmd/edgequorum-agent; \
	  args="$$args $$p=$$out"; \
	done; \
	$(GO) run ./hack/mkimage -repo $(IMAGE_REPO) -version $(VERSION) -revision $(REVISION) \
	  -created $(BUILD_TIME) -out $(BIN)/image $$args

# Everything the tests run is built first, so that no test skips: the control
# plane, the real node (kubelet, containerd; Debian's runc and CNI plugins) and
# the images it runs. The real-node tests need root (network namespaces).
release: image $(BIN)/cyclonedx-gomod ## write what a release ships into bin/release: CLIs for linux and macOS, images, install manifests, SBOMs, SHA256SUMS (the same commit gives the same bytes)
	$(GO) run ./hack/release -version $(VERSION) -revision $(REVISION) -out $(BIN)/release \
	  -images $(BIN)/image -manifests deploy/install -sbom-tool $(BIN)/cyclonedx-gomod

$(BIN)/cyclonedx-gomod:
	GOBIN=$(BIN) $(GO) install $(SBOM_TOOL)

test: build image controlplane noderuntime monitoring-tools packages $(BIN)/cyclonedx-gomod ## build everything the tests need, then run every test with -race (as root)
	EDGEQUORUM_REQUIRE_CONTROLPLANE=$${EDGEQUORUM_REQUIRE_CONTROLPLANE:-1} $(GO) test -race -timeout $(TEST_TIMEOUT) ./...
	$(SKEW_TEST)

.PHONY: unit
unit: ## run the tests that need neither root nor the control plane, with -race: what a developer runs every few minutes
	EDGEQUORUM_UNIT=1 EDGEQUORUM_REQUIRE_CONTROLPLANE=0 $(GO) test -race -timeout 10m ./...
	$(SKEW_TEST)

# The version-skew tests again, built as the next release (tag skewnext:
# one protocol level more, one command type more, a verdict and a zone Lease
# format more), so that members, leaders and webhooks of this release and the
# next run side by side in one process.
SKEW_TEST := $(GO) test -race -timeout 10m -tags skewnext -run 'Mixed|Skew|Newer|Announce|Release' ./skew ./store ./zoneport ./raftzone ./zone ./apiwriter ./admission

.PHONY: packages
packages: ## install the Debian packages the tests need (runc, CNI plugins, nftables, ...) if missing
	@hack/node-packages.sh

demo: build controlplane ## play the story on a local real control plane (builds everything first)
	$(BIN)/edgequorum-dev demo $(DEMO_ARGS)

lint: ## gofmt check, go vet, staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/controlplane/')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean: ## remove build outputs (keeps the cached control plane unless CLEAN_CONTROLPLANE=1)
	rm -rf $(BIN)/edgequorum $(BIN)/edgequorum-agent $(BIN)/edgequorum-dev $(BIN)/image
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

# A real node for the tests that run the shipped manifests: kubelet and
# kube-proxy from the same Kubernetes release, kubectl for the documented
# install commands. Static, as upstream ships them.
NODE_BINS := $(BIN)/kubelet $(BIN)/kube-proxy $(BIN)/kubectl

$(NODE_BINS): $(BIN)/%: $(CONTROLPLANE_DEPS)
	@echo "building $* (~1-2 min after kube-apiserver)..."
	CGO_ENABLED=0 $(GO) build -C $(CONTROLPLANE_DIR) -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$*
	@touch $@

# Zone-size benchmark suite (benchmarks/README.md): edgequorum against the
# SuperEdge edge-health baseline on the real control plane. Both build the
# baseline daemon into bin/ first.
BENCH_OUT       ?= benchmarks/results
BENCH_QUICK_OUT ?= benchmarks/results/quick
BENCH_FLAGS     ?=
DETECT_FLAGS    ?=

.PHONY: bench bench-quick bench-tools bench-fleet bench-detect bench-soak
bench-tools: build $(CONTROLPLANE_BINS)
	$(GO) build -o $(BIN)/edgehealth-baseline ./benchmarks/baseline/cmd/edgehealth
	$(GO) build -o $(BIN)/bench ./benchmarks/cmd/bench
	$(GO) build -o $(BIN)/webhookload ./benchmarks/cmd/webhookload
	$(GO) build -o $(BIN)/standins ./benchmarks/cmd/standins
	$(GO) build -o $(BIN)/fleet ./benchmarks/cmd/fleet
	$(GO) build -o $(BIN)/soak ./benchmarks/cmd/soak

bench: bench-tools ## zone sizes 3-129, edgequorum vs the SuperEdge baseline, then the webhook's cost; results in benchmarks/results (about 2 hours: the full run of 2026-11-28 took 1 h 51 min)
	$(BIN)/bench -out $(BENCH_OUT) -readme README.md,benchmarks/README.md $(BENCH_FLAGS)
	$(BIN)/webhookload -out $(BENCH_OUT)

bench-fleet: bench-tools ## thousands of three-node sites on one control plane with the webhook: the cloud's steady cost by source and a regional outage; results in benchmarks/results/fleet.md (about 50 min)
	$(BIN)/fleet -out $(BENCH_OUT) $(FLEET_FLAGS)

# Detection only: each kill of edgequorum takes about 9.5 s (jitter, detection,
# revival) and each of the baseline about 6 s, so 200 of each per size come to
# about 55 minutes a size. Not part of .ci/run.
bench-detect: bench-tools ## node-death detection only: 100 reset and 100 silent deaths per system at zone sizes 3, 9, 33; results in benchmarks/results/detect.md (about 3 hours)
	$(BIN)/bench -detect -out $(BENCH_OUT) $(DETECT_FLAGS)

bench-soak: bench-tools ## false verdicts under impaired links: 18 zones side by side for an hour (24 node-hours at 5 % loss for N = 3 and 5, 1 % on N = 9, one-way loss, bursts of darkness, 200 ms jitter); results in benchmarks/results/soak (about 65 min)
	$(BIN)/soak -out $(BENCH_OUT)/soak $(SOAK_FLAGS)

bench-quick: bench-tools ## CI smoke of the benchmark suite: zone sizes 3, 5, 9, and a small webhook load (about 8 min)
	$(BIN)/bench -quick -out $(BENCH_QUICK_OUT) $(BENCH_FLAGS)
	$(BIN)/webhookload -nodes 1000 -pods 10000 -duration 5s -out $(BENCH_QUICK_OUT)

# The real node's container runtime for internal/realnode: containerd 2.x and
# its runc shim (Debian 12 ships only containerd 1.6, which Kubernetes 1.36
# refuses), built from the tools module hack/noderuntime so that containerd's
# dependencies never meet Kubernetes' in one module graph; see
# hack/noderuntime/README.md. runc and the CNI plugins come from Debian (.ci/run).
# Static and cgo-free; cached on the module's go.mod and go.sum like the
# control plane.
NODERUNTIME_DIR  := hack/noderuntime
NODERUNTIME_DEPS := $(NODERUNTIME_DIR)/go.mod $(NODERUNTIME_DIR)/go.sum
NODERUNTIME_BINS := $(BIN)/containerd $(BIN)/containerd-shim-runc-v2 $(BIN)/ctr
CONTAINERD_PKG   := github.com/containerd/containerd/v2
# Lazy (=): asks go.mod for the version only when a runtime binary is built.
CONTAINERD_LDFLAGS = -X $(CONTAINERD_PKG)/version.Version=$(shell $(GO) list -C $(NODERUNTIME_DIR) -m -f '{{.Version}}' $(CONTAINERD_PKG))
CONTAINERD_TAGS  := no_btrfs,no_devmapper,no_zfs

.PHONY: noderuntime
noderuntime: $(NODERUNTIME_BINS) $(NODE_BINS) $(BIN)/kube-scheduler ## build containerd, its runc shim, ctr, kubelet, kube-proxy, kubectl, kube-scheduler into bin/ (needs Debian runc + CNI plugins)

# testcluster runs no scheduler (the fake kubelets' pods are bound by the
# tests), but DaemonSet and Deployment pods on the real node need one; the
# control-plane module already holds everything kube-scheduler imports.
$(BIN)/kube-scheduler: $(CONTROLPLANE_DEPS)
	@echo "building kube-scheduler (~1 min after kube-apiserver)..."
	CGO_ENABLED=0 $(GO) build -C $(CONTROLPLANE_DIR) -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-scheduler
	@touch $@

$(NODERUNTIME_BINS): $(BIN)/%: $(NODERUNTIME_DEPS)
	@echo "building $* (first build of the three takes ~2 min)..."
	CGO_ENABLED=0 $(GO) build -C $(NODERUNTIME_DIR) -tags '$(CONTAINERD_TAGS)' -ldflags '$(CONTAINERD_LDFLAGS)' -o $@ $(CONTAINERD_PKG)/cmd/$*
	@touch $@

# The monitoring component's tests (deploy/monitoring_test.go) run promtool on
# the shipped PrometheusRule and the dashboard's queries, and create the
# PodMonitor and PrometheusRule on a real apiserver that knows their CRDs.
# Both come from the tools module hack/monitoring, so that Prometheus' and
# prometheus-operator's dependency graphs never enter the root module; see
# hack/monitoring/README.md. Cached on that module's go.mod and go.sum like
# the control plane.
MONITORING_DIR  := hack/monitoring
MONITORING_DEPS := $(MONITORING_DIR)/go.mod $(MONITORING_DIR)/go.sum
PROMETHEUS_MOD  := github.com/prometheus/prometheus
PROMOP_MOD      := github.com/prometheus-operator/prometheus-operator
# Only the CRDs of the kinds deploy/webhook/components/monitoring ships.
MONITORING_CRDS := $(addprefix $(BIN)/prometheus-operator-crd/monitoring.coreos.com_,podmonitors.yaml prometheusrules.yaml)
# Lazy (=): asks go.mod for the version only when promtool is built, so that
# `promtool --version` names the module it came from.
PROMTOOL_LDFLAGS = -X github.com/prometheus/common/version.Version=$(shell $(GO) list -C $(MONITORING_DIR) -m -f '{{.Version}}' $(PROMETHEUS_MOD))

.PHONY: monitoring-tools
monitoring-tools: $(BIN)/promtool $(MONITORING_CRDS) ## build promtool and copy the PodMonitor and PrometheusRule CRDs into bin/ (first build ~5 min)

$(BIN)/promtool: $(MONITORING_DEPS)
	@echo "building promtool (first build takes ~5 min)..."
	$(GO) build -C $(MONITORING_DIR) -ldflags '$(PROMTOOL_LDFLAGS)' -o $@ $(PROMETHEUS_MOD)/cmd/promtool
	@touch $@

# From the module cache, which go verifies against go.sum; install, not cp:
# the cache's files are read-only, and a later copy must overwrite ours.
$(MONITORING_CRDS): $(BIN)/prometheus-operator-crd/%: $(MONITORING_DEPS)
	@echo "copying the CRD $* from $(PROMOP_MOD)..."
	@$(GO) mod download -C $(MONITORING_DIR) $(PROMOP_MOD)
	@src=$$($(GO) list -C $(MONITORING_DIR) -m -f '{{.Dir}}' $(PROMOP_MOD)); \
	  test -n "$$src" || { echo "no module directory for $(PROMOP_MOD)"; exit 1; }; \
	  install -D -m 0644 "$$src/example/prometheus-operator-crd/$*" $@
