package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1 // the command ran and failed: unreadable or malformed trace, write error
	exitUsage   = 2 // the command line was wrong
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"seed", "print the seed's window and distributed tables, with limiterd's rows added", runSeed},
		{"replay", "replay a request trace through limiterd's counter on a simulated clock", runReplay},
		{"burst", "evaluate the cross-node burst, the per-node budget and clock skew on a simulated cluster", runBurst},
		{"scale", "measure what one node costs on clusters of 8 to 1,000 simulated nodes (--mesh: the full mesh, 8 to 128)", runScaleCmd},
	}
}

// run is main without the process: args exclude the program name. It
// returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitsim", flag.ContinueOnError)
	fs.Usage = func() { topUsage(fs.Output()) }
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "limitsim: no command given")
		topUsage(stderr)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return runHelp(rest, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(rest, stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "limitsim: unknown command %q\n", name)
	topUsage(stderr)
	return exitUsage
}

// runHelp is "limitsim help [COMMAND]": the same text as -h.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		topUsage(stdout)
		return exitOK
	}
	return run([]string{args[0], "-h"}, bytes.NewReader(nil), stdout, stderr)
}

func topUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: limitsim COMMAND [flags]

limitsim runs the seed design study's experiments on limiterd's own code,
on a simulated clock: deterministic, no network, no real time.

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help     show help for a command

Run "limitsim COMMAND -h" for a command's flags. Exit status: 0 success,
1 runtime error (e.g. a malformed trace), 2 usage error.
`)
}

// parse parses args into fs. Help asked for with -h goes to stdout and ends
// the command successfully; a usage error goes to stderr as one line and a
// pointer to -h, not the whole help. ok reports whether the command should
// go on; otherwise code is its exit code.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var help bytes.Buffer
	fs.SetOutput(&help)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(help.Bytes())
		return exitOK, false
	case err != nil:
		return usageError(fs, stderr, "%v", err), false
	}
	return 0, true
}

// usageError reports a bad command line and returns exitUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) int {
	name := "limitsim"
	if fs.Name() != name {
		name += " " + fs.Name()
	}
	fmt.Fprintf(stderr, "%s: %s\nRun \"%s -h\" for usage.\n", name, fmt.Sprintf(format, a...), name)
	return exitUsage
}
