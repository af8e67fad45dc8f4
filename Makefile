# The two commands of the README: `make run` and `make test`. Both install
# what is missing first (scripts/setup.sh, idempotent): `make run` only what
# serving needs, `make test` the rest too.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
# -trimpath everywhere: without it Go's build cache keys every package of
# this module by its folder, so a fresh clone elsewhere (as CI makes)
# compiles the whole module again (about 4 minutes under -race); with it a
# clone reuses what any clone on the machine compiled.
export GOFLAGS := -trimpath $(GOFLAGS)
BIN := bin/outprint
# The race detector instruments every package of a -race build, and SQLite
# here is Go: modernc.org/sqlite/lib is SQLite's C translated to Go, run on
# a C library also translated (modernc.org/libc, modernc.org/memory). Under
# -race those three cost more than all the rest of the job service (the
# jobs tests used 235 CPU-s with them instrumented, 79 without). They are
# compiled without the instrumentation, as a cgo SQLite would be: the
# detector still watches every other package, database/sql and the
# driver's Go side included. Sound because the three keep SQLite's heap
# outside Go's (the detector ignores that memory anyway) and instantiate
# no generic code of the standard library (a generic instantiation is
# shared with the packages that use the same one, so it would lose its
# instrumentation there too); internal/jobs's TestRaceUninstrumented
# checks that of each package named here.
RACE_UNINSTRUMENTED := modernc.org/sqlite/lib modernc.org/libc modernc.org/memory
RACE := -race $(foreach p,$(RACE_UNINSTRUMENTED),-gcflags=$(p)=-race=false)
# Test binaries are linked without DWARF (-w): Go's cache keeps compiled
# packages but links every test binary again, and DWARF is a third of
# that (httpapi's -race binary: 7.4 s and 4.8 CPU-s instead of 11.5 s and
# 7.3). Panics and race reports read the symbol table, which stays.
TEST_LDFLAGS := -ldflags=-w
# The -race run's test binaries collect garbage less often (GOGC=400; the
# outprint processes cmd/outprint's tests start inherit it). Under the
# detector a collection costs far more, much of it in the kernel:
# cluster's -race tests took 36 s user and 30 s system at the default 100,
# 24 s and 16 s at 400, with the same page faults. No test reads a Go
# memory figure that depends on it (the bounds tests read TotalAlloc).
RACE_GOGC := 400
# The race detector's own options for that run (GORACE):
# - clear_shadow_mmap_threshold: the detector clears the shadow of freed
#   and reused memory; past this size (64 KiB by default) it maps fresh
#   pages instead of writing zeros, and every page is faulted in again at
#   its next use. Page faults are this machine's dearest kernel work (a
#   virtual machine's), so it always writes: cluster's -race tests took 42
#   CPU-s with the default and 27-29 without, half the page faults;
#   httpapi's 171 and 130. What the detector finds does not change.
# - atexit_sleep_ms=0: a -race binary otherwise sleeps a second before it
#   exits, for goroutines still running to report; a test binary's tests
#   are over by then.
RACE_GORACE := clear_shadow_mmap_threshold=1073741824:atexit_sleep_ms=0
# The environment of the -race run (make race-env prints it).
RACE_ENV := GOGC=$(RACE_GOGC) GORACE=$(RACE_GORACE)
# The -race run starts the packages that take longest first, so that the
# last minutes are not one long package running alone while a core idles
# (tex started last and ran alone for two minutes); the rest follow in go
# list's order. Measured walls under -race (a CI rehearsal of 2026-12-06):
# cmd/outprint 238 s, jobs 177, tex 163, httpapi 143, render 111, diagram
# 105, store 70, office 52, service 46 (142 the rehearsal before, when a
# zygote dying before its gate was seen only at a timeout), markdown 44,
# forms 20.
RACE_FIRST := ./cmd/outprint ./internal/jobs ./internal/tex ./internal/httpapi ./internal/render \
  ./internal/diagram ./internal/store ./internal/office ./internal/service ./internal/markdown ./internal/forms
# The linters, pinned: staticcheck.conf and .golangci.yml say which checks
# (golangci-lint: errcheck, depguard for the test helpers, revive's
# exported rules) and why. scripts/tool.sh builds each once per machine,
# outside the clone, and prints its path (`go run PACKAGE@VERSION` asks
# the module proxy about the module on every run).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: setup setup-serve build run test bench fuzz fuzz-pathological visual visual-approve lint race-flags race-env

setup:
	@bash scripts/setup.sh test

setup-serve:
	@bash scripts/setup.sh serve

# The binary and, beside it, the TeX pool's zygote shim (scripts/shim.sh).
build: setup-serve
	go build -o $(BIN) ./cmd/outprint
	@bash scripts/shim.sh internal/tex/zygote/shim.c $(dir $(BIN))

