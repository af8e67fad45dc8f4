# syntax=docker/dockerfile:1
# outprint's image: one binary, every role (serve, gateway, worker, migrate).
# See README, "The container image", and compose.yaml.
#
# The layers are ordered by how often they change: the Debian packages
# (scripts/packages-serve.txt, then LibreOffice's, scripts/packages-office.txt),
# the emoji set and the Mermaid bundle first,
# the zygote shim,
# then the binary. A change of outprint's Go source rebuilds only the binary
# (Go's build cache is a cache mount) and the image's last layer.

# outprint, a static binary. go.mod replaces goldmark with third_party/
# goldmark, so that folder is copied before the modules are downloaded.
FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY third_party/ third_party/
RUN go mod download
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -o /out/outprint ./cmd/outprint

# The TeX pool's zygote shim, compiled as `make build` compiles it (warnings
# are errors) and named by its source's hash; the runtime image has no C
# compiler.
FROM golang:1.26-trixie AS shim
COPY scripts/shim.sh internal/tex/zygote/shim.c /src/
RUN bash /src/shim.sh /src/shim.c /out

# The emoji image set (Twemoji's SVGs from npm, checked against a pinned
# checksum), installed by the same script as scripts/setup.sh.
FROM node:22-trixie-slim AS emoji
COPY scripts/emoji.sh /src/emoji.sh
RUN bash /src/emoji.sh

# Mermaid's browser bundle (npm mermaid 11.16.1, checked against a pinned
# checksum), installed by the same script as scripts/setup.sh; Chromium
# from the Debian packages below runs it.
FROM node:22-trixie-slim AS mermaid
COPY scripts/mermaid.sh /src/mermaid.sh
RUN bash /src/mermaid.sh

FROM debian:trixie-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Exactly the packages outprint runs (scripts/packages-serve.txt; the image
# test runs `which` for every program internal/programs lists), Chromium and
# Graphviz for diagrams among them. Nothing that only tests use: no Java,
# pandoc or C compiler.
COPY scripts/packages-serve.txt /usr/local/share/outprint/packages-serve.txt
RUN apt-get update \
    && mapfile -t packages < <(sed 's/#.*//' /usr/local/share/outprint/packages-serve.txt | tr -s ' \t' '\n' | grep .) \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}" \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
# LibreOffice for Office documents (internal/office) and the fonts they ask
# for, in a layer of their own after TeX's (scripts/packages-office.txt):
# a change to them reuses the cached TeX layer above.
COPY scripts/packages-office.txt /usr/local/share/outprint/packages-office.txt
RUN apt-get update \
    && mapfile -t packages < <(sed 's/#.*//' /usr/local/share/outprint/packages-office.txt | tr -s ' \t' '\n' | grep .) \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}" \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
# The data folder is mode 1777: a tmpfs mounted over it takes the folder's
# mode but not its owner (runc), and root owns it then.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/outprint --shell /usr/sbin/nologin outprint \
    && install -d -o outprint -g outprint -m 1777 /var/lib/outprint
COPY --from=emoji /usr/local/share/outprint/emoji /usr/local/share/outprint/emoji
COPY --from=mermaid /usr/local/share/outprint/mermaid /usr/local/share/outprint/mermaid
COPY --from=shim /out/ /usr/local/lib/outprint/
COPY --from=build /out/outprint /usr/local/bin/outprint
# The root file system is mounted read-only (compose.yaml) and /tmp with
# it; the data folder is a tmpfs for TeX's scratch files, and HOME and
# TMPDIR point there (fontconfig's cache, outprint's font copies).
ENV HOME=/var/lib/outprint \
    TMPDIR=/var/lib/outprint \
    OUTPRINT_DATA_DIR=/var/lib/outprint \
    OUTPRINT_LISTEN=0.0.0.0:8080 \
    OUTPRINT_WORKER_LISTEN=0.0.0.0:8090
USER 10001:10001
EXPOSE 8080 8090
ENTRYPOINT ["/usr/local/bin/outprint"]
CMD ["serve"]
