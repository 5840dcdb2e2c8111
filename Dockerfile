# limiterd's container image: `make image` builds it (with docker, podman or
# buildah), as ghcr.io/limiterd/limiterd:<tag>.
#
#   docker build -t ghcr.io/limiterd/limiterd:0.1.0 .
#
# Two stages: a Go image builds a static limiterd (CGO_ENABLED=0, -trimpath),
# and the image that runs it is `scratch` with that one binary, the CA
# certificates, a default rule file and a numeric non-root user: no shell, no
# package manager, nothing else to patch. deploy/kubernetes and
# deploy/helm/limiterd run it; deploy/kubernetes/check/image_test.go builds
# this file and starts two containers of it that form a cluster.

# The build stage's image. Any Go 1.26 image with the CA certificates at
# /etc/ssl/certs works: pin a digest, or name a mirror, with
# --build-arg GO_IMAGE=... The build stage needs no shell (its RUN lines are
# in exec form), so a shell-less Go image works too.
ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0
# The modules first, in a layer of their own: a change to limiterd's code
# does not download them again.
COPY go.mod go.sum ./
RUN ["go", "mod", "download"]
COPY . .
# -trimpath: no build machine paths in the binary; -s -w: no symbol table or
# DWARF (a panic's stack trace keeps its function names and lines).
RUN ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/limiterd", "./cmd/limiterd"]

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/limiterd /usr/local/bin/limiterd
# The default rule file (testdata/rules.yaml, commented); Kubernetes mounts
# its own over it, or -rules names another.
COPY testdata/rules.yaml /etc/limiterd/rules.yaml
# limiterd's defaults suit a process on a host (HTTP on 127.0.0.1, the rule
# file relative to the working directory); in a container the HTTP API must
# listen on every address and the rules are where the line above put them.
# gRPC (Envoy's rate limit service) is on too, as in deploy/kubernetes. Each
# is a default: a flag on the command line wins. The cluster stays off until
# -bind-addr or -join is given (and then wants a gossip key: README.md).
ENV LIMITERD_HTTP_ADDR=0.0.0.0:8080 \
    LIMITERD_GRPC_ADDR=0.0.0.0:8081 \
    LIMITERD_RULES=/etc/limiterd/rules.yaml
# 65532: the conventional "nonroot" of distroless images; numeric, so that
# Kubernetes' runAsNonRoot can check it without an /etc/passwd.
USER 65532:65532
# HTTP (/check, /metrics, /healthz, /readyz), gRPC (Envoy's rate limit
# service), memberlist (gossip and count changes over UDP, state over TCP).
EXPOSE 8080/tcp 8081/tcp 7946/tcp 7946/udp
# No HEALTHCHECK: the image has no shell and no client to run one, and
# limiterd has no subcommand that asks its own /healthz. Kubernetes probes
# /healthz and /readyz itself (deploy/); with docker run, probe them from
# outside.
ENTRYPOINT ["/usr/local/bin/limiterd"]
