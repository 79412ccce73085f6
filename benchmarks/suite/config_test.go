package suite

import (
	"errors"
	"slices"
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

func TestValidatePlanNamesBadLossFields(t *testing.T) {
	cfg := FullConfig()
	cfg.LossPercents = []int{5, 100}
	cfg.LossWindow = time.Second
	cfg.LossKills = -1
	cfg.OnlyLossy, cfg.OnlyDefaults = true, true
	err := cfg.ValidatePlan()
	if err == nil {
		t.Fatal("ValidatePlan accepted bad loss fields")
	}
	fields := map[string]string{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("ValidatePlan joined %T %q, want only *FieldError", e, e)
		}
		fields[fe.Field] = fe.Msg
	}
	for field, want := range map[string]string{"LossPercents": "has 100", "LossWindow": "is 1s", "LossKills": "is -1", "OnlyLossy": "OnlyDefaults"} {
		if !strings.Contains(fields[field], want) {
			t.Errorf("ValidatePlan() = %q: Config.%s message %q lacks %q", err, field, fields[field], want)
		}
	}

	cfg = QuickConfig()
	cfg.OnlyLossy, cfg.LossSizes = true, []int{17}
	if err := cfg.ValidatePlan(); err == nil || !strings.Contains(err.Error(), "OnlyLossy is set but no size") {
		t.Errorf("a lossy-only run with no size in LossSizes: ValidatePlan() = %v", err)
	}
	cfg.LossPercents = nil
	if err := cfg.ValidatePlan(); err == nil || !strings.Contains(err.Error(), "LossPercents is empty") {
		t.Errorf("a lossy-only run with no loss levels: ValidatePlan() = %v", err)
	}
}

func TestValidatePlanNamesBadLiveFields(t *testing.T) {
	cfg := FullConfig()
	cfg.LiveSpares = -1
	cfg.OnlyLive, cfg.OnlyLossy = true, true
	err := cfg.ValidatePlan()
	for _, want := range []string{"LiveSpares is -1", "OnlyLive is set with another"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidatePlan() = %v, want it to say %q", err, want)
		}
	}
	cfg = FullConfig()
	cfg.OnlyLive, cfg.Sizes, cfg.LiveSizes = true, []int{5, 9}, []int{5, 129}
	if err := cfg.ValidatePlan(); err == nil || !strings.Contains(err.Error(), "OnlyLive is set but no size") {
		t.Errorf("a live-only run with no size above the servers in LiveSizes: ValidatePlan() = %v", err)
	}
	cfg.LiveSizes = []int{9}
	if err := cfg.ValidatePlan(); err != nil {
		t.Errorf("a live-only run at 9 (7 servers, 1 spare, 1 stand-in): %v", err)
	}
}

// TestOnlyOursRunsNoBaselinePhase: a run of edgequorum alone has no lossy-link
// phase, whose figures pair both systems, and cannot be combined with
// another Only* run.
func TestOnlyOursRunsNoBaselinePhase(t *testing.T) {
	cfg := FullConfig()
	cfg.OnlyOurs = true
	if err := cfg.ValidatePlan(); err != nil {
		t.Fatalf("-only-ours alone: %v", err)
	}
	for _, n := range cfg.Sizes {
		if cfg.lossAt(n) {
			t.Errorf("lossy-link phase at N=%d in a run of edgequorum alone", n)
		}
	}
	cfg.OnlyLive = true
	if err := cfg.ValidatePlan(); err == nil || !strings.Contains(err.Error(), "OnlyOurs is set with another") {
		t.Errorf("-only-ours with -only-live: %v", err)
	}
}

// TestDetectConfig: `make bench-detect` is a valid plan of formation and
// kills only, 100 deaths of each kind at every size, dilated or not.
func TestDetectConfig(t *testing.T) {
	cfg := DetectConfig()
	if err := cfg.ValidatePlan(); err != nil {
		t.Fatalf("detect profile: %v", err)
	}
	if !slices.Equal(cfg.Sizes, []int{3, 9, 33}) || cfg.DetectKills != 100 {
		t.Errorf("detect profile runs %d deaths of each kind at %v, want 100 at [3 9 33]", cfg.DetectKills, cfg.Sizes)
	}
	for _, k := range []float64{1, 4, 16} {
		if got := cfg.killsFor(k); got != 200 {
			t.Errorf("detect profile at ×%g: %d kills, want 200 (100 reset, 100 silent)", k, got)
		}
	}
	for _, n := range []int{3, 9, 33, 129} {
		if cfg.lossAt(n) || cfg.liveAt(n) {
			t.Errorf("detect profile runs another phase at N=%d", n)
		}
	}
	full := FullConfig()
	for k, want := range map[float64]int{1: 4, 4: 2, 16: 2} {
		if got := full.killsFor(k); got != want {
			t.Errorf("full profile at ×%g: %d kills, want %d", k, got, want)
		}
	}
}

func TestValidatePlanNamesBadDetectFields(t *testing.T) {
	fields := func(err error) map[string]string {
		out := map[string]string{}
		if err == nil {
			return out
		}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *FieldError
			if errors.As(e, &fe) {
				out[fe.Field] += fe.Msg + ";"
			}
		}
		return out
	}
	cfg := DetectConfig()
	cfg.DetectKills = 0
	if f := fields(cfg.ValidatePlan()); !strings.Contains(f["DetectKills"], "is 0") {
		t.Errorf("DetectKills 0: %v", f)
	}
	for name, change := range map[string]func(*Config){
		"lossy":    func(c *Config) { c.LossPercents = []int{5} },
		"live":     func(c *Config) { c.LiveSizes = []int{129} },
		"defaults": func(c *Config) { c.DefaultsKills = 1 },
	} {
		cfg := DetectConfig()
		change(&cfg)
		if f := fields(cfg.ValidatePlan()); !strings.Contains(f["DetectOnly"], "formation and the kill phase only") {
			t.Errorf("detect with a %s phase: %v", name, f)
		}
	}
	cfg = DetectConfig()
	cfg.OnlyOurs = true
	if f := fields(cfg.ValidatePlan()); !strings.Contains(f["DetectOnly"], "Only* run") {
		t.Errorf("detect with -only-ours: %v", f)
	}
	// Outside a detection run the count is not looked at.
	cfg = FullConfig()
	cfg.DetectKills = -1
	if err := cfg.ValidatePlan(); err != nil {
		t.Errorf("a full run with an unused DetectKills: %v", err)
	}
}

// TestAgentArgsAreFlags: extra agent flags must be flags, and the report
// names them.
func TestAgentArgsAreFlags(t *testing.T) {
	cfg := FullConfig()
	cfg.AgentArgs = []string{"--memory-limit=48Mi", "48Mi"}
	if err := cfg.ValidatePlan(); err == nil || !strings.Contains(err.Error(), `AgentArgs "48Mi" is not a flag`) {
		t.Fatalf("ValidatePlan() = %v, want it to name the stray argument", err)
	}
	cfg.AgentArgs = cfg.AgentArgs[:1]
	if err := cfg.ValidatePlan(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, &Report{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "every edgequorum agent also ran with `--memory-limit=48Mi`") {
		t.Fatalf("the report does not name the agents' extra flags:\n%.600s", b.String())
	}
}
