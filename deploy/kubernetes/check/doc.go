// Package check validates limiterd's Kubernetes manifests
// (deploy/kubernetes): every document decodes strictly into its
// Kubernetes API type (k8s.io/api: an unknown or misspelt field, or a
// value of the wrong type, is an error, as the API server would refuse
// it), the objects agree with each other (selectors, ports, volumes, the
// headless Service the StatefulSet names), and the container's command
// line starts a real limiterd. It is a module of its own so that the
// Kubernetes API types, which only this check needs, stay out of
// limiterd's dependencies; make test runs it.
package check
