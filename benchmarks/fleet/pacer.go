package fleet

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// pacer runs many periodic jobs on a few workers, each at its own phase, so
// that thirty thousand simulated kubelets cost a heap and a handful of
// goroutines rather than a goroutine and a timer each. A job that comes due
// while the workers are busy runs late, and its lateness is recorded: a
// run whose jobs ran late did not play the fleet it says, and says so.
type pacer struct {
	mu   sync.Mutex
	jobs jobHeap
	wake chan struct{}

	lateMu sync.Mutex
	late   time.Duration // the latest any job ran
}

type job struct {
	due   time.Time
	every time.Duration
	run   func(context.Context)
	// stop ends the job when it returns true; nil runs it forever.
	stop func() bool
}

type jobHeap []*job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *jobHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	*h = old[:len(old)-1]
	return j
}

func newPacer() *pacer { return &pacer{wake: make(chan struct{}, 1)} }

// every runs fn every period from first on, until stop (if any) says so.
func (p *pacer) every(first time.Time, period time.Duration, fn func(context.Context), stop func() bool) {
	p.mu.Lock()
	heap.Push(&p.jobs, &job{due: first, every: period, run: fn, stop: stop})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// lateness is the most any job ran after it was due, and resets it.
func (p *pacer) lateness() time.Duration {
	p.lateMu.Lock()
	defer p.lateMu.Unlock()
	l := p.late
	p.late = 0
	return l
}

// run dispatches due jobs to workers until ctx ends.
func (p *pacer) run(ctx context.Context, workers int) {
	due := make(chan *job)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range due {
				if late := time.Since(j.due); late > 0 {
					p.lateMu.Lock()
					p.late = max(p.late, late)
					p.lateMu.Unlock()
				}
				j.run(ctx)
				if j.stop != nil && j.stop() {
					continue
				}
				// Keep the phase; a job that fell a whole period behind
				// skips the beats it missed.
				next := j.due.Add(j.every)
				if now := time.Now(); next.Before(now) {
					next = now
				}
				j.due = next
				p.mu.Lock()
				heap.Push(&p.jobs, j)
				p.mu.Unlock()
				select {
				case p.wake <- struct{}{}:
				default:
				}
			}
		})
	}
	defer func() {
		close(due)
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		var next *job
		wait := time.Hour
		if len(p.jobs) > 0 {
			if d := time.Until(p.jobs[0].due); d <= 0 {
				next = heap.Pop(&p.jobs).(*job)
			} else {
				wait = d
			}
		}
		p.mu.Unlock()
		if next != nil {
			select {
			case due <- next:
			case <-ctx.Done():
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}
