# Kingdom — build, test, benchmark, demo.
GO        ?= go
BIN       := $(CURDIR)/bin
BINARIES  := start sentinel king general envoy chamberlain soldier-spawn
DEMO_DIR  := $(CURDIR)/.demo
# The version every binary prints with --version: the git description of the
# checkout (tag, commit, -dirty), else "dev".
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/kingdom-dev/kingdom/pkg/app.Version=$(VERSION)

.PHONY: all build test check vet fmt-check bench demo demo-stop clean

all: build

# CGO_ENABLED=0: pure-Go net and os/user, so every binary is static (no
# dynamic loader at each start; soldier-spawn starts once per task). No
# package of ours needs cgo; the tests' race detector does, so only the
# build sets it.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES)) ./scripts/demo-soldier

# The contract CI runs: formatting, vet, every test under the race detector
# (real tmux on private sockets, real git, local fake GitHub/Jira/Slack).
# scripts/gotest runs go test -json and prints plain go test's lines, then
# "skipped: N (names)": a skipped test is named, never silent.
test: fmt-check vet build
	$(GO) run ./scripts/gotest -race -count=1 -timeout 40m ./...

check: test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Go benchmarks of every package, then the pipeline latency run; figures land
# in docs/benchmarks.md. They run on an ordinary journaled filesystem: as
# root, a fresh ext4 image (mkfs defaults) loop-mounted on .bench-disk;
# otherwise .bench-disk on the current disk. docs/benchmarks.md names it.
BENCH_DIR := $(CURDIR)/.bench-disk
bench: build
	@set -e; d=$$(scripts/bench-disk.sh up $(BENCH_DIR)); \
	trap 'scripts/bench-disk.sh down $(BENCH_DIR)' EXIT; \
	disk=$$(scripts/bench-disk.sh describe $$d); echo "bench disk: $$disk"; \
	TMPDIR=$$d $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m ./... | tee $(CURDIR)/.bench-go.txt; \
	TMPDIR=$$d KINGDOM_BENCH=1 KINGDOM_BENCH_OUT=$(CURDIR)/.bench-pipeline.md KINGDOM_BENCH_SPEED_OUT=$(CURDIR)/.bench-speed.md $(GO) test -run 'TestPipelineBench|TestSpeedBench' -count=1 -timeout 30m -v ./e2e/; \
	KINGDOM_BENCH_DISK="$$disk" scripts/bench-report.sh $(CURDIR)/.bench-go.txt $(CURDIR)/.bench-pipeline.md $(CURDIR)/.bench-speed.md > docs/benchmarks.md

# Run the whole kingdom on this machine with no accounts: inbox watcher, the
# command engine with the bundled demo soldier, envoy in console mode.
demo: build
	$(GO) run ./scripts/demo --base-dir $(DEMO_DIR) --bin $(BIN)

demo-stop:
	$(GO) run ./scripts/demo --stop --base-dir $(DEMO_DIR) --bin $(BIN)

clean:
	rm -rf $(BIN) $(DEMO_DIR)