run: build
	@bash scripts/run.sh $(BIN)

test: setup
	# First, all at the same time (scripts/together.sh; each one's output
	# is printed whole when it ends):
	# - go vet, staticcheck and golangci-lint (pinned above).
	# - The container image built and run, without -race (it drives
	#   podman): serve, then compose.yaml's topology. A cold machine builds
	#   the stand-ins and image layers once (cached outside the clone).
	# - The full 10,000-job burst on SQLite and PostgreSQL (the -race run
	#   bursts 300 jobs): durable acceptance waits on fsync.
	# - goldmark's own tests on the patched copy (a module of its own,
	#   which ./... leaves out), its performance tests included (about
	#   1.3 s; each fails past 5 s, times the multiplier upstream provides
	#   for loaded machines).
	# - Every package's tests under the race detector. The suites above
	#   mostly wait (on podman, on fsync) and, when the machine is fast,
	#   the -race run leaves a core idle a fifth of its time (its tests
	#   wait on leases, timeouts and processes): the first step's 2
	#   minutes fit in that idle time. When the machine is slow both
	#   cores are busy either way and this saves little. -vet=off: go
	#   vet ran every default analyzer on these packages; go test would
	#   run a subset of them again on each.
	#   -count=1: every test runs, none is answered from Go's test cache.
	@bash scripts/together.sh \
	  'go vet ./... && "$$(bash scripts/tool.sh $(STATICCHECK))" ./... && "$$(bash scripts/tool.sh $(GOLANGCI_LINT))" run ./...' \
	  'go test $(TEST_LDFLAGS) -count=1 -timeout 60m ./internal/imagetest' \
	  "go test $(TEST_LDFLAGS) -count=1 -run '^TestBurst\$$' -timeout 10m ./internal/jobs" \
	  'cd third_party/goldmark && GOLDMARK_TEST_TIMEOUT_MULTIPLIER=4 go test -count=1 ./...' \
	  '$(RACE_ENV) go test $(RACE) $(TEST_LDFLAGS) -vet=off -count=1 -timeout 20m $$(go list $(RACE_FIRST) ./... | grep -v /internal/imagetest$$)'
	# Last and alone, as they compare CPU time at two sizes: the
	# pathological Markdown families (short: 48 KB) and the same for a
	# form's values JSON (short: 256 KB).
	go test $(TEST_LDFLAGS) -count=1 -run '^TestPathological$$' ./internal/markdown
	go test $(TEST_LDFLAGS) -count=1 -run '^TestPathologicalValues$$' ./internal/forms

bench: setup build
	@bash bench/run.sh $(BIN)

fuzz: setup
	go test ./internal/markdown -run '^$$' -fuzz FuzzLaTeX -fuzztime 60s
	go test ./internal/forms -run '^$$' -fuzz FuzzParseValues -fuzztime 60s

# Every pathological Markdown family (cmark's, issue 29's and issue 10's)
# at 256 and 512 KB, and every values JSON family of forms at 4 and 8 MiB:
# doubling the input may at most about double the work. Then five minutes
# of fuzzing link syntax: a 16 KB document may cost at most 8 times a
# 4 KB one of the same pattern.
fuzz-pathological:
	go test -count=1 -v -run '^TestPathological$$' -timeout 20m ./internal/markdown -args -pathological-size=262144
	go test -count=1 -v -run '^TestPathologicalValues$$' -timeout 20m ./internal/forms -args -pathological-size=4194304
	go test ./internal/markdown -run '^$$' -fuzz FuzzLinkSyntaxLinear -fuzztime 5m

# The visual regression suite (internal/render/visual_test.go, also part of
# `make test`): compares every page of the corpus, examples/ and
# testdata/visual/docs/ with the approved PNGs in testdata/visual/; a
# changed page leaves approved | new | difference in testdata/visual/diff/.
visual: setup
	go test -count=1 -run '^TestVisual$$' -timeout 10m ./internal/render

# Takes the pages as rendered now as the approved ones: look at them (and
# at testdata/visual/diff/ from `make visual`) before committing.
visual-approve: setup
	go test -count=1 -run '^TestVisual$$' -timeout 10m ./internal/render -args -approve

# The flags and environment of `make test`'s -race run, for running one
# package as it does:
#   env $$(make -s race-env) go test $$(make -s race-flags) ./internal/jobs
race-flags:
	@echo $(RACE) $(TEST_LDFLAGS)

race-env:
	@echo $(RACE_ENV)

# golangci-lint alone, as `make test` runs it.
lint:
	"$$(bash scripts/tool.sh $(GOLANGCI_LINT))" run ./...
