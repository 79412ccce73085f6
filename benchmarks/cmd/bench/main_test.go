package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
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
