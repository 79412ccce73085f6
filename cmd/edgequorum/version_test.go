package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestVersionFlagAndSubcommandAgree(t *testing.T) {
	var a, b, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &a, &errOut); code != 0 {
		t.Fatalf("--version exit %d: %s", code, errOut.String())
	}
	if code := run(context.Background(), []string{"version"}, &b, &errOut); code != 0 {
		t.Fatalf("version exit %d: %s", code, errOut.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "edgequorum v") || !strings.Contains(a.String(), "go1.") {
		t.Fatalf("--version %q, version %q; want the same line with version, revision and Go version", a.String(), b.String())
	}
}
