// Package deploy holds the checks on how dlqbot is packaged and deployed,
// none of which needs a Docker engine or a Kubernetes cluster:
//
//   - dockerfile_test.go parses the repository's Dockerfile and
//     .dockerignore and fails when a base image is not pinned, the image
//     would run as root, the final stage copies more than the binary (and
//     CA certificates), or the binary would not be a static, trimmed build
//     of ./cmd/dlqbot.
//   - compose_test.go checks compose.yaml (RabbitMQ 4 with management,
//     Redis with AOF and noeviction, dlqbot's demo on one loopback port,
//     healthchecks waited for) and has `docker-compose config` validate it;
//     CI installs Debian's docker-compose with scripts/install-compose.sh.
//   - k8s_test.go and k8s_check_test.go render k8s/ as `kubectl apply -k`
//     would and check the Deployment (two replicas, probes, grace period,
//     non-root and read-only, credentials from the Secret), the Service and
//     the PodDisruptionBudget, and that docs/operating.md says how to apply them.
//   - drain_test.go adds up the waits of dlqbot serve's SIGTERM drain, which
//     the Compose and Kubernetes grace periods must cover.
//
// The Kubernetes manifests live in k8s/ beside these tests.
package deploy
