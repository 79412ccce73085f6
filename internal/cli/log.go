package cli

import (
	"flag"
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

// LogFlags are --log-level and --log-format, the same on every subcommand
// that runs a server.
type LogFlags struct {
	level  string
	format string
}

// AddLogFlags defines the log flags on fs.
func AddLogFlags(fs *flag.FlagSet) *LogFlags {
	l := &LogFlags{}
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
	return l
}

// Logger builds the process logger and routes client-go's klog into it, so
// the agent and webhook write one stream in one format.
func (l *LogFlags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, Usagef("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch l.format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, Usagef("--log-format %q: want text or json", l.format)
	}
	log := slog.New(h)
	klog.SetSlogLogger(log.With("component", "client-go"))
	slog.SetDefault(log)
	return log, nil
}
