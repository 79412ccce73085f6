package agent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/syncbuf"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

const testZone = "shop-1"

// wiring is one agent built by newAgent on a fake clientset, on an address of
// its own in 127.0.0.0/8.
type wiring struct {
	t      *testing.T
	cfg    Config
	client *fake.Clientset
	ip     string
	logs   *syncbuf.Buffer
}

func newWiring(t *testing.T) *wiring {
	t.Helper()
	a, _ := rand.Int(rand.Reader, big.NewInt(250))
	b, _ := rand.Int(rand.Reader, big.NewInt(250))
	prefix := fmt.Sprintf("127.%d.%d.", a.Int64()+2, b.Int64()+1)
	dir := t.TempDir()
	line, err := zonekeys.GenerateLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "zone.key")
	if err := os.WriteFile(keyFile, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.KeyFile = keyFile
	cfg.Raft.Node = "edge-1"
	cfg.Raft.AdvertiseAddress = prefix + "1"
	cfg.Raft.DataDir = filepath.Join(dir, "data")
	cfg.Raft.RaftHeartbeatTimeout = 500 * time.Millisecond
	cfg.Raft.RaftElectionTimeout = 500 * time.Millisecond
	cfg.Raft.RaftLeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Raft.JoinRetry = 100 * time.Millisecond
	cfg.Raft.ReconcilePeriod = 200 * time.Millisecond
	cfg.StatusAddress = prefix + "1:9471"
	cfg.TargetSyncPeriod = 50 * time.Millisecond
	cfg.ZoneLeaseRenew = 200 * time.Millisecond
	cfg.MemoryLimit = 0
	// Run sets the process's parallelism; the test binary keeps its own.
	cfg.MaxProcs = 0
	w := &wiring{t: t, cfg: cfg, client: fake.NewClientset(), ip: prefix, logs: &syncbuf.Buffer{}}
	// The health check asks who the agent is; the fake answers as an
	// apiserver does, with a user. Without one every check counted the
	// apiserver unreachable for a moment every 2 s, and a member-list
	// settle that ticked in that moment every time (both run every 2 s,
	// so they can lock in step under load) never settled.
	w.client.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.SelfSubjectReview).DeepCopy()
		review.Status.UserInfo.Username = "system:serviceaccount:edgequorum-system:edgequorum-agent"
		return true, review, nil
	})
	w.addNode("edge-1", 1, testZone)
	return w
}

func (w *wiring) addNode(name string, host int, zoneName string) {
	w.t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: w.ip + strconv.Itoa(host)}}},
	}
	if zoneName != "" {
		n.Labels[zone.DefaultZoneLabel] = zoneName
	}
	if _, err := w.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *wiring) build(ctx context.Context) (*Agent, error) {
	log := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.t.Cleanup(func() {
		if w.t.Failed() {
			w.t.Logf("agent log:\n%s", w.logs.String())
		}
	})
	return newAgent(ctx, w.cfg, wrap.Clientset(w.client), log)
}

// start builds and runs the agent; the returned stop cancels it and returns
// what Run returned.
func (w *wiring) start() (*Agent, func() error) {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := w.build(ctx)
	if err != nil {
		cancel()
		w.t.Fatalf("newAgent: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = fmt.Errorf("Run did not return 30 s after its context ended")
			}
		})
		return runErr
	}
	w.t.Cleanup(func() { stop() })
	return a, stop
}

func TestNewNamesTheBadSetting(t *testing.T) {
	cases := []struct {
		name  string
		tweak func(w *wiring)
		want  string
	}{
		{"missing key file", func(w *wiring) { w.cfg.KeyFile = filepath.Join(t.TempDir(), "absent") }, "--key-file"},
		{"key file without keys", func(w *wiring) {
			os.WriteFile(w.cfg.KeyFile, []byte("# nothing here\n"), 0o600)
		}, "--key-file"},
		{"node outside every zone", func(w *wiring) {
			w.cfg.Raft.Node = "edge-9"
			w.addNode("edge-9", 9, "")
		}, "--zone-label"},
		{"bad probe spec", func(w *wiring) {
			w.cfg.Probes = []probe.Spec{{Kind: probe.KindTCP, Weight: 1}} // tcp needs a port
		}, "--probe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWiring(t)
			c.tweak(w)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := w.build(ctx)
			if err == nil {
				t.Fatalf("newAgent built %v; want an error naming %s", a, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %s", err, c.want)
			}
		})
	}
}

// TestNewChecksFlagsFirst: every bad flag is named before New reaches for
// the apiserver (here there is none: no --kubeconfig, not in a cluster).
func TestNewChecksFlagsFirst(t *testing.T) {
	w := newWiring(t)
	w.cfg.ScoreLine = 0
	w.cfg.ZoneLeaseRenew = 0
	w.cfg.ConfirmConnects = 17
	w.cfg.ConfirmGap = 0
	_, err := New(context.Background(), w.cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("New accepted --score-line 0")
	}
	for _, flag := range []string{"--score-line", "--zone-lease-renew", "--confirm-connects 17", "--confirm-gap"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error %q does not name %s", err, flag)
		}
	}
	if strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("error %q went on to the apiserver", err)
	}
}

