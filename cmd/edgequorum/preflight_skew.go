package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// checkReleases reports the releases the agents and the webhook run, read
// from their pods' image tags, against the skew policy (docs/operating.md,
// "Upgrades"): agents of at most two neighbouring releases, a webhook no
// older than any agent. A zone of mixed releases is a roll in progress, a
// warning; a breach of the policy fails.
func checkReleases(ctx context.Context, client kubernetes.Interface, zoneLabel string) []check {
	const what = "releases"
	agents, err := podReleases(ctx, client, agentNamespace, "app.kubernetes.io/name=edgequorum-agent")
	if err != nil {
		return []check{{level: checkWarn, what: what, detail: "agent pods: " + describeErr(err)}}
	}
	webhooks, err := podReleases(ctx, client, webhookNamespace, "app.kubernetes.io/name=edgequorum-webhook")
	if err != nil {
		return []check{{level: checkWarn, what: what, detail: "webhook pods: " + describeErr(err)}}
	}
	if len(agents) == 0 && len(webhooks) == 0 {
		return nil // checkWorkloads already says nothing runs
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: zoneLabel})
	if err != nil {
		return []check{{level: checkWarn, what: what, detail: "nodes: " + describeErr(err)}}
	}
	zoneOf := map[string]string{}
	for _, n := range nodes.Items {
		zoneOf[n.Name] = n.Labels[zoneLabel]
	}

	agentCount, webhookCount := countReleases(agents), countReleases(webhooks)
	c := check{what: what, detail: "agents " + describeCounts(agentCount) + "; webhook " + describeCounts(webhookCount)}
	all := append(slices.Sorted(maps.Keys(agentCount)), slices.Sorted(maps.Keys(webhookCount))...)
	oldest, newest, unknown := span(all)
	switch {
	case unknown != "":
		c.level, c.detail = checkWarn, c.detail+": cannot tell the release of image tag "+unknown
	case !skew.SideBySide(oldest, newest):
		c.level = checkFail
		c.detail += fmt.Sprintf(": %s and %s are more than one release apart, which cannot share a zone or a webhook", oldest, newest)
		c.fix = "upgrade through each release in between, webhook first (docs/operating.md, \"Upgrades\")"
	case len(webhookCount) > 0 && olderWebhook(webhookCount, agentCount):
		c.level = checkFail
		c.detail += ": an agent runs a newer release than the webhook, whose formats the webhook may refuse"
		c.fix = "from the newer release: kubectl apply -f deploy/install/webhook.yaml"
	case len(agentCount) > 1 || len(webhookCount) > 1:
		c.level = checkWarn
		c.detail += ": a roll is in progress" + mixedZones(agents, zoneOf)
		c.fix = "kubectl -n " + agentNamespace + " rollout status daemonset/" + agentDaemonSet
	}
	return []check{c, checkWebhookReads(ctx, client, webhooks)}
}

// checkWebhookReads reports what each webhook replica says it reads
// (zone.WebhookReadsLease): zone leaders write no format newer than the
// lowest. No entry while replicas of a release that writes them run means
// the replicas cannot write it, and leaders keep to the oldest formats.
func checkWebhookReads(ctx context.Context, client kubernetes.Interface, webhooks []podRelease) check {
	c := check{what: "webhook formats"}
	l, err := client.CoordinationV1().Leases(webhookNamespace).Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
	var rs map[string]zone.WebhookReplica
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		c.level, c.detail = checkWarn, "lease "+zone.WebhookReadsLease+": "+describeErr(err)
		return c
	default:
		if rs, err = zone.ParseWebhookReads(l.Annotations); err != nil {
			c.level, c.detail = checkWarn, describeErr(err)
			c.fix = "zone leaders keep to the oldest formats; the webhook's replicas write it anew within 30 s"
			return c
		}
	}
	if len(rs) == 0 {
		c.detail = "no webhook replica says which formats it reads: zone leaders keep to the oldest formats"
		if announcing(webhooks) {
			c.level = checkWarn
			c.fix = "read the webhook's logs; its Role edgequorum-webhook in " + webhookNamespace + " must let it get and update the Lease " + zone.WebhookReadsLease
		}
		return c
	}
	parts := make([]string, 0, len(rs))
	for _, name := range slices.Sorted(maps.Keys(rs)) {
		parts = append(parts, fmt.Sprintf("%s reads %s (%s)", name, rs[name].Level, orDash(rs[name].Release)))
	}
	c.detail = strings.Join(parts, ", ") + fmt.Sprintf("; zone leaders write formats up to %s", zone.WebhookLevel(rs))
	return c
}

// firstAnnouncing is the first release whose webhook replicas say which
// formats they read.
var firstAnnouncing = skew.Release{Major: 0, Minor: 4}

// announcing reports whether a webhook replica runs a release that says
// which formats it reads, or one whose release its tag does not tell.
func announcing(webhooks []podRelease) bool {
	for _, p := range webhooks {
		r, err := skew.ParseRelease(p.release)
		if err != nil || !r.Less(firstAnnouncing) {
			return true
		}
	}
	return false
}

// podRelease is one pod's node and the release its image tag names.
type podRelease struct{ node, release string }

func podReleases(ctx context.Context, client kubernetes.Interface, ns, selector string) ([]podRelease, error) {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []podRelease
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if len(p.Spec.Containers) == 0 {
			continue
		}
		out = append(out, podRelease{node: p.Spec.NodeName, release: imageTag(p.Spec.Containers[0].Image)})
	}
	return out, nil
}

// imageTag is the tag of an image reference, "" if it names none.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		return image[i+1:]
	}
	return ""
}

func countReleases(ps []podRelease) map[string]int {
	m := map[string]int{}
	for _, p := range ps {
		m[p.release]++
	}
	return m
}

func describeCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none running"
	}
	parts := make([]string, 0, len(m))
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s on %d", orDash(r), m[r]))
	}
	return strings.Join(parts, ", ")
}

// span is the oldest and newest release among tags, or the first tag that
// names none.
func span(tags []string) (oldest, newest skew.Release, unknown string) {
	for i, t := range tags {
		r, err := skew.ParseRelease(t)
		if err != nil {
			return oldest, newest, orDash(t)
		}
		if i == 0 || r.Less(oldest) {
			oldest = r
		}
		if i == 0 || newest.Less(r) {
			newest = r
		}
	}
	return oldest, newest, ""
}

// olderWebhook reports whether some webhook replica runs an older release
// than some agent.
func olderWebhook(webhooks, agents map[string]int) bool {
	oldestWebhook, _, _ := span(slices.Sorted(maps.Keys(webhooks)))
	_, newestAgent, _ := span(slices.Sorted(maps.Keys(agents)))
	return len(agents) > 0 && oldestWebhook.Less(newestAgent)
}

// mixedZones names the zones whose agents run more than one release.
func mixedZones(agents []podRelease, zoneOf map[string]string) string {
	by := map[string]map[string]int{}
	for _, p := range agents {
		z, ok := zoneOf[p.node]
		if !ok {
			continue
		}
		if by[z] == nil {
			by[z] = map[string]int{}
		}
		by[z][p.release]++
	}
	var mixed []string
	for _, z := range slices.Sorted(maps.Keys(by)) {
		if len(by[z]) > 1 {
			mixed = append(mixed, fmt.Sprintf("%s (%s)", z, describeCounts(by[z])))
		}
	}
	if len(mixed) == 0 {
		return ""
	}
	return "; zones of mixed releases: " + strings.Join(mixed, "; ")
}
