# The two commands of the README: `make run` and `make test`. Both install
# what is missing first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
BIN := bin/outprint

.PHONY: setup build run test bench fuzz fuzz-pathological visual visual-approve

setup:
	@bash scripts/setup.sh

build: setup
	go build -o $(BIN) ./cmd/outprint

run: build
	@bash scripts/run.sh $(BIN)

test: setup
	go vet ./...
	# staticcheck, pinned; staticcheck.conf says which checks.
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	go test -race -timeout 18m ./...
	# The pathological Markdown families at two sizes (short: 48 KB).
	go test -count=1 -run '^TestPathological$$' ./internal/markdown
	# The full 10,000-job burst: the race detector slows SQLite ~30x, so
	# the -race run above bursts 300 jobs and this one the whole 10,000.
	go test -count=1 -run '^TestBurst$$' -timeout 5m ./internal/jobs

bench: build
	@bash bench/run.sh $(BIN)

fuzz: setup
	go test ./internal/markdown -run '^$$' -fuzz FuzzLaTeX -fuzztime 60s

# Every pathological Markdown family (cmark's and issue 10's) at 256 and
# 512 KB: doubling the input may at most about double the work.
fuzz-pathological:
	go test -count=1 -v -run '^TestPathological$$' -timeout 20m ./internal/markdown -args -pathological-size=262144

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
