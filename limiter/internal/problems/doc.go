// Package problems collects what a rule file's parser and validation find
// wrong, so that one run reports all of it: one error that lists the
// problems in file and line order, "file:line: what is wrong", one per
// line (the layout of yaml's own multi-error messages), and wraps the
// package's sentinel. Package limiter and limiter/envoyrules share it, and
// its one-document YAML read (List.Document).
//
// It is pure: no clock, no goroutines, no I/O. A List is used by one
// goroutine at a time.
package problems
