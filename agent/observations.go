package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// probeObservations adapts a probe.Manager to raftzone.Observations.
type probeObservations struct{ m *probe.Manager }

func (o probeObservations) Results() []zone.Result {
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

func (o probeObservations) Changes() <-chan struct{} { return o.m.Changes() }

// Down lists the peers every probe fails on, each past its failure threshold:
// the kubelet port and the agent alike, not a low score.
func (o probeObservations) Down() []string {
	var out []string
	for name, st := range o.m.Statuses() {
		if !st.Known || len(st.Probes) == 0 {
			continue
		}
		down := true
		for _, p := range st.Probes {
			down = down && p.State == probe.Failure
		}
		if down {
			out = append(out, name)
		}
	}
	return out
}

// peerSource is who this member should probe; *raftzone.Member implements it
// with the rule joins use too.
type peerSource interface {
	Peers() []zoneport.Candidate
	Started() <-chan struct{}
}

// probeTargets is what syncTargets drives; *probe.Manager implements it.
type probeTargets interface {
	AddTarget(name string, t probe.Target)
	RemoveTarget(name string)
}

// syncTargets keeps the probe targets equal to the zone's other members once
// the zone member has opened its state (so a restart during a cloud outage
// probes the replicated member list at once), then every period, in a slot
// of the zone's grid. keep, when not nil, narrows the targets to the peers it
// accepts.
func syncTargets(ctx context.Context, m probeTargets, src peerSource, zone string, period time.Duration, keep func(node string) bool, log *slog.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-src.Started():
	}
	current := map[string]probe.Target{}
	// In a slot of the zone's grid, to share a wakeup with the probes.
	t := gridtick.New(clock.RealClock{}, slots.ZoneGrid(zone), period, rand.Float64())
	defer t.Stop()
	for {
		want := map[string]probe.Target{}
		for _, p := range src.Peers() {
			if keep != nil && !keep(p.Node) {
				continue
			}
			want[p.Node] = probe.Target{Host: p.ProbeAddress, KubeletPort: p.KubeletPort}
		}
		for name, tg := range want {
			if current[name] != tg {
				m.AddTarget(name, tg)
				log.Info("probing peer", "peer", name, "host", tg.Host, "kubeletPort", tg.KubeletPort)
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
		case <-t.C():
			t.Next()
		}
	}
}
