package testcluster

import (
	"os/exec"
	"testing"
)

// RequireCommand returns the path of the program name on $PATH, which install
// says how to get (a Debian package hack/node-packages.sh installs, say).
// When it is missing the test is skipped, or fails if RequireEnv is set, as
// RequireTool does for the bin directory's tools: CI installs it, so a test
// there can never be skipped for want of it by accident. Like RequireTool's
// tools, a program that needs neither the control plane nor root runs in
// EDGEQUORUM_UNIT runs too when it is there.
func RequireCommand(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if required() {
		t.Fatalf("%v (%s); %s is set, so it is required", err, install, RequireEnv)
	}
	t.Skipf("skipping: %v (%s; set %s=1 to make this a failure)", err, install, RequireEnv)
	return ""
}
