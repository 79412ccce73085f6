package main

import (
	"flag"
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

type logFlags struct {
	level  string
	format string
}

func addLogFlags(fs *flag.FlagSet) *logFlags {
	l := &logFlags{}
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	return l
}

// logger builds the process logger and routes client-go's klog into it, so the
// agent and webhook write one stream in one format.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usageErrorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch l.format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usageErrorf("--log-format %q: want text or json", l.format)
	}
	log := slog.New(h)
	klog.SetSlogLogger(log.With("component", "client-go"))
	slog.SetDefault(log)
	return log, nil
}
