# syntax=docker/dockerfile:1
# outprint's image: one binary, every role (serve, gateway, worker, migrate).
# See README, "Running on several machines", and compose.yaml.

FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/outprint ./cmd/outprint

# The emoji image set (Twemoji's SVGs from npm, checked against a pinned
# checksum), installed by the same script as scripts/setup.sh.
FROM node:22-trixie-slim AS emoji
RUN --mount=type=bind,source=scripts/emoji.sh,target=/tmp/emoji.sh bash /tmp/emoji.sh

FROM debian:trixie-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# The Debian packages are scripts/setup.sh's list, read from it so the two
# never drift, without the ones only tests and benchmarks use: prometheus
# (promtool checks the alert rules), pandoc (the benchmark's peer),
# poppler-utils and qpdf (PDF checks in tests).
RUN --mount=type=bind,source=scripts/setup.sh,target=/tmp/setup.sh \
    eval "$(sed -n '/^packages=(/,/^)/p' /tmp/setup.sh)" \
    && runtime=() \
    && for p in "${packages[@]}"; do case "$p" in prometheus|pandoc|poppler-utils|qpdf) ;; *) runtime+=("$p") ;; esac; done \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates "${runtime[@]}" \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/outprint --shell /usr/sbin/nologin outprint \
    && install -d -o outprint -g outprint -m 0700 /var/lib/outprint
COPY --from=build /out/outprint /usr/local/bin/outprint
COPY --from=emoji /usr/local/share/outprint/emoji /usr/local/share/outprint/emoji
# The root file system is mounted read-only (compose.yaml); the data folder
# is a tmpfs for TeX's scratch files, and HOME points there for fontconfig.
ENV HOME=/var/lib/outprint \
    OUTPRINT_DATA_DIR=/var/lib/outprint \
    OUTPRINT_LISTEN=0.0.0.0:8080 \
    OUTPRINT_WORKER_LISTEN=0.0.0.0:8090
USER 10001:10001
EXPOSE 8080 8090
ENTRYPOINT ["/usr/local/bin/outprint"]
CMD ["serve"]
