# The two commands of the README: `make run` and `make test`. Both install
# what is missing first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
BIN := bin/outprint

.PHONY: setup build run test bench fuzz

setup:
	@bash scripts/setup.sh

build: setup
	go build -o $(BIN) ./cmd/outprint

run: build
	@bash scripts/run.sh $(BIN)

test: setup
	go vet ./...
	go test -race -timeout 18m ./...
	# The full 10,000-job burst: the race detector slows SQLite ~30x, so
	# the -race run above bursts 300 jobs and this one the whole 10,000.
	go test -count=1 -run '^TestBurst$$' -timeout 5m ./internal/jobs

bench: build
	@bash bench/run.sh $(BIN)

fuzz: setup
	go test ./internal/markdown -run '^$$' -fuzz FuzzLaTeX -fuzztime 60s
