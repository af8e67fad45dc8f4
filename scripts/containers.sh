#!/usr/bin/env bash
# Prepares this machine to build and run outprint's image the way the image
# tests (internal/imagetest) do, with Debian's podman and no Docker daemon or
# registry:
#
#   - podman's configuration, image storage and networks in the cache
#     folder, not the system's: runc and cgroupfs (no systemd here),
#     netavark with its DNS (Compose's service names), and explicit
#     ulimits (podman's default asks for more open files than root may
#     have here);
#   - local stand-ins for the images the Dockerfile and compose.yaml name,
#     tagged with those names: Debian trixie made by debootstrap
#     (debian:trixie-slim), Go from this machine on it (golang:*-trixie),
#     Debian's Node.js (node:*-trixie-slim), Debian's PostgreSQL 17 with an
#     entrypoint like the official image's (postgres:17) and SeaweedFS from
#     scripts/seaweedfs.sh (chrislusf/seaweedfs:*). The Dockerfile itself
#     stays an ordinary one that builds from the official images;
#   - docker compose v2, built from its Go module and cached like SeaweedFS.
#
# Everything slow is cached under ${OUTPRINT_CACHE:-~/.cache/outprint}, so
# only the first run takes long (about 15 minutes). Idempotent: with
# everything in place it only checks. Prints the environment the tests give
# podman and compose, one NAME=value a line. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

if [ "$(id -u)" -ne 0 ]; then
  echo "containers: the image tests run podman as root (run as root or with sudo)" >&2
  exit 1
fi
for p in podman runc debootstrap; do
  if ! command -v "$p" >/dev/null 2>&1; then
    echo "containers: $p is not installed (scripts/setup.sh test installs it)" >&2
    exit 1
  fi
done

cache="${OUTPRINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/outprint}"
dir="$cache/podman"
mkdir -p "$dir/networks" "$dir/tmp"

# Root cannot raise its hard limits here: ask for what there is (runc
# refuses more processes than the kernel has PIDs, too).
nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] && nofile=1048576
nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] && nproc=1048576
pidmax=$(cat /proc/sys/kernel/pid_max)
nofile=$((nofile < 65536 ? nofile : 65536))
nproc=$((nproc < pidmax ? nproc : pidmax))
nproc=$((nproc < 65536 ? nproc : 65536))
conf="$dir/containers.conf"
cat >"$conf.tmp" <<EOF
# Written by scripts/containers.sh.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "/run/outprint-podman/libpod"
[network]
network_backend = "netavark"
network_config_dir = "$dir/networks"
EOF
mv "$conf.tmp" "$conf"
cat >"$dir/storage.conf.tmp" <<EOF
# Written by scripts/containers.sh.
[storage]
driver = "overlay"
graphroot = "$dir/storage"
runroot = "/run/outprint-podman/storage"
EOF
mv "$dir/storage.conf.tmp" "$dir/storage.conf"
export CONTAINERS_CONF="$conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf" TMPDIR="$dir/tmp"

# The names the Dockerfile and compose.yaml use.
from() { sed -n "s/^FROM \([^ ]*\) AS $1\$/\1/p" Dockerfile | head -n1; }
golang=$(from build)
node=$(from emoji)
debian=$(sed -n 's/^FROM \([^ ]*\)$/\1/p' Dockerfile | tail -n1)
postgres=$(sed -n 's/^    image: \(postgres:.*\)$/\1/p' compose.yaml)
seaweedfs=$(sed -n 's/^    image: \(chrislusf\/seaweedfs:.*\)$/\1/p' compose.yaml)
qualify() { case "$1" in */*) echo "docker.io/$1" ;; *) echo "docker.io/library/$1" ;; esac; }

# has NAME RECIPE: the image exists and was made from this recipe.
has() {
  [ "$(podman image inspect --format '{{index .Labels "outprint.standin"}}' "$1" 2>/dev/null || true)" = "$2" ]
}
# standin NAME CONTEXT: builds CONTEXT/Containerfile as NAME, labelled with
# the recipe's hash, unless it is there already.
standin() {
  local name recipe
  name=$(qualify "$1")
  recipe=$( (cat "$2/Containerfile"; cat "$2"/*.sh 2>/dev/null || true) | sha256sum | cut -c1-16)
  if has "$name" "$recipe"; then
    return
  fi
  echo "containers: building the stand-in $name" >&2
  podman build --format docker --pull=never --label "outprint.standin=$recipe" -t "$name" "$2" >&2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Debian trixie, minimal, as debian:trixie-slim.
base=$(qualify "$debian")
base_recipe="debootstrap-minbase-trixie-1"
if ! has "$base" "$base_recipe"; then
  tarball="$cache/bases/trixie-minbase.tar"
  if [ ! -f "$tarball" ]; then
    echo "containers: debootstrap trixie (a few minutes, once)" >&2
    mkdir -p "$cache/bases"
    root="$work/trixie"
    debootstrap --variant=minbase trixie "$root" >&2
    # The machine's own Debian mirrors, for trixie and its updates.
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      rm -f "$root/etc/apt/sources.list"
      sed -e '/^#/d' -e 's/\(bookworm\|trixie\)/trixie/g' /etc/apt/sources.list.d/debian.sources |
        cat -s >"$root/etc/apt/sources.list.d/debian.sources"
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
  fi
  podman import --change 'CMD ["bash"]' --change "LABEL outprint.standin=$base_recipe" "$tarball" "$base" >&2
fi

# Go from this machine on trixie, as golang:VERSION-trixie.
want=$(echo "$golang" | sed -n 's/^golang:\([0-9.]*\)-.*/\1/p')
have=$(go env GOVERSION)
case "$have" in
  "go$want" | "go$want".*) ;;
  *) echo "containers: the Dockerfile builds with Go $want, this machine has $have" >&2; exit 1 ;;
