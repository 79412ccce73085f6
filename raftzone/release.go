package raftzone

import (
	"sync"

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

// zoneLevels caches the zone's level per applied index of the replica, so
// the leader's intake asks the store once per change rather than per batch.
type zoneLevels struct {
	mu      sync.Mutex
	src     *store.Store
	applied uint64
	known   bool
	level   skew.Level
}

// zoneLevel is the level the zone's formats may use as this member's
// replica knows it: the lowest its members announced (skew.Zone). A replica
// that cannot be read counts as the oldest level this build reads.
func (s *Member) zoneLevel() skew.Level {
	st := s.state()
	applied, _ := st.AppliedIndex()
	s.levels.mu.Lock()
	defer s.levels.mu.Unlock()
	if s.levels.known && s.levels.src == st && s.levels.applied == applied {
		return s.levels.level
	}
	l, err := zoneLevelOf(st, s.level())
	if err != nil {
		return min(skew.Oldest(), s.level())
	}
	if s.levels.known && l != s.levels.level {
		s.log.Info("the zone's protocol level changed", "from", s.levels.level.String(), "to", l.String(),
			"why", "the lowest level any member announces")
	}
	s.levels.src, s.levels.applied, s.levels.known, s.levels.level = st, applied, true, l
	s.metrics.zoneLevel.Set(float64(l))
	return l
}

func zoneLevelOf(st *store.Store, self skew.Level) (skew.Level, error) {
	members, err := st.Members()
	if err != nil {
		return 0, err
	}
	said, err := st.Announcements()
	if err != nil {
		return 0, err
	}
	levels := make([]skew.Level, 0, len(members))
	for _, m := range members {
		levels = append(levels, said[m.Node].Level)
	}
	return skew.Zone(self, levels), nil
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
