package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/edgequorum/edgequorum/internal/memlimit"
)

func TestExit(t *testing.T) {
	for _, tc := range []struct {
		err     error
		code    int
		printed string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{ErrFlagParse, 2, ""}, // the flag package printed it
		{Usagef("--x %q: bad", "y"), 2, `edgequorum agent: --x "y": bad`},
		{errors.New("boom"), 1, "edgequorum agent: boom"},
	} {
		var out bytes.Buffer
		if got := Exit("agent", tc.err, &out); got != tc.code || strings.TrimSpace(out.String()) != tc.printed {
			t.Errorf("Exit(%v) = %d, printed %q; want %d, %q", tc.err, got, out.String(), tc.code, tc.printed)
		}
	}
}

func TestParseFlagsRefusesStrayArguments(t *testing.T) {
	fs := NewFlagSet("agent", "usage", io.Discard)
	fs.String("node-name", "", "")
	err := ParseFlags(fs, []string{"--node-name", "a", "node-b"})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `"node-b"`) {
		t.Fatalf("ParseFlags with a stray argument: %v, want a usage error naming it", err)
	}
	if err := ParseFlags(NewFlagSet("agent", "usage", io.Discard), []string{"--nope"}); !errors.Is(err, ErrFlagParse) {
		t.Fatalf("ParseFlags with an unknown flag: %v, want ErrFlagParse", err)
	}
}

func TestMemoryLimitFlag(t *testing.T) {
	var v int64
	f := MemoryLimitFlag{V: &v}
	for in, want := range map[string]int64{"auto": memlimit.Auto, "96Mi": 96 << 20, "0": 0, "1G": 1e9} {
		if err := f.Set(in); err != nil || v != want {
			t.Errorf("Set(%q) = %v, value %d; want %d", in, err, v, want)
		}
	}
	if err := f.Set("lots"); err == nil {
		t.Error("Set(lots) accepted")
	}
	v = memlimit.Auto
	if f.String() != "auto" {
		t.Errorf("String() = %q, want auto", f.String())
	}
}

func TestLogFlagsNameTheBadFlag(t *testing.T) {
	fs := NewFlagSet("agent", "usage", io.Discard)
	l := AddLogFlags(fs)
	if err := ParseFlags(fs, []string{"--log-format", "xml"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Logger(io.Discard); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Fatalf("Logger with --log-format xml: %v, want an error naming the flag", err)
	}
}
