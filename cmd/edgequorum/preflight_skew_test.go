package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// TestPreflightReportsReleaseSkew reads the releases from the pods' image
// tags: one release everywhere is ok, a roll in progress names its mixed
// zones, and the two breaches of the policy fail with what to do.
func TestPreflightReportsReleaseSkew(t *testing.T) {
	cluster := func(webhook []string, agents map[string]string) []runtime.Object {
		var objs []runtime.Object
		for i, v := range webhook {
			objs = append(objs, testPod(webhookNamespace, fmt.Sprintf("webhook-%d", i), "edgequorum-webhook", "", v))
		}
		for node, v := range agents {
			z := "site-a"
			if strings.HasPrefix(node, "b") {
				z = "site-b"
			}
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{zone.DefaultZoneLabel: z}}},
				testPod(agentNamespace, "agent-"+node, "edgequorum-agent", node, v))
		}
		return objs
	}
	for _, tt := range []struct {
		name    string
		webhook []string
		agents  map[string]string
		want    string
	}{
		{"one release", []string{"v0.3.0", "v0.3.0"}, map[string]string{"a1": "v0.3.0", "a2": "v0.3.0", "b1": "v0.3.0"},
			"[ok  ] releases: agents v0.3.0 on 3; webhook v0.3.0 on 2"},
		{"a roll, webhook first", []string{"v0.4.0", "v0.4.0"}, map[string]string{"a1": "v0.4.0", "a2": "v0.3.0", "b1": "v0.3.0"},
			"[warn] releases: agents v0.3.0 on 2, v0.4.0 on 1; webhook v0.4.0 on 2: a roll is in progress; zones of mixed releases: site-a (v0.3.0 on 1, v0.4.0 on 1)"},
		{"agents before the webhook", []string{"v0.3.0", "v0.4.0"}, map[string]string{"a1": "v0.4.0", "a2": "v0.4.0"},
			"[FAIL] releases: agents v0.4.0 on 2; webhook v0.3.0 on 1, v0.4.0 on 1: an agent runs a newer release than the webhook"},
		{"two releases apart", []string{"v0.5.0"}, map[string]string{"a1": "v0.3.0", "a2": "v0.5.0"},
			"v0.3 and v0.5 are more than one release apart"},
		{"an untagged image", []string{"v0.3.0"}, map[string]string{"a1": "sha"},
			"[warn] releases"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := report(checkReleases(context.Background(), fakeCluster(t, "36", cluster(tt.webhook, tt.agents)...), zone.DefaultZoneLabel))
			if !strings.Contains(out, tt.want) {
				t.Errorf("preflight says\n%s\nwant %q", out, tt.want)
			}
		})
	}
}

func testPod(ns, name, app, node, tag string) *corev1.Pod {
	image := "ghcr.io/edgequorum/edgequorum:" + tag
	if tag == "sha" {
		image = "ghcr.io/edgequorum/edgequorum@sha256:0000"
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/name": app}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// TestPreflightShowsWhatTheWebhookReads: each replica's entry in the
// webhook's reads Lease, and the level zone leaders write up to; none at all
// from a webhook that should have written one is a warning.
func TestPreflightShowsWhatTheWebhookReads(t *testing.T) {
	reads := func(rs map[string]zone.WebhookReplica) runtime.Object {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.WebhookReadsLease, Namespace: webhookNamespace,
			Annotations: map[string]string{}}}
		if err := zone.SetWebhookReads(l.Annotations, rs); err != nil {
			t.Fatal(err)
		}
		return l
	}
	webhook := func(v string) runtime.Object {
		return testPod(webhookNamespace, "webhook-"+v, "edgequorum-webhook", "", v)
	}
	for _, tt := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"a webhook of the release before entries", []runtime.Object{webhook("v0.3.0")},
			"[ok  ] webhook formats: no webhook replica says which formats it reads: zone leaders keep to the oldest formats"},
		{"a webhook that cannot write its entry", []runtime.Object{webhook("v0.4.0")},
			"[warn] webhook formats: no webhook replica says which formats it reads"},
		{"two replicas in a roll", []runtime.Object{webhook("v0.4.0"), reads(map[string]zone.WebhookReplica{
			"webhook-b": {Level: skew.Level1 + 1, Release: "v0.5.0"}, "webhook-a": {Level: skew.Level1, Release: "v0.4.0"}})},
			"[ok  ] webhook formats: webhook-a reads level 1 (v0.4.0), webhook-b reads level 2 (v0.5.0); zone leaders write formats up to level 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := report([]check{checkWebhookReads(context.Background(), fakeCluster(t, "36", tt.objs...), mustPodReleases(t, tt.objs))})
			if !strings.Contains(out, tt.want) {
				t.Errorf("preflight says\n%s\nwant %q", out, tt.want)
			}
		})
	}
}

func mustPodReleases(t *testing.T, objs []runtime.Object) []podRelease {
	t.Helper()
	var out []podRelease
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, podRelease{node: p.Spec.NodeName, release: imageTag(p.Spec.Containers[0].Image)})
		}
	}
	return out
}
