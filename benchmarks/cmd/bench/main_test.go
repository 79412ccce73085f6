package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/edgequorum/edgequorum/benchmarks/suite"
)

func TestQuietKlogKeepsErrorsOffStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	var buf bytes.Buffer
	err = quietKlog(&buf)
	klog.Error("watch cancelled")
	klog.Flush()
	os.Stderr = stderr
	w.Close()
	leaked, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaked) > 0 {
		t.Errorf("klog wrote %q to stderr", leaked)
	}
	if !strings.Contains(buf.String(), "watch cancelled") {
		t.Errorf("klog output %q lacks the error line", buf.String())
	}
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	cfg := suite.FullConfig()
	cfg.Kills, cfg.Cut = 0, time.Second
	err := flagErrors(cfg.ValidatePlan())
	if err == nil {
		t.Fatal("a plan with -kills 0 and -cut 1s passed")
	}
	for _, want := range []string{"-kills is 0", "-cut is 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("flagErrors = %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Config.") {
		t.Errorf("flagErrors = %q still names struct fields", err)
	}
	full := suite.FullConfig()
	if flagErrors(full.ValidatePlan()) != nil {
		t.Error("the full profile's plan was rejected")
	}
}
