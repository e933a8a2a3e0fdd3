# dlqbot container image: `make image` (docker build -t dlqbot:dev .).
#
# Two stages: a pinned Go toolchain builds a static binary, and a distroless
# base that holds only CA certificates, tzdata and a non-root user runs it.
# Every base image is pinned (deploy/dockerfile_test.go checks it):
#   - golang:1.26.8-bookworm is an exact version tag (the toolchain this
#     repository is built and tested with);
#   - the distroless image has no version tags, so it is pinned by digest.
#     Refresh it with `crane digest gcr.io/distroless/static-debian12:nonroot`
#     (or `docker buildx imagetools inspect`) and keep the tag beside it.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, so a source-only change reuses the download layer.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/dlqbot ./cmd/dlqbot

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
# The base already holds /etc/ssl/certs/ca-certificates.crt (TLS to Slack,
# rediss:// and amqps://): only the binary is copied.
COPY --from=build /out/dlqbot /dlqbot
# distroless's "nonroot" user, by number so Kubernetes' runAsNonRoot can
# verify it without reading /etc/passwd.
USER 65532:65532
# DLQBOT_HTTP_ADDR's default: /healthz, /readyz, /metrics and Slack's
# HTTP endpoints.
EXPOSE 8080
ENTRYPOINT ["/dlqbot"]
CMD ["serve"]
