package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/exepages"
)

// startupPages gives back the pages of the agent's binary that only its
// start-up touched (internal/exepages): once when Run begins, after every
// package initialiser and the flag parsing ran, and once more when the
// member is first ready, after joining, the first sync and the informers'
// lists. What the agent uses from then on faults back in from the page
// cache; the rest no longer counts in its resident set, and is the first
// memory the kernel reclaims for the workload beside it. In the benchmark
// that was 1.4–1.8 MiB of a member's 16.5 MiB of file pages at N = 3 and 9
// (DESIGN.md, "Start-up pages"): the code it runs every few seconds lies in
// most of the binary's 64 KiB stretches, which the kernel maps whole on a
// fault, so no more goes.
type startupPages struct {
	log      *slog.Logger
	released *prometheus.GaugeVec
}

func newStartupPages(log *slog.Logger, reg prometheus.Registerer) *startupPages {
	p := &startupPages{log: log, released: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "edgequorum_agent_binary_pages_released_bytes",
		Help: "Bytes of the agent binary's pages dropped from its resident set when it started (stage=start) and when it was first ready (stage=ready); the page cache keeps them and what runs faults back in (--release-startup-pages).",
	}, []string{"stage"})}
	reg.MustRegister(p.released)
	return p
}

// release drops the pages once, for stage ("start" or "ready").
func (p *startupPages) release(stage string) {
	st, err := exepages.Release()
	if err != nil {
		p.log.Warn("start-up pages of the binary not released; the agent runs on, holding them (--release-startup-pages=false stops trying)",
			"stage", stage, "err", err)
		return
	}
	p.released.WithLabelValues(stage).Set(float64(st.ResidentBefore - min(st.ResidentAfter, st.ResidentBefore)))
	p.log.Info("start-up pages of the binary released", "stage", stage, "mappings", st.Mappings, "skipped", st.Skipped,
		"residentBeforeKiB", st.ResidentBefore>>10, "residentAfterKiB", st.ResidentAfter>>10)
}

// releaseWhenReady waits for the member's first ready status, checked every
// period, then calls release once; it returns without calling it if ctx ends
// first.
func releaseWhenReady(ctx context.Context, ready func() bool, period time.Duration, release func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	release()
}
