// Package shipped runs what an operator installs, as shipped: the images `make
// image` builds, imported into a real containerd, and deploy/install/*.yaml
// applied unchanged, under a real kubelet on the test control plane.
package shipped

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/agent"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/realnode"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

func TestMain(m *testing.M) { os.Exit(realnode.RunInNamespace(m)) }

const (
	zoneName      = "site-a"
	realNode      = "site-a-real"
	agentNS       = "edgequorum-system"
	webhookNS     = "edgequorum-webhook"
	agentSelector = "app.kubernetes.io/name=edgequorum-agent"
	// containerMemory is the DaemonSet's memory limit, 128Mi, of which
	// --memory-limit=auto gives the Go runtime 90 %.
	containerMemory = 128 << 20
)

// env runs the operator's commands: kubectl and edgequorum from bin/, the
// admin kubeconfig, in the repository root so deploy/install paths resolve.
type env struct {
	t      *testing.T
	root   string
	vars   []string
	client kubernetes.Interface
}

func (e *env) sh(ctx context.Context, line string) string {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-ec", line)
	cmd.Dir, cmd.Env = e.root, e.vars
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	e.t.Logf("$ %s (%s)\n%s", line, time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		e.t.Fatalf("%s: %v", line, err)
	}
	return out.String()
}

