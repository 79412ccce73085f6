package admission

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgequorum/edgequorum/zone"
)

// TestMemorySurvivesARestart: the repair loop's leader keeps the last verdict
// the webhook honoured for each node in the cloud, so a replica that starts
// while a node's annotation is forged judges the node by that verdict, not by
// the forgery; without the memory it could not.
func TestMemorySurvivesARestart(t *testing.T) {
	ctx := context.Background()
	lease := withZoneLeaseDuration(24*time.Hour, testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow))[0]
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
	}, testNode("n1", "z", zone.Healthy, corev1.ConditionTrue), testNode("n2", "z", zone.Healthy, corev1.ConditionUnknown),
		testNode("n3", "z", zone.Healthy, corev1.ConditionTrue), lease)
	env.start(t)
	honoured := verdictJSON("n2", zone.Healthy, "z")
	stepUntil(t, env, "n2's verdict in the webhook's memory", func() bool {
		cm, err := env.client.CoreV1().ConfigMaps(DefaultNamespace).Get(ctx, memoryName("z"), metav1.GetOptions{})
		return err == nil && cm.Data["n2"] == honoured && cm.Labels[MemoryLabel] == "true" &&
			counter(t, env.w.metrics.memoryWrites.WithLabelValues(memoryWritten)) > 0
	})
	env.clock.Step(3 * memoryFlushPeriod) // nothing changed: nothing written again
	if n := counter(t, env.w.metrics.memoryWrites.WithLabelValues(memoryWritten)); n != 1 {
		t.Errorf("memory_writes_total{ok} = %v, want 1 (one zone, written once)", n)
	}

	// Any agent token may write a Node's verdict: n2's is now an unsigned
	// unhealthy one.
	forged, err := json.Marshal(zone.Annotation{State: zone.Unhealthy, Zone: "z", Term: testTerm + 1, Leader: "n1", At: testNow, Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	n2, err := env.client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n2.Annotations[zone.AnnotationKey] = string(forged)
	if _, err := env.client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A replica that starts now, over the cluster as it is.
	restart := func(withMemory bool) Decision {
		t.Helper()
		objs := []runtime.Object{lease}
		nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range nodes.Items {
			objs = append(objs, &nodes.Items[i])
		}
		if withMemory {
			cms, err := env.client.CoreV1().ConfigMaps(DefaultNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range cms.Items {
				objs = append(objs, &cms.Items[i])
			}
		}
		fresh := newWebhook(t, func(c *Config) { c.MaxZoneLeaseDuration = 24 * time.Hour }, objs...)
		stop := fresh.start(t)
		defer stop()
		dec, _, err := fresh.w.decider.DecideNode("n2")
		if err != nil {
			t.Fatal(err)
		}
		return dec
	}
	if dec := restart(true); !dec.Vouched || dec.Refused != ReasonUnsigned {
		t.Errorf("a replica started during the forgery, with the memory: %+v, want vouched by the remembered verdict, the forgery refused as %s", dec, ReasonUnsigned)
	}
	if dec := restart(false); dec.Vouched {
		t.Errorf("a replica started during the forgery, without the memory: %+v; the test cannot tell the memory's work", dec)
	}
}