// TestProbeConfirm: 0 connections turns confirmation off, which the probe
// package spells as a negative count (its zero value means the defaults).
func TestProbeConfirm(t *testing.T) {
	c := DefaultConfig()
	if got := c.ProbeConfirm(); got.Off() || got.Connects != probe.DefaultConfirmConnects || got.Gap != probe.DefaultConfirmGap {
		t.Errorf("defaults: %+v", got)
	}
	c.ConfirmConnects = 0
	if got := c.ProbeConfirm(); !got.Off() {
		t.Errorf("--confirm-connects 0: %+v, want off", got)
	}
}

// TestAgentRunsOneNodeZone follows the wiring end to end on one node: the
// zone member founds the zone and leads it, the API writer renews the zone
// Lease under the term the zone member leads (they share the fence), the
// status server answers, probe targets follow the member list, and Run ends
// cleanly, once.
func TestAgentRunsOneNodeZone(t *testing.T) {
	w := newWiring(t)
	a, stop := w.start()

	var st raftzone.Status
	poll.Until(t, 30*time.Second, "the status server to report edge-1 as leader", func() (bool, string) {
		resp, err := http.Get("http://" + w.cfg.StatusAddress + "/v1/status")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		st = raftzone.Status{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return false, err.Error()
		}
		return st.Leader == "edge-1" && st.Term > 0, fmt.Sprintf("leader %q term %d", st.Leader, st.Term)
	})
	if st.Zone != testZone {
		t.Fatalf("status zone = %q, want %q", st.Zone, testZone)
	}
	// The zone's matrix, from the member itself through the same server.
	var mx raftzone.MatrixView
	poll.Until(t, 30*time.Second, "the status server to serve edge-1's matrix", func() (bool, string) {
		resp, err := http.Get("http://" + w.cfg.StatusAddress + "/v1/status/matrix")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		mx = raftzone.MatrixView{}
		if err := json.NewDecoder(resp.Body).Decode(&mx); err != nil {
			return false, fmt.Sprintf("%s: %v", resp.Status, err)
		}
		return len(mx.Members) == 1, fmt.Sprintf("%s: members %v", resp.Status, mx.Members)
	})
	if mx.Zone != testZone || mx.Node != "edge-1" || mx.Leader != "edge-1" || mx.Members[0] != "edge-1" || mx.Rows[0].Cells[0].State != raftzone.CellNone {
		t.Fatalf("matrix of a zone of one = %+v, want edge-1's view of %s, leading, with one cell of none", mx, testZone)
	}

	leases := w.client.CoordinationV1().Leases(w.cfg.LeaseNamespace)
	poll.Until(t, 30*time.Second, "the zone Lease held by edge-1 under the leader's term", func() (bool, string) {
		l, err := leases.Get(context.Background(), zone.LeaseName(testZone), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		term := l.Annotations[zone.LeaseTermAnnotation]
		want := strconv.FormatUint(a.zone.Term(), 10)
		return holder == "edge-1" && term == want, fmt.Sprintf("holder %q term %s, leader term %s", holder, term, want)
	})

	w.addNode("edge-2", 2, testZone)
	poll.UntilTrue(t, 30*time.Second, "edge-2 among the probe targets", func() bool {
		_, ok := a.prober.Statuses()["edge-2"]
		return ok
	})
	if _, ok := a.prober.Statuses()["edge-1"]; ok {
		t.Fatal("the agent probes its own node")
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("second Run = %v, want an error saying Run ran twice", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

// TestNewDuringCloudOutageUsesCachedZone: an agent restarted while the
// apiserver is unreachable builds from the zone its data dir remembers.
func TestNewDuringCloudOutageUsesCachedZone(t *testing.T) {
	w := newWiring(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.build(ctx); err != nil {
		t.Fatal(err)
	}
	w.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	a, err := w.build(ctx)
	if err != nil {
		t.Fatalf("newAgent during the outage: %v", err)
	}
	if got := a.cfg.Raft.Zone; got != testZone {
		t.Fatalf("zone = %q, want the cached %q", got, testZone)
	}
}

// TestAgentRunFailsOnBusyStatusAddress: a port conflict is a start-up error
// naming the flag, not a hang.
func TestAgentRunFailsOnBusyStatusAddress(t *testing.T) {
	w := newWiring(t)
	w.cfg.StatusAddress = w.ip + "1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := w.build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := (&net.ListenConfig{}).Listen(ctx, "tcp", w.ip+"1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	a.cfg.StatusAddress = held.Addr().String()
	err = a.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "--status-address") {
		t.Fatalf("Run = %v, want an error naming --status-address", err)
	}
}