func TestShippedManifestsOnARealKubelet(t *testing.T) {
	realnode.Require(t)
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	imageTar := filepath.Join(bin, "image", fmt.Sprintf("edgequorum-%s-linux-%s.tar", strings.TrimSpace(string(version)), runtime.GOARCH))
	for _, need := range []string{imageTar, filepath.Join(bin, "kubectl"), filepath.Join(bin, "edgequorum")} {
		if _, err := os.Stat(need); err != nil {
			if os.Getenv(testcluster.RequireEnv) != "" {
				t.Fatalf("%v (make image build noderuntime)", err)
			}
			t.Skipf("skipping: %v (make image build noderuntime)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// No fake cloud node: the webhook Deployment must land on the real one.
	c := testcluster.StartT(t, testcluster.Options{
		AdvertiseAddress:       realnode.APIServerAddress,
		NoCloudNode:            true,
		NodeMonitorGracePeriod: 20 * time.Second,
	})
	node := realnode.StartT(t, c, realnode.Options{Name: realNode})
	if err := node.ImportImage(ctx, imageTar); err != nil {
		t.Fatal(err)
	}
	// Three fake edge nodes with agents as host processes; the real node's
	// agent will join them.
	// They sit on the node network too: agents bind outgoing connections to
	// their advertise address, and nothing carries traffic between loopback
	// and the node network.
	z, err := zonerun.Start(ctx, c, zonerun.Options{Zone: zoneName, Nodes: 3, Dir: t.TempDir(), IPs: realnode.FakeNodeAddresses[:3]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(z.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			for _, a := range z.Agents() {
				t.Logf("---- agent %s (host process) ----\n%s", a.Name, a.NoticeTail(40))
				// What the member holds, and its log at debug: a zone that
				// stopped judging shows why here (reports, members, Raft).
				if st, err := a.Status(context.Background()); err == nil {
					b, _ := json.MarshalIndent(st, "", " ")
					t.Logf("---- agent %s status ----\n%s", a.Name, b)
				} else {
					t.Logf("---- agent %s status: %v", a.Name, err)
				}
				t.Logf("---- agent %s (last 16 KiB, debug included) ----\n%s", a.Name, a.LogTail(16<<10))
			}
		}
	})
	e := &env{t: t, root: root, client: c.Client(), vars: append(os.Environ(),
		"PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.KubeconfigPath(), "HOME="+t.TempDir())}
	t.Cleanup(func() {
		if t.Failed() {
			for name, tail := range node.LogTails(60) {
				t.Logf("---- %s ----\n%s", name, tail)
			}
			for _, ns := range []string{agentNS, webhookNS} {
				pods, err := e.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + realNode})
				if err != nil {
					continue
				}
				for _, p := range pods.Items {
					for _, prev := range []string{"--previous", "--tail=40"} {
						cmd := exec.Command(filepath.Join(bin, "kubectl"), "-n", ns, "logs", "--all-containers", "--tail=40", prev, p.Name)
						cmd.Env = e.vars
						out, _ := cmd.CombinedOutput()
						t.Logf("---- kubectl -n %s logs %s %s ----\n%s", ns, prev, p.Name, out)
					}
				}
			}
		}
	})

	names := []string{zoneName + "-1", zoneName + "-2", zoneName + "-3"}
	want := map[string]zone.State{}
	for _, n := range names {
		want[n] = zone.Healthy
	}
	waitStates(t, e.client, 2*time.Minute, want)

	t.Run("webhook behind its Service strips the taint of a vouched node", func(t *testing.T) {
		e.t = t
		e.sh(ctx, "kubectl apply -f deploy/install/webhook.yaml")
		took := poll.Until(t, 3*time.Minute, "webhook Deployment ready on the real node", func() (bool, string) {
			d, err := e.client.AppsV1().Deployments(webhookNS).Get(ctx, "edgequorum-webhook", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return d.Status.ReadyReplicas >= 1, fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, d.Status.Replicas)
		})
		t.Logf("webhook Deployment ready on the real node after %s", took.Round(time.Millisecond))
		cut := z.Agent(names[2]).Kubelet
		cut.Cut()
		took = poll.Until(t, time.Minute, names[2]+" Unknown", func() (bool, string) {
			return readyStatus(ctx, e.client, names[2]) == corev1.ConditionUnknown, string(readyStatus(ctx, e.client, names[2]))
		})
		t.Logf("%s Unknown after %s", names[2], took.Round(time.Millisecond))
		took = poll.Until(t, time.Minute, "the webhook pod stripped unreachable:NoExecute", func() (bool, string) {
			n, err := e.client.CoreV1().Nodes().Get(ctx, names[2], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable && taint.Effect == corev1.TaintEffectNoExecute {
					return false, "taint stored"
				}
			}
			stripped := webhookMetric(ctx, e.client, "edgequorum_admission_taints_stripped_total")
			return stripped >= 1, fmt.Sprintf("taints stripped by the webhook pods: %v", stripped)
		})
		t.Logf("the webhook pod stripped unreachable:NoExecute after %s", took.Round(time.Millisecond))
		if err := cut.Reconnect(ctx); err != nil {
			t.Fatal(err)
		}
	})

	// The webhook Deployment rolls to an image of another version, as an
	// upgrade does first (two replicas, maxUnavailable 0): the apiserver
	// neither skips nor fails a review meanwhile. Before the node joins a
	// zone: webhook pods keep off zone nodes.
	var next string
	t.Run("the webhook rolls to another build", func(t *testing.T) {
		e.t = t
		v := strings.TrimSpace(string(version)) + ".next"
		dir := filepath.Join(t.TempDir(), "image-next")
		e.sh(ctx, buildImageScript(t, dir, v))
		if err := node.ImportImage(ctx, filepath.Join(dir, fmt.Sprintf("edgequorum-%s-linux-%s.tar", v, runtime.GOARCH))); err != nil {
			t.Fatal(err)
		}
		before := admissionFailures(t, ctx, e.client)
		load := reviewLoad(t, ctx, e.client, names[0])
		e.sh(ctx, "kubectl -n "+webhookNS+" set image deployment/edgequorum-webhook webhook=ghcr.io/edgequorum/edgequorum:"+v)
		e.sh(ctx, "kubectl -n "+webhookNS+" rollout status deployment/edgequorum-webhook --timeout=3m")
		load()
		requireNoAdmissionFailures(t, ctx, e.client, c.LogDir(), before)
		if got := webhookMetric(ctx, e.client, `edgequorum_build_info{goversion="`+runtime.Version()+`",revision="next",version="`+v+`"}`); got < 1 {
			t.Errorf("no webhook pod says it is build %s", v)
		}
		// What the replicas tell zone leaders they read: the replicas that
		// run, each of the new build; those replaced took theirs out.
		took := poll.Until(t, time.Minute, "the webhook's reads Lease to name the running replicas alone", func() (bool, string) {
			return webhookReadsMatch(ctx, e.client, v)
		})
		t.Logf("the reads Lease named the running replicas alone %s after the roll", took.Round(time.Millisecond))
		next = v
	})

	t.Run("the webhook rotates its CA and certificate as it rolls", func(t *testing.T) {
		e.t = t
		// The operator shortens the validities, which rolls the
		// Deployment; the new leader replaces the CA (it was issued for
		// longer) and then the serving certificate. Back to the shipped
		// validities, which rolls it again: the short CA is due at once,
		// and so is the certificate it signs. Through both rolls and their
		// rotations the apiserver fails and skips no review.
		validity := func(cert, ca string) string {
			return fmt.Sprintf(`kubectl -n %s patch deployment edgequorum-webhook --type=json -p '[`+
				`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--cert-validity=%s"},`+
				`{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--ca-validity=%s"}]'`, webhookNS, cert, ca)
		}
		certs, cas := map[string]bool{}, map[string]bool{}
		look := func() (serving, signer *x509.Certificate, err error) {
			if serving, signer, err = webhookCerts(ctx, e.client); err == nil {
				certs[serving.SerialNumber.String()], cas[signer.SerialNumber.String()] = true, true
			}
			return serving, signer, err
		}
		if _, _, err := look(); err != nil {
			t.Fatal(err)
		}
		before := admissionFailures(t, ctx, e.client)
		load := reviewLoad(t, ctx, e.client, names[0])
		for _, v := range []struct{ cert, ca string }{{"2m", "10m"}, {"2160h", "43800h"}} {
			e.sh(ctx, validity(v.cert, v.ca))
			e.sh(ctx, "kubectl -n "+webhookNS+" rollout status deployment/edgequorum-webhook --timeout=3m")
			caFor, _ := time.ParseDuration(v.ca)
			poll.Until(t, 2*time.Minute, "a CA and a serving certificate of --ca-validity="+v.ca, func() (bool, string) {
				serving, signer, err := look()
				if err != nil {
					return false, err.Error()
				}
				life := signer.NotAfter.Sub(signer.NotBefore)
				return life <= caFor+6*time.Minute && life > caFor && serving.CheckSignatureFrom(signer) == nil,
					fmt.Sprintf("CA valid for %s, serving certificate until %s", life, serving.NotAfter)
			})
		}
		load()
		requireNoAdmissionFailures(t, ctx, e.client, c.LogDir(), before)
		if len(cas) < 3 || len(certs) < 3 {
			t.Errorf("%d CAs and %d serving certificates seen, want 3 of each (two rotations of each)", len(cas), len(certs))
		}
		t.Logf("%d CAs and %d serving certificates through two rolls", len(cas), len(certs))
	})

	var first raftzone.Status
	t.Run("agent pod joins the zone and its node gets a verdict", func(t *testing.T) {
		e.t = t
		e.sh(ctx, "kubectl -n "+agentNS+" create secret generic edgequorum-zone-key --from-file=zone.key="+z.KeyFile())
		e.sh(ctx, "kubectl apply -f deploy/install/agent.yaml")
		e.sh(ctx, "kubectl label node "+realNode+" "+zone.DefaultZoneLabel+"="+zoneName)
		pod := waitAgentPod(t, ctx, e.client, "")
		t.Logf("agent pod %s Ready through its readiness probe", pod.Name)
		waitStates(t, e.client, time.Minute, map[string]zone.State{realNode: zone.Healthy})
		first = agentStatus(t, ctx, e, pod.Name)
		if first.Node != realNode || !first.Ready || len(first.Members) != 4 {
			t.Fatalf("status in the pod: node %s ready %v members %d; want %s ready with 4 members", first.Node, first.Ready, len(first.Members), realNode)
		}
		table := e.sh(ctx, "kubectl -n "+agentNS+" exec "+pod.Name+" -- /edgequorum status")
		for _, n := range append(names, realNode) {
			if !strings.Contains(table, n) {
				t.Errorf("edgequorum status in the pod lacks member %s", n)
			}
		}
	})

	t.Run("the running images say which build they are", func(t *testing.T) {
		ver := strings.TrimSpace(string(version))
		if got := agentMetric(t, ctx, e, `edgequorum_build_info{goversion="`+runtime.Version()+`"`); got != 1 {
			t.Errorf("agent edgequorum_build_info = %v, want 1", got)
		}
		body := agentMetricsText(t, ctx, e)
		if !strings.Contains(body, `version="`+ver+`"`) {
			t.Errorf("agent /metrics has no build_info with version %s", ver)
		}
		if got := webhookMetric(ctx, e.client, "edgequorum_build_info"); got < 1 {
			t.Errorf("webhook pods export edgequorum_build_info %v times, want at least 1", got)
		}
	})

	t.Run("runtime settings: memory limit from the container's cgroup, collector growth, parallelism, start-up pages", func(t *testing.T) {
		mem := float64(containerMemory)
		wantGoMemLimit := int64(mem * 0.9)
		got := agentMetric(t, ctx, e, "go_gc_gomemlimit_bytes")
		if int64(got) != wantGoMemLimit {
			t.Fatalf("go_gc_gomemlimit_bytes = %v, want %d (90%% of the container's 128Mi)", got, wantGoMemLimit)
		}
		// The shipped DaemonSet sets neither GOGC nor --gc-percent: the
		// agent's own default, not Go's 100, must reach the process.
		if got := agentMetric(t, ctx, e, "go_gc_gogc_percent"); int(got) != agent.DefaultGCPercent {
			t.Errorf("go_gc_gogc_percent = %v, want the agent's default %d", got, agent.DefaultGCPercent)
		}
		// Nor GOMAXPROCS or --max-procs: the agent's one P, not the
		// runtime's container default of at least two.
		if got := agentMetric(t, ctx, e, "go_sched_gomaxprocs_threads"); int(got) != agent.DefaultMaxProcs {
			t.Errorf("go_sched_gomaxprocs_threads = %v, want the agent's default %d", got, agent.DefaultMaxProcs)
		}
		// The image's agent finds its own binary under the container's root
		// and gives back the pages only its start-up touched.
		if got := agentMetric(t, ctx, e, `edgequorum_agent_binary_pages_released_bytes{stage="start"}`); got <= 0 {
			t.Errorf("the agent in its container released %v bytes of its binary's pages at start, want some", got)
		}
	})

	t.Run("state survives kubectl delete pod", func(t *testing.T) {
		e.t = t
		if first.ServerID == "" {
			t.Skip("no status from the first pod")
		}
		old := waitAgentPod(t, ctx, e.client, "")
		e.sh(ctx, "kubectl -n "+agentNS+" delete pod "+old.Name)
		pod := waitAgentPod(t, ctx, e.client, old.UID)
		again := agentStatus(t, ctx, e, pod.Name)
		if again.ServerID != first.ServerID {
			t.Fatalf("Raft server ID %s after the restart, %s before: the hostPath state was lost", again.ServerID, first.ServerID)
		}
		waitStates(t, e.client, time.Minute, map[string]zone.State{realNode: zone.Healthy})
	})

	// The DaemonSet rolls to the build the webhook rolled to above, on the
	// shipped update settings: the pod keeps its Raft identity and state.
	t.Run("the DaemonSet rolls to another build", func(t *testing.T) {
		e.t = t
		if first.ServerID == "" || next == "" {
			t.Skip("no status from the first pod, or no second build")
		}
		before := admissionFailures(t, ctx, e.client)
		load := reviewLoad(t, ctx, e.client, names[0])
		old := waitAgentPod(t, ctx, e.client, "")
		e.sh(ctx, "kubectl -n "+agentNS+" set image daemonset/edgequorum-agent agent=ghcr.io/edgequorum/edgequorum:"+next)
		e.sh(ctx, "kubectl -n "+agentNS+" rollout status daemonset/edgequorum-agent --timeout=3m")
		load()
		pod := waitAgentPod(t, ctx, e.client, old.UID)
		st := agentStatus(t, ctx, e, pod.Name)
		if st.ServerID != first.ServerID {
			t.Errorf("Raft server ID %s after the roll, %s before: the state did not survive", st.ServerID, first.ServerID)
		}
		if st.Release != next {
			t.Errorf("the rolled agent announces %q, want %q", st.Release, next)
		}
		if body := agentMetricsText(t, ctx, e); !strings.Contains(body, `version="`+next+`"`) {
			t.Errorf("the rolled agent's edgequorum_build_info does not say %s", next)
		}
		waitStates(t, e.client, time.Minute, map[string]zone.State{realNode: zone.Healthy})
		requireNoAdmissionFailures(t, ctx, e.client, c.LogDir(), before)
	})
}

// buildImageScript builds this tree into an image stamped version in dir,
// as `make image` does for one platform, with the Go caches of the test's
// own environment (the operator's shell has another HOME).
func buildImageScript(t *testing.T, dir, version string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := strings.Fields(string(out))
	if len(env) != 3 {
		t.Fatalf("go env: %q", out)
	}
	const bi = "github.com/edgequorum/edgequorum/internal/buildinfo"
	return fmt.Sprintf(`export GOCACHE=%[5]s GOMODCACHE=%[6]s GOPATH=%[7]s GOPROXY=off
mkdir -p %[1]s
CGO_ENABLED=0 GOOS=linux GOARCH=%[2]s go build -trimpath -ldflags '-s -w -X %[3]s.version=%[4]s -X %[3]s.revision=next' -o %[1]s/edgequorum ./cmd/edgequorum
CGO_ENABLED=0 GOOS=linux GOARCH=%[2]s go build -trimpath -ldflags '-s -w -X %[3]s.version=%[4]s -X %[3]s.revision=next' -o %[1]s/edgequorum-agent ./cmd/edgequorum-agent
go run ./hack/mkimage -version %[4]s -revision next -out %[1]s linux/%[2]s=%[1]s/edgequorum`,
		dir, runtime.GOARCH, bi, version, env[0], env[1], env[2])
}

// reviewLoad keeps the webhook busy until the returned func is called: four
// times a second a server-side dry run of an update that gives node the
// unreachable:NoExecute taint, which the nodes hook reviews and nothing
// stores. A roll of the webhook is judged by these reviews too; none may
// fail.
func reviewLoad(t *testing.T, ctx context.Context, c kubernetes.Interface, node string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var sent, failed int
	var last error
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				continue
			}
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
			_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case err == nil:
				sent++
			case ctx.Err() != nil, apierrors.IsConflict(err):
			default:
				failed++
				last = err
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if failed > 0 {
			t.Errorf("%d of %d reviewed updates failed during the roll; the last: %v", failed, sent+failed, last)
		}
		if sent == 0 {
			t.Error("no reviewed update went through during the roll")
		}
	}
}

// requireNoAdmissionFailures checks that since before, the apiserver called
// the webhooks (waiting for a call if the roll was quicker than the
// kubelets' status updates) and neither skipped nor failed nor had refused
// any call.
func requireNoAdmissionFailures(t *testing.T, ctx context.Context, c kubernetes.Interface, logDir string, before admission) {
	t.Helper()
	var after admission
	poll.Until(t, time.Minute, "a review since the roll began", func() (bool, string) {
		after = admissionFailures(t, ctx, c)
		return after.calls > before.calls, "none yet"
	})
	if after.failOpen != before.failOpen || after.rejected != before.rejected {
		t.Errorf("during the roll the apiserver skipped %v reviews (fail open) and had %v refused or failed",
			after.failOpen-before.failOpen, after.rejected-before.rejected)
		// Why: the apiserver logs every call it could not make.
		raw, err := os.ReadFile(filepath.Join(logDir, "kube-apiserver.log"))
		if err != nil {
			t.Log(err)
		}
		var why []string
		for line := range strings.Lines(string(raw)) {
			if strings.Contains(line, "webhook.edgequorum.io") && strings.Contains(strings.ToLower(line), "fail") {
				why = append(why, line)
			}
		}
		t.Logf("the apiserver's last words on the calls it could not make:\n%s", strings.Join(why[max(0, len(why)-8):], ""))
	}
	t.Logf("during the roll: %v reviews, none skipped, failed or refused", after.calls-before.calls)
}

// admission is what the apiserver's own metrics say of its calls to the
// edgequorum webhooks: calls, calls skipped under failurePolicy Ignore, and
// requests refused (by the webhook or by a failed call under Fail).
type admission struct{ calls, failOpen, rejected float64 }

func admissionFailures(t *testing.T, ctx context.Context, c kubernetes.Interface) admission {
	t.Helper()
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("apiserver /metrics: %v", err)
	}
	var a admission
	for line := range strings.Lines(string(raw)) {
		if !strings.Contains(line, `webhook.edgequorum.io"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_admission_webhook_request_total{"):
			a.calls += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{"):
			a.failOpen += v
		case strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{"):
			a.rejected += v
		}
	}
	return a
}

func readyStatus(ctx context.Context, c kubernetes.Interface, node string) corev1.ConditionStatus {
	n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// waitAgentPod waits for the agent pod on the real node, other than the pod
// with UID not, to be Ready.
func waitAgentPod(t *testing.T, ctx context.Context, c kubernetes.Interface, not types.UID) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	took := poll.Until(t, 3*time.Minute, "agent pod Ready on "+realNode, func() (bool, string) {
		pods, err := c.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{LabelSelector: agentSelector, FieldSelector: "spec.nodeName=" + realNode})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.UID == not || p.DeletionTimestamp != nil {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					found = p
					return true, ""
				}
			}
			return false, fmt.Sprintf("%s: %s", p.Name, p.Status.Phase)
		}
		return false, "no pod yet"
	})
	t.Logf("agent pod Ready on %s after %s", realNode, took.Round(time.Millisecond))
	return found
}

func agentStatus(t *testing.T, ctx context.Context, e *env, pod string) raftzone.Status {
	t.Helper()
	out := e.sh(ctx, "kubectl -n "+agentNS+" exec "+pod+" -- /edgequorum status -o json")
	var s raftzone.Status
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status -o json: %v", err)
	}
	return s
}

// agentMetric reads the first sample whose line starts with name from the
// real node's agent.
func agentMetric(t *testing.T, ctx context.Context, e *env, name string) float64 {
	t.Helper()
	v, ok := sample(agentMetricsText(t, ctx, e), name)
	if !ok {
		t.Fatalf("the agent's /metrics has no %s", name)
	}
	return v
}

func agentMetricsText(t *testing.T, ctx context.Context, e *env) string {
	t.Helper()
	// The agent's metrics are for its node only (TestStatusServerKeepsTheZoneToItsNode);
	// an operator reads them in the agent's pod.
	pod := waitAgentPod(t, ctx, e.client, "")
	return e.sh(ctx, "kubectl -n "+agentNS+" exec "+pod.Name+" -- /edgequorum status -o metrics")
}

// webhookMetric sums name over the webhook's pods, read from each pod's IP.
// webhookReadsMatch reports whether the webhook's reads Lease holds one
// entry per running webhook pod, each of release v at the level this build
// reads, and nothing else.
func webhookReadsMatch(ctx context.Context, c kubernetes.Interface, v string) (bool, string) {
	l, err := c.CoordinationV1().Leases(webhookNS).Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	rs, err := zone.ParseWebhookReads(l.Annotations)
	if err != nil {
		return false, err.Error()
	}
	pods, err := c.CoreV1().Pods(webhookNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=edgequorum-webhook"})
	if err != nil {
		return false, err.Error()
	}
	want := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			want[p.Name] = true
		}
	}
	ok := len(rs) == len(want)
	for name, r := range rs {
		ok = ok && want[name] && r.Release == v && r.Level == skew.Current()
	}
	return ok, fmt.Sprintf("entries %v, running pods %v", rs, want)
}

// webhookCerts are the serving certificate and the signing CA the webhook's
// Secret holds.
func webhookCerts(ctx context.Context, c kubernetes.Interface) (serving, signer *x509.Certificate, err error) {
	sec, err := c.CoreV1().Secrets(webhookNS).Get(ctx, "edgequorum-webhook-tls", metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	var out [2]*x509.Certificate
	for i, key := range []string{"tls.crt", "ca-signer.crt"} {
		blk, _ := pem.Decode(sec.Data[key])
		if blk == nil {
			return nil, nil, fmt.Errorf("the webhook's Secret holds no %s", key)
		}
		if out[i], err = x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return out[0], out[1], nil
}

func webhookMetric(ctx context.Context, c kubernetes.Interface, name string) float64 {
	pods, err := c.CoreV1().Pods(webhookNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// The pod's serving certificate names the Service, not the pod IP;
		// only the counter is wanted here.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	total := 0.0
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+p.Status.PodIP+":9443/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if v, ok := sample(string(body), name); ok {
			total += v
		}
	}
	return total
}

// sample returns the value of the first sample whose line starts with
// prefix: a metric name, or a name and the start of its labels.
func sample(text, prefix string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `[^ ]* (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

func waitStates(t *testing.T, c kubernetes.Interface, timeout time.Duration, want map[string]zone.State) {
	t.Helper()
	took := poll.Until(t, timeout, fmt.Sprintf("verdicts %v", want), func() (bool, string) {
		for node, st := range want {
			n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey])
			if err != nil || a.State != st {
				return false, fmt.Sprintf("%s: %q", node, n.Annotations[zone.AnnotationKey])
			}
		}
		return true, ""
	})
	t.Logf("verdicts %v after %s", want, took.Round(time.Millisecond))
}
