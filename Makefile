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

.PHONY: setup setup-serve build run test bench fuzz fuzz-pathological visual visual-approve lint

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
	go vet ./...
	# staticcheck, pinned; staticcheck.conf says which checks.
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	# golangci-lint, pinned; .golangci.yml says which checks (errcheck,
	# depguard, revive's exported rules) and why.
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...
	# -vet=off: go vet above ran every default analyzer on these
	# packages; go test would run a subset of them again on each.
	# -count=1: every test runs, none is answered from Go's test cache.
	go test -race -vet=off -count=1 -timeout 18m $$(go list ./... | grep -v /internal/imagetest$$)
	# goldmark's own tests on the patched copy (a module of its own, which
	# ./... leaves out), its performance tests included (about 1.3 s; each
	# fails past 5 s, times the multiplier upstream provides for loaded
	# machines).
	cd third_party/goldmark && GOLDMARK_TEST_TIMEOUT_MULTIPLIER=4 go test ./...
	# The container image built and run, alone and without -race (it
	# drives podman): serve, then compose.yaml's topology. A cold machine
	# builds the stand-ins and image layers once (cached outside the clone).
	go test -count=1 -timeout 60m ./internal/imagetest
	# The pathological Markdown families at two sizes (short: 48 KB).
	go test -count=1 -run '^TestPathological$$' ./internal/markdown
	# The same for a form's values JSON (short: 256 KB).
	go test -count=1 -run '^TestPathologicalValues$$' ./internal/forms
	# The full 10,000-job burst: the race detector slows SQLite ~30x, so
	# the -race run above bursts 300 jobs and this one the whole 10,000.
	go test -count=1 -run '^TestBurst$$' -timeout 5m ./internal/jobs

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

# golangci-lint, pinned like staticcheck; .golangci.yml says which checks
# (errcheck, depguard for the test helpers, revive's exported rules). Not
# yet part of `make test`: the findings outside the packages cleaned so
# far are still to be fixed.
lint:
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run ./...