esac
mkdir -p "$work/golang"
cat >"$work/golang/Containerfile" <<EOF
# Stand-in for the official $golang ($have from the test machine).
FROM $base
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev git make pkg-config \\
    && rm -rf /var/lib/apt/lists/*
COPY go /usr/local/go
ENV GOLANG_VERSION=${have#go} GOTOOLCHAIN=local GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /go/src /go/bin && chmod -R 1777 /go
WORKDIR /go
EOF
if ! has "$(qualify "$golang")" "$( (cat "$work/golang/Containerfile") | sha256sum | cut -c1-16)"; then
  cp -a "$(go env GOROOT)" "$work/golang/go"
fi
standin "$golang" "$work/golang"

# Debian's Node.js and npm on trixie, as node:VERSION-trixie-slim (the
# emoji stage runs npm pack).
mkdir -p "$work/node"
cat >"$work/node/Containerfile" <<EOF
# Stand-in for the official $node (Debian's Node.js).
FROM $base
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates nodejs npm \\
    && rm -rf /var/lib/apt/lists/*
CMD ["node"]
EOF
standin "$node" "$work/node"

# Debian's PostgreSQL 17 with an entrypoint that does what the official
# image's does for compose.yaml: initdb with POSTGRES_USER, _PASSWORD and
# _DB on first start, password authentication from other hosts.
mkdir -p "$work/postgres"
cat >"$work/postgres/entrypoint.sh" <<'EOF'
#!/bin/sh
set -eu
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
mkdir -p "$PGDATA" /var/run/postgresql
chown -R postgres:postgres "$PGDATA" /var/run/postgresql
chmod 0700 "$PGDATA"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$pw"
  chown postgres "$pw"
  as_postgres initdb -D "$PGDATA" -U "$user" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    as_postgres psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
    as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*' "$@"
EOF
cat >"$work/postgres/Containerfile" <<EOF
# Stand-in for the official $postgres (Debian's PostgreSQL 17).
FROM $base
RUN apt-get update \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-17 \\
    && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/17/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["sh", "/usr/local/bin/docker-entrypoint.sh"]
EOF
standin "$postgres" "$work/postgres"

# SeaweedFS's weed (scripts/seaweedfs.sh) on trixie, started as the
# official image starts it.
weed=$(bash scripts/seaweedfs.sh)
mkdir -p "$work/seaweedfs"
cp "$weed" "$work/seaweedfs/weed"
cat >"$work/seaweedfs/entrypoint.sh" <<'EOF'
#!/bin/sh
case "$1" in
  server) exec /usr/bin/weed -logtostderr=true "$@" -volume.max=0 -master.volumePreallocate=false ;;
  *) exec /usr/bin/weed -logtostderr=true "$@" ;;
esac
EOF
cat >"$work/seaweedfs/Containerfile" <<EOF
# Stand-in for the official $seaweedfs (weed $(basename "$(dirname "$weed")")).
FROM $base
COPY weed /usr/bin/weed
COPY entrypoint.sh /entrypoint.sh
EXPOSE 8333 9333 8080 8888
VOLUME /data
ENTRYPOINT ["sh", "/entrypoint.sh"]
EOF
standin "$seaweedfs" "$work/seaweedfs"

# docker compose v2 from its Go module, as SeaweedFS is built.
compose_version="v2.40.3"
compose="$cache/compose-$compose_version/docker-compose"
if [ ! -x "$compose" ]; then
  echo "containers: building docker compose $compose_version (minutes, once)" >&2
  mkdir -p "$(dirname "$compose")"
  src=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/docker/compose/v2@$compose_version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  mkdir -p "$work/compose"
  cp -r "$src/." "$work/compose/"
  chmod -R u+w "$work/compose"
  (cd "$work/compose" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$compose_version" -o "$compose.tmp" ./cmd) >&2
  mv "$compose.tmp" "$compose"
fi

echo "CONTAINERS_CONF=$CONTAINERS_CONF"
echo "CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF"
echo "TMPDIR=$TMPDIR"
echo "OUTPRINT_COMPOSE=$compose"
echo "OUTPRINT_GOMODCACHE=$(go env GOMODCACHE)"
# npm's cache, which holds the emoji package scripts/emoji.sh fetched here.
if command -v npm >/dev/null 2>&1; then
  echo "OUTPRINT_NPMCACHE=$(npm config get cache)"
fi
