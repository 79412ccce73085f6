package suite

import (
	"errors"
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
	fields := map[string]bool{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("ValidatePlan joined %T %q, want only *FieldError", e, e)
		}
		fields[fe.Field] = true
	}
	for _, field := range []string{"Sizes", "Kills", "Steady", "Cut"} {
		if !fields[field] {
			t.Errorf("ValidatePlan() = %q, does not name Config.%s", err, field)
		}
	}
}
