// Package deploy holds the checks on how dlqbot is packaged: its tests parse
// the repository's Dockerfile and .dockerignore, without Docker, and fail when
// a base image is not pinned, the image would run as root, the final stage
// copies more than the binary (and CA certificates), or the binary would not
// be a static, trimmed build of ./cmd/dlqbot.
package deploy
