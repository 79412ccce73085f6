package raftzone

import (
	"net"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// NewPort prepares the zone port cfg describes, for a Member built later
// with it (Deps.Port): the member owns its Raft server ID, so it loads (or,
// on first start, creates) it in cfg.DataDir and hands it to the port, which
// loads the node key. members is the cluster's member list, whose registered
// node keys let nodes that are not pinned yet join. The port's metrics are
// registered with cfg.Registerer.
func NewPort(cfg Config, members zoneport.MemberSource) (*zoneport.Port, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	id, err := loadOrCreateServerID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	return zoneport.New(zoneport.Config{
		DataDir: cfg.DataDir, Node: cfg.Node, ServerID: id, Advertise: cfg.raftAddress(),
		Keys: cfg.Keys, Network: cfg.Network, HandshakeTimeout: cfg.HandshakeTimeout,
		Logger:     cfg.Logger.With("node", cfg.Node, "zone", cfg.Zone),
		Registerer: cfg.Registerer, Announce: cfg.announcement(),
	}, members)
}

// portMember is the Member as its zone port sees it (zoneport.Member).
type portMember struct{ s *Member }

// pinnedStamp changes whenever the pinned members may have: another store
// (a spare's view, or the replica) or another applied index.
type pinnedStamp struct {
	src     *store.Store
	applied uint64
}

func (m portMember) PinnedStamp() any {
	src := m.s.state()
	applied, _ := src.AppliedIndex()
	return pinnedStamp{src: src, applied: applied}
}

func (m portMember) PinnedMembers() (byID, byNode map[string]zone.Member) { return m.s.memberMaps() }

func (m portMember) AdmitRaft(c *zoneport.Conn) (net.Conn, error) { return m.s.guardRaft(c) }
