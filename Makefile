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

bench: build
	@bash bench/run.sh $(BIN)

fuzz: setup
	go test ./internal/markdown -run '^$$' -fuzz FuzzLaTeX -fuzztime 60s
