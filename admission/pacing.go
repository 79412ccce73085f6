package admission

import (
	"context"
	"time"
)

// minPause is the shortest pause pacing makes: shorter sleeps cost more in
// wake-ups than they spread.
const minPause = 2 * time.Millisecond

// spreadOver says how a pass over items spreads its work over spread: a
// pause after every batch of items, the pauses adding up to spread. A pass
// of the webhook's background work (a zone-status pass, the repair loop's
// rescan) over thousands of objects takes a few hundred milliseconds of CPU;
// done at once, it makes the reviews that arrive meanwhile queue behind it
// on a one-core webhook (the p99 of every route rose from a few to 100-200
// ms). No pause when spread is zero or there is nothing to spread.
func spreadOver(items int, spread time.Duration) (batch int, pause time.Duration) {
	if spread <= 0 || items < 2 {
		return 1, 0
	}
	per := spread / time.Duration(items)
	batch = 1
	if per < minPause {
		batch = int((minPause + per - 1) / max(per, 1))
	}
	return batch, per * time.Duration(batch)
}

// pacer pauses a pass every batch items for pause.
type pacer struct {
	batch, done int
	pause       time.Duration
}

// next counts one item done and pauses after each batch; false when ctx
// ends meanwhile.
func (p *pacer) next(ctx context.Context) bool {
	if p.done++; p.pause <= 0 || p.done%p.batch != 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(p.pause):
		return true
	}
}
