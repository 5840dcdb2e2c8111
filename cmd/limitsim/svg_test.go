package main

import (
	"testing"

	"github.com/limiterd/limiterd/internal/svgchart/svgtest"
)

// The chart writer and its own tests are internal/svgchart's; limitsim's
// chart tests read their charts back with svgtest, under these names.

func parseSVG(t *testing.T, b []byte) []svgtest.Element {
	t.Helper()
	return svgtest.Parse(t, b)
}

func find(els []svgtest.Element, name, key, value string) []svgtest.Element {
	return svgtest.Find(els, name, key, value)
}
