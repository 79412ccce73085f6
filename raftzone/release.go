package raftzone

import (
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/store"
)

// The version-skew policy in a member (package skew, DESIGN.md "Versions"):
// every report announces this member's release and level; the leader writes
// each command in a format of the zone's level, the lowest level any member
// announced; a replica skips an entry it cannot read whole and counts it.

// level is the protocol level this member speaks: skew.Current(), or the
// level a test gave it to stand in for another release.
func (s *Member) level() skew.Level { return s.cfg.level() }

// announcement is what this member says of itself in every report and
// handshake.
func (s *Member) announcement() skew.Announcement { return s.cfg.announcement() }

func (c *Config) level() skew.Level {
	if c.Level != skew.Unannounced {
		return c.Level
	}
	return skew.Current()
}

func (c *Config) announcement() skew.Announcement {
	release := c.Release
	if release == "" {
		release = buildinfo.Version()
	}
	return skew.Announcement{Release: release, Level: c.level()}
}

// zoneLevel is the level the zone's formats may use as this member's
// replica knows it: the lowest its members announced (skew.Zone). The
// members come from memberMaps, decoded once per applied index; their
// announcements are a few bytes each. A replica that cannot be read counts
// as the oldest level this build reads.
func (s *Member) zoneLevel() skew.Level {
	_, byNode := s.memberMaps()
	said, err := s.state().Announcements()
	if byNode == nil || err != nil {
		return min(skew.Oldest(), s.level())
	}
	levels := make([]skew.Level, 0, len(byNode))
	for node := range byNode {
		levels = append(levels, said[node].Level)
	}
	l := skew.Zone(s.level(), levels)
	if prev := skew.Level(s.lastZoneLevel.Swap(uint32(l))); prev != skew.Unannounced && prev != l {
		s.log.Info("the zone's protocol level changed", "from", prev.String(), "to", l.String(),
			"why", "the lowest level any member announces")
	}
	s.metrics.zoneLevel.Set(float64(l))
	if s.leadership != nil {
		s.leadership.zoneLevel.Store(uint32(l))
	}
	return l
}

// encode encodes a command for the zone as it stands: in a format every
// member reads.
func (s *Member) encode(c store.Command) ([]byte, error) {
	return store.Encode(c, s.zoneLevel())
}

// dropMigrationBackups removes the copies the stores kept of files they
// migrated to this release's schema, once this member has started cleanly
// on them: its first report is committed by the zone. Until then, they are
// how an operator rolls back (docs/operating.md, "Upgrades").
func (s *Member) dropMigrationBackups() {
	for _, st := range []*store.Store{s.store, s.viewStore} {
		if st == nil {
			continue
		}
		baks := st.MigrationBackups()
		if len(baks) == 0 {
			continue
		}
		if err := st.DropMigrationBackups(); err != nil {
			s.log.Warn("could not remove the copy kept before migrating the data dir", "err", err)
			continue
		}
		s.log.Info("started cleanly on the migrated data dir; removed the copy kept for a rollback", "copies", baks)
	}
}
