package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// probeObservations adapts a probe.Manager to raftzone.Observations.
type probeObservations struct{ m *probe.Manager }

func (o *probeObservations) Results() []zone.Result {
	var out []zone.Result
	for name, st := range o.m.Statuses() {
		if !st.Known {
			continue
		}
		out = append(out, zone.Result{Peer: name, OK: st.OK, Score: st.Score, Latency: st.Latency})
	}
	zone.SortResults(out)
	return out
}

func (o *probeObservations) Changes() <-chan struct{} { return o.m.Changes() }

// syncTargets keeps the probe targets equal to the zone's members (from the
// member list, and from the replicated list while the cloud is away), minus
// ourselves.
func syncTargets(ctx context.Context, self string, m *probe.Manager, src raftzone.MemberSource, st func() *store.Store, period time.Duration, log *slog.Logger) {
	current := map[string]string{}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		want := map[string]string{}
		if cands, ok := src.Candidates(); ok {
			for _, c := range cands {
				want[c.Node] = c.ProbeAddress
			}
		} else if s := st(); s != nil {
			if ms, err := s.Members(); err == nil {
				for _, mem := range ms {
					want[mem.Node] = mem.ProbeAddress
				}
			}
		}
		delete(want, self)
		for name, host := range want {
			if current[name] != host {
				m.AddTarget(name, host)
				log.Info("probing peer", "peer", name, "host", host)
			}
		}
		for name := range current {
			if _, ok := want[name]; !ok {
				m.RemoveTarget(name)
				log.Info("stopped probing peer", "peer", name)
			}
		}
		current = want
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
