package baseline

import (
	"context"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
)

// Threshold is the number of matching votes SuperEdge needs about a zone of
// checked nodes: (checked+1)/2 in integer division, self and dead nodes
// included in checked.
func Threshold(checked int) int { return (checked + 1) / 2 }

// Votes counts one checked IP's valid votes.
type Votes struct{ Pros, Cons int }

// Tally is SuperEdge's vote over every row: an entry counts when it is not older
// than timeout. An IP is appended to pros (cons) every time its running count
// is at or above the threshold — a strict reproduction, so an IP far above the
// threshold appears many times, and the caller acts on every appearance.
//
// It is a pure function of its inputs so the rule can be tested by table.
func Tally(rows map[string]Row, checked int, now time.Time, timeout time.Duration) (counts map[string]Votes, pros, cons []string) {
	threshold := Threshold(checked)
	counts = map[string]Votes{}
	// Checkers in a fixed order so the lists are deterministic; SuperEdge
	// ranges over a map, which changes the order but not the multiset.
	checkers := make([]string, 0, len(rows))
	for c := range rows {
		checkers = append(checkers, c)
	}
	slices.Sort(checkers)
	for _, c := range checkers {
		row := rows[c]
		ips := make([]string, 0, len(row))
		for ip := range row {
			ips = append(ips, ip)
		}
		slices.Sort(ips)
		for _, ip := range ips {
			d := row[ip]
			if now.After(d.Time.Add(timeout)) {
				continue
			}
			v := counts[ip]
			if d.Normal {
				v.Pros++
				if v.Pros >= threshold {
					pros = append(pros, ip)
				}
			} else {
				v.Cons++
				if v.Cons >= threshold {
					cons = append(cons, ip)
				}
			}
			counts[ip] = v
		}
	}
	return counts, pros, cons
}

// voter applies a tally to the API.
type voter struct {
	cfg     Config
	state   *state
	client  kubernetes.Interface
	metrics *metrics
	log     *slog.Logger
}

// vote runs one round: tally, then write pros and then cons, 16 at a time, as
// SuperEdge does. Errors are logged and the next round tries again.
func (v *voter) vote(ctx context.Context) {
	checked := len(v.state.checkedIPs())
	_, pros, cons := Tally(v.state.allRows(), checked, time.Now(), v.cfg.VoteTimeout)
	workqueue.ParallelizeUntil(ctx, 16, len(pros), func(i int) { v.annotate(ctx, pros[i], Healthy) })
	workqueue.ParallelizeUntil(ctx, 16, len(cons), func(i int) { v.annotate(ctx, cons[i], Unhealthy) })
}

// annotate writes the vote onto the listed copy of the node when it differs;
// for a healthy vote it also lifts the unreachable NoExecute taint.
func (v *voter) annotate(ctx context.Context, ip, value string) {
	node := v.state.nodeByAddr(ip)
	if node == nil {
		v.log.Warn("vote for an address not in the node list", "ip", ip)
		return
	}
	n := node.DeepCopy()
	changed := false
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	if n.Annotations[AnnotationKey] != value {
		n.Annotations[AnnotationKey] = value
		changed = true
	}
	if value == Healthy {
		before := len(n.Spec.Taints)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == UnreachableTaint && t.Effect == corev1.TaintEffectNoExecute
		})
		changed = changed || len(n.Spec.Taints) != before
	}
	if !changed {
		return
	}
	if _, err := v.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		v.metrics.writes.WithLabelValues("error").Inc()
		v.log.Debug("vote update failed", "node", n.Name, "value", value, "err", err)
		return
	}
	v.metrics.writes.WithLabelValues("ok").Inc()
	v.log.Info("vote written", "node", n.Name, "value", value)
}
