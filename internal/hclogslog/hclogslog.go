// Package hclogslog routes hashicorp/raft's hclog output into a slog logger,
// so that an agent has one log stream with one format. It owns the adapter
// and nothing else.
package hclogslog

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter routes hashicorp/raft's hclog output into our slog logger, so an
// agent has one log stream with one format. Levels map one to one (Trace and
// Debug both to slog's Debug), so all of Raft's Info lines are logged at Info.
// Lines below the adapter's own level (Info; nothing calls SetLevel) are
// dropped before they reach slog: Raft's Debug and Trace lines stay out of the
// log even when the slog handler is at Debug. The standard logger Raft may ask
// for writes at Info, whatever the line's level.
type hclogAdapter struct {
	log   *slog.Logger
	name  string
	args  []any
	level hclog.Level
}

// New returns an hclog.Logger that writes to l under component=raft, at Info
// and above.
func New(l *slog.Logger) hclog.Logger {
	return &hclogAdapter{log: l.With("component", "raft"), level: hclog.Info}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	if level < h.level {
		return
	}
	var sl slog.Level
	switch level {
	case hclog.Trace, hclog.Debug:
		sl = slog.LevelDebug
	case hclog.Info:
		sl = slog.LevelInfo
	case hclog.Warn:
		sl = slog.LevelWarn
	default:
		sl = slog.LevelError
	}
	all := append(append([]any{}, h.args...), args...)
	h.log.Log(context.Background(), sl, msg, all...)
}

func (h *hclogAdapter) Trace(msg string, args ...interface{}) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...interface{}) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...interface{})  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...interface{})  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...interface{}) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) IsTrace() bool                         { return h.level <= hclog.Trace }
func (h *hclogAdapter) IsDebug() bool                         { return h.level <= hclog.Debug }
func (h *hclogAdapter) IsInfo() bool                          { return h.level <= hclog.Info }
func (h *hclogAdapter) IsWarn() bool                          { return h.level <= hclog.Warn }
func (h *hclogAdapter) IsError() bool                         { return h.level <= hclog.Error }
func (h *hclogAdapter) ImpliedArgs() []interface{}            { return h.args }
func (h *hclogAdapter) Name() string                          { return h.name }
func (h *hclogAdapter) SetLevel(level hclog.Level)            { h.level = level }
func (h *hclogAdapter) GetLevel() hclog.Level                 { return h.level }

func (h *hclogAdapter) With(args ...interface{}) hclog.Logger {
	c := *h
	c.args = append(append([]any{}, h.args...), args...)
	return &c
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	c.log = h.log.With("logger", name)
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.log = h.log.With("logger", name)
	return &c
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.log.Handler(), slog.LevelInfo)
}

func (h *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(opts).Writer()
}
