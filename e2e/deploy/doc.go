// Package deploy tests the deployment files under deploy/ against the
// tools that read them and against live limiterd processes: the systemd
// unit (systemd-analyze verify and security, its hardening, sysusers, the
// environment file, and a node under strace held to the unit's sandbox),
// the Prometheus alerts and configuration (promtool, and a real
// Prometheus scraping a live cluster) and the Grafana dashboard (its
// shape, and every query parsed and answered). The tools come from
// Debian's packages, installed as root when missing; a test that cannot
// have its tool skips, saying why.
package deploy
