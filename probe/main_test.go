package probe

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every worker,
// server and connection a test starts must be stopped by its owner.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
