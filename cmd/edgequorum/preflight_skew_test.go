package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
