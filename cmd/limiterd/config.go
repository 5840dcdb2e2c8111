package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/httpapi"
)

// envPrefix prefixes the environment variable that mirrors each flag:
// -http-addr is LIMITERD_HTTP_ADDR. A flag on the command line wins.
const envPrefix = "LIMITERD_"

// config is everything main needs, from flags and the environment.
type config struct {
	httpAddr        string
	rulesPath       string
	keyHeader       string
	maxKeys         int
	shards          int
	sweepInterval   time.Duration
	shutdownTimeout time.Duration
	logLevel        slog.Level
	logFormat       string
}

// envName returns the environment variable that mirrors flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseConfig reads flags from args and, for flags not given there, from
// the environment through getenv. It returns flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	cfg := config{}
	fs := flag.NewFlagSet("limiterd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cdef := counter.DefaultConfig()
	fs.StringVar(&cfg.httpAddr, "http-addr", "127.0.0.1:8080", "`HOST:PORT` the HTTP API (/check, /metrics, /healthz, /readyz) listens on")
	fs.StringVar(&cfg.rulesPath, "rules", "testdata/rules.yaml", "rule `FILE` (YAML); reloaded on SIGHUP and when the file changes")
	fs.StringVar(&cfg.keyHeader, "key-header", httpapi.DefaultConfig().KeyHeader, "request `HEADER` the key is taken from when /check has no key parameter (X-Forwarded-For: its first address)")
	fs.IntVar(&cfg.maxKeys, "max-keys", cdef.MaxKeys, "most (rule limit, key) pairs tracked at once, which bounds memory; new keys past it are allowed uncounted (metric limiterd_untracked_checks_total)")
	fs.IntVar(&cfg.shards, "shards", cdef.Shards, "independently locked partitions of the key space (a power of two)")
	fs.DurationVar(&cfg.sweepInterval, "sweep-interval", 10*time.Second, "how often keys whose window is empty are dropped")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	level := fs.String("log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `FORMAT`: text or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `limiterd: a clustered sliding-window rate limiter.

Usage: limiterd [flags]

Ask it whether a client may proceed with GET /check?key=K[&rule=R][&hits=N]
(200 allowed, 429 denied). Every flag can also be set by the environment
variable shown after it; a flag on the command line wins.

Flags:
`)
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(fs.Output(), "  -%s %s\n    \t%s (default %q; env %s)\n", f.Name, name, usage, f.DefValue, envName(f.Name))
		})
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment variable %s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return cfg, envErr
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q (limiterd takes only flags; see -h)", fs.Args())
	}
	if err := cfg.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("-log-level: %w", err)
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format must be text or json, got %q", c.logFormat))
	}
	if c.sweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("-sweep-interval must be positive, got %v", c.sweepInterval))
	}
	if c.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("-shutdown-timeout must not be negative, got %v", c.shutdownTimeout))
	}
	if c.rulesPath == "" {
		errs = append(errs, errors.New("-rules must name a file"))
	}
	if c.keyHeader == "" {
		errs = append(errs, errors.New("-key-header must name a header"))
	}
	if err := c.counterConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-max-keys/-shards: %w", err))
	}
	return errors.Join(errs...)
}

func (c config) counterConfig() counter.Config {
	cc := counter.DefaultConfig()
	cc.MaxKeys = c.maxKeys
	cc.Shards = c.shards
	return cc
}

func (c config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
