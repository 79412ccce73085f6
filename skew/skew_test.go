package skew

import (
	"errors"
	"strings"
	"testing"
)

func TestZoneIsTheLowestLevelAnnounced(t *testing.T) {
	for _, tt := range []struct {
		self    Level
		members []Level
		want    Level
	}{
		{Level1, nil, Level1},
		{Level1, []Level{Level1, Level1}, Level1},
		{Level1, []Level{Level1, 2}, Level1},      // a newer member cannot lift the zone above this build
		{2, []Level{2, Level1, 2}, Level1},        // one older member holds it down
		{2, []Level{2, Unannounced, 2}, Oldest()}, // one that has said nothing yet may be of N−1
	} {
		if got := Zone(tt.self, tt.members); got != tt.want {
			t.Errorf("Zone(%v, %v) = %v, want %v", tt.self, tt.members, got, tt.want)
		}
	}
}

func TestAnnouncementBounds(t *testing.T) {
	if err := (Announcement{Release: "v0.3.0", Level: Level1}).Validate(); err != nil {
		t.Errorf("a v0.3.0 announcement: %v", err)
	}
	if err := (Announcement{Release: "v0.4.0-rc.1+build.7", Level: Level1}).Validate(); err != nil {
		t.Errorf("a pre-release with build metadata: %v", err)
	}
	if err := (Announcement{}).Validate(); err != nil {
		t.Errorf("no announcement: %v", err)
	}
	for _, a := range []Announcement{
		{Release: strings.Repeat("v", MaxReleaseLen+1), Level: Level1},
		{Release: "v0.3.0"},
		{Release: "v0.3.0\x1b]0;owned\a", Level: Level1}, // a terminal escape from a stolen box
		{Release: "v0.3.0 (patched)", Level: Level1},
	} {
		if err := a.Validate(); !errors.Is(err, ErrBadAnnouncement) {
			t.Errorf("Validate(%v) = %v, want ErrBadAnnouncement", a, err)
		}
	}
}

func TestNewerSaysWhatToDo(t *testing.T) {
	err := Newer("command type 7", 2, Level1, UpgradeMember)
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("Newer = %v, want ErrTooNew", err)
	}
	for _, part := range []string{"command type 7", "level 2", "reads up to level 1", "upgrade this member"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("%q does not say %q", err, part)
		}
	}
	if err := Newer("command type 200", Unannounced, Level1, UpgradeMember); !strings.Contains(err.Error(), "of a newer level") {
		t.Errorf("an unknown type's level: %v", err)
	}
	if Current() < Oldest() || !Reads(Current(), Oldest()) {
		t.Errorf("this build speaks %v and reads from %v", Current(), Oldest())
	}
}

func TestReleasesSideBySide(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"v0.3.0", "v0.3.2", true},
		{"v0.3.0", "v0.4.0-rc.1", true},
		{"v0.4.1+dirty", "v0.3.0", true},
		{"v0.3.0", "v0.5.0", false},
		{"v0.9.0", "v1.0.0", false},
	} {
		a, err := ParseRelease(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseRelease(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := SideBySide(a, b); got != tt.want {
			t.Errorf("SideBySide(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	for _, bad := range []string{"0.3.0", "v0.3", "vx.3.0", "latest"} {
		if _, err := ParseRelease(bad); err == nil {
			t.Errorf("ParseRelease(%q) succeeded", bad)
		}
	}
}
