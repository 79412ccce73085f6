package suite

import (
	"strings"
	"testing"
	"time"
)

func TestProfilesAreValidPlans(t *testing.T) {
	for name, cfg := range map[string]Config{"full": FullConfig(), "quick": QuickConfig()} {
		if err := cfg.ValidatePlan(); err != nil {
			t.Errorf("%s profile: %v", name, err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "WorkDir") {
			t.Errorf("%s profile without directories: Validate() = %v, want the missing WorkDir named", name, err)
		}
	}
}

func TestValidatePlanNamesEveryBadField(t *testing.T) {
	cfg := FullConfig()
	cfg.Sizes = []int{2}
	cfg.Kills = 0
	cfg.Steady = time.Second
	cfg.Cut = VoteTimeout
	err := cfg.ValidatePlan()
	if err == nil {
		t.Fatal("ValidatePlan accepted a plan with four bad fields")
	}
	for _, field := range []string{"Config.Sizes", "Config.Kills", "Config.Steady", "Config.Cut"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("ValidatePlan() = %q, does not name %s", err, field)
		}
	}
}
