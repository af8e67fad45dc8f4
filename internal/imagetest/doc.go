// Package imagetest holds the tests of what users run: the container image
// built from the Dockerfile and run as `outprint serve` with a read-only
// root file system, and compose.yaml's topology (PostgreSQL, SeaweedFS,
// migrate, a gateway and two workers with their limits) run by docker
// compose. It has no code of its own.
//
// The machine needs no Docker daemon or registry: scripts/containers.sh sets
// up Debian's podman (configuration and image storage in outprint's cache
// folder), builds local stand-ins for the images the Dockerfile and
// compose.yaml name, and builds docker compose v2 from its Go module; the
// tests point compose at podman's Docker API (`podman system service`). The
// Dockerfile and compose.yaml are used as written.
//
// `make test` runs this package alone, without -race and with a long
// timeout: a cold machine builds the stand-ins and the image's layers once
// (about 30 minutes here); later runs reuse them from the cache and take a
// few minutes. Under CI=true a missing podman fails the tests.
package imagetest
