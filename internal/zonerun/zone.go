package zonerun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/edgequorum/edgequorum/deploy"
	"github.com/edgequorum/edgequorum/internal/proc"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// Ports every agent uses on its own loopback IP.
const (
	PeerPort   = 9470
	StatusPort = 9471
)

// AgentUser is the identity agents run as: the ServiceAccount deploy/agent binds.
const AgentUser = "system:serviceaccount:edgequorum-system:edgequorum-agent"

// Options describe a zone to run.
type Options struct {
	// Zone is the zone label value.
	Zone string
	// Nodes is how many edge nodes (fake kubelet + agent) the zone has.
	Nodes int
	// NodePrefix names nodes <prefix>-1..N; default Zone.
	NodePrefix string
	// Binary is the edgequorum binary; default <bin dir>/edgequorum.
	Binary string
	// Dir holds data dirs, logs and the key file.
	Dir string
	// AgentArgs are extra flags for every agent (e.g. shorter timers).
	AgentArgs []string
	// AgentEnv are NAME=value pairs every agent gets on top of this
	// process's environment (a later pair wins over an earlier one).
	AgentEnv []string
	// IPs, when set, are the nodes' addresses in order (one per node);
	// otherwise each node gets the next loopback address of the cluster.
	IPs []netip.Addr
	// StartAgents, when above 0, is how many agents (the first ones) Start
	// starts; the others get their node, kubelet and credentials but wait
	// for Agent.Start, or stand in for themselves through another program
	// (Agent.Kubeconfig).
	StartAgents int
}

// Zone is a running zone.
type Zone struct {
	opts    Options
	cluster *testcluster.Cluster
	keyFile string
	mu      sync.Mutex
	agents  []*Agent
}

// Start applies deploy/agent (namespace and RBAC), writes a zone key, adds the
// zone's nodes and starts one agent per node.
func Start(ctx context.Context, c *testcluster.Cluster, opts Options) (*Zone, error) {
	if opts.Zone == "" || opts.Nodes < 1 || opts.Dir == "" {
		return nil, errors.New("zonerun: Zone, Nodes and Dir are required")
	}
	if len(opts.IPs) > 0 && len(opts.IPs) != opts.Nodes {
		return nil, fmt.Errorf("zonerun: %d IPs for %d nodes", len(opts.IPs), opts.Nodes)
	}
	if opts.NodePrefix == "" {
		opts.NodePrefix = opts.Zone
	}
	if opts.Binary == "" {
		bin, err := testcluster.FindBinDir()
		if err != nil {
			return nil, err
		}
		opts.Binary = filepath.Join(bin, "edgequorum")
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("zonerun: agent binary (run `make build`): %w", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	z := &Zone{opts: opts, cluster: c}
	if err := InstallAgentRBAC(ctx, c); err != nil {
		return nil, err
	}
	line, err := zonekeys.GenerateLine("k1")
	if err != nil {
		return nil, err
	}
	z.keyFile = filepath.Join(opts.Dir, "zone.key")
	if err := os.WriteFile(z.keyFile, []byte(line+"\n"), 0o600); err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Nodes; i++ {
		name := fmt.Sprintf("%s-%d", opts.NodePrefix, i)
		no := testcluster.NodeOptions{Name: name, Zone: opts.Zone}
		if len(opts.IPs) > 0 {
			no.IP = opts.IPs[i-1]
		}
		k, err := c.AddNode(ctx, no)
		if err != nil {
			z.Stop()
			return nil, err
		}
		a := &Agent{zone: z, Kubelet: k, Name: name, IP: k.IP().String(),
			DataDir: filepath.Join(opts.Dir, name, "data"), LogPath: filepath.Join(opts.Dir, name, "agent.log")}
		z.agents = append(z.agents, a)
		// Each agent reaches the apiserver through its own cuttable link.
		if a.link, err = newCloudLink(c.APIServerURL()); err != nil {
			z.Stop()
			return nil, err
		}
		userCfg, err := agentConfig(ctx, c.Client(), c.RESTConfig(), name)
		if err != nil {
			z.Stop()
			return nil, err
		}
		userCfg.Host = a.link.URL()
		a.kubeconfig = filepath.Join(opts.Dir, name, "kubeconfig")
		if err := WriteKubeconfig(userCfg, a.kubeconfig); err != nil {
			z.Stop()
			return nil, err
		}
	}
	start := z.agents
	if opts.StartAgents > 0 {
		start = start[:min(opts.StartAgents, len(start))]
	}
	for _, a := range start {
		if err := a.Start(); err != nil {
			z.Stop()
			return nil, err
		}
	}
	return z, nil
}

// InstallAgentRBAC creates the Namespace, ServiceAccount and RBAC of
// deploy/agent (not the DaemonSet: agents run as local processes here).
func InstallAgentRBAC(ctx context.Context, c *testcluster.Cluster) error {
	objs, err := deploy.Objects("agent")
	if err != nil {
		return err
	}
	var keep = objs[:0]
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			keep = append(keep, o)
		}
	}
	return deploy.Apply(ctx, c.RESTConfig(), keep, false)
}

// WriteKubeconfig writes cfg (certificate auth) as a kubeconfig file.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// Agents returns the zone's agents in node order.
func (z *Zone) Agents() []*Agent {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]*Agent(nil), z.agents...)
}

// Agent returns the agent of the named node.
func (z *Zone) Agent(name string) *Agent {
	for _, a := range z.Agents() {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// KeyFile is the zone key every agent uses.
func (z *Zone) KeyFile() string { return z.keyFile }

// Leader asks every running agent and returns the one that says it leads and
// that the others follow.
func (z *Zone) Leader(ctx context.Context) (*Agent, error) {
	var leader *Agent
	for _, a := range z.Agents() {
		if !a.Running() {
			continue
		}
		st, err := a.Status(ctx)
		if err != nil {
			continue
		}
		if st.State == "Leader" && st.Leader == a.Name {
			if leader != nil {
				return nil, fmt.Errorf("two agents lead: %s and %s", leader.Name, a.Name)
			}
			leader = a
		}
	}
	if leader == nil {
		return nil, errors.New("no agent leads")
	}
	return leader, nil
}

// Stop stops every agent (SIGTERM, then SIGKILL) and closes their cloud links.
func (z *Zone) Stop() {
	for _, a := range z.Agents() {
		a.Stop()
		if a.link != nil {
			a.link.close()
		}
	}
}

// Agent is one edge node: its fake kubelet and its agent process.
type Agent struct {
	zone    *Zone
	Kubelet *testcluster.Kubelet
	Name    string
	IP      string
	DataDir string
	LogPath string

	link       *cloudLink
	kubeconfig string

	mu   sync.Mutex
	proc *proc.Process
	// binary, when set, is the program Start runs instead of the zone's:
	// an agent of another release in a rolling upgrade.
	binary string
}

// SetBinary makes the next Start run binary instead of the zone's, as an
// operator's rolling upgrade (or rollback) replaces one node's agent; ""
// goes back to the zone's.
func (a *Agent) SetBinary(binary string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.binary = binary
}

// CutCloud cuts the node from the cloud: its kubelet stops renewing and its
// agent's apiserver connections fail; the zone network and the kubelet's
// listener stay up.
func (a *Agent) CutCloud() {
	a.Kubelet.Cut()
	a.link.setCut(true)
}

// ReconnectCloud undoes CutCloud.
func (a *Agent) ReconnectCloud(ctx context.Context) error {
	a.link.setCut(false)
	return a.Kubelet.Reconnect(ctx)
}

// CutCloud cuts every node of the zone from the cloud.
func (z *Zone) CutCloud() {
	for _, a := range z.Agents() {
		a.CutCloud()
	}
}

// ReconnectCloud undoes Zone.CutCloud for every node still alive.
func (z *Zone) ReconnectCloud(ctx context.Context) error {
	for _, a := range z.Agents() {
		if a.Kubelet.State() == testcluster.StateKilled {
			continue
		}
		if err := a.ReconnectCloud(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Kubeconfig is the path of the agent's kubeconfig: its own credentials,
// bound to its node, through its cuttable cloud link.
func (a *Agent) Kubeconfig() string { return a.kubeconfig }

// StatusAddress is host:port of the agent's status server.
func (a *Agent) StatusAddress() string { return net.JoinHostPort(a.IP, strconv.Itoa(StatusPort)) }

// Args are the agent's command-line flags.
func (a *Agent) Args() []string {
	args := []string{"agent",
		"--node-name=" + a.Name,
		"--advertise-address=" + a.IP,
		"--data-dir=" + a.DataDir,
		"--key-file=" + a.zone.keyFile,
		"--kubeconfig=" + a.kubeconfig,
		"--status-address=" + a.StatusAddress(),
		"--peer-port=" + strconv.Itoa(PeerPort),
		"--log-level=debug",
	}
	return append(args, a.zone.opts.AgentArgs...)
}

// Start starts the agent process (its data dir survives restarts).
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc != nil && a.proc.Running() {
		return fmt.Errorf("agent %s already running", a.Name)
	}
	binary := a.zone.opts.Binary
	if a.binary != "" {
		binary = a.binary
	}
	var env []string
	if len(a.zone.opts.AgentEnv) > 0 {
		env = append(os.Environ(), a.zone.opts.AgentEnv...)
	}
	p, err := proc.StartEnv(binary, a.Args(), env, a.LogPath)
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.Name, err)
	}
	a.proc = p
	return nil
}

// Running reports whether the agent process is alive.
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc != nil && a.proc.Running()
}

// Pid is the agent's process ID, 0 when it is not running.
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc == nil || !a.proc.Running() {
		return 0
	}
	return a.proc.Pid()
}

// Stop asks the agent to stop (SIGTERM) and kills it after 10 s.
func (a *Agent) Stop() {
	if p := a.take(); p != nil {
		p.Stop(10 * time.Second)
	}
}

// Kill kills the agent with SIGKILL, like a node losing power.
func (a *Agent) Kill() {
	if p := a.take(); p != nil {
		p.Kill()
	}
}

func (a *Agent) take() *proc.Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.proc
	a.proc = nil
	return p
}

// Status fetches the agent's /v1/status.
func (a *Agent) Status(ctx context.Context) (raftzone.Status, error) {
	return a.fetch(ctx, "/v1/status")
}

// LeaderStatus fetches /v1/status/leader through this agent.
func (a *Agent) LeaderStatus(ctx context.Context) (raftzone.Status, error) {
	return a.fetch(ctx, "/v1/status/leader")
}

func (a *Agent) fetch(ctx context.Context, path string) (raftzone.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.StatusAddress()+path, nil)
	if err != nil {
		return raftzone.Status{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return raftzone.Status{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return raftzone.Status{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return raftzone.Status{}, fmt.Errorf("%s%s: %s: %s", a.StatusAddress(), path, resp.Status, body)
	}
	var st raftzone.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return raftzone.Status{}, err
	}
	return st, nil
}

// LogTail returns the last n bytes of the agent's log.
func (a *Agent) LogTail(n int64) string { return logTail(a.LogPath, n) }

// NoticeTail returns the last n lines of the agent's log above debug level:
// elections, membership changes, verdicts and errors, without the probe lines
// that fill a debug log. Failure reports use it so a test's output keeps what
// explains the failure.
func (a *Agent) NoticeTail(n int) string {
	b, err := os.ReadFile(a.LogPath)
	if err != nil {
		return ""
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.Contains(line, "level=DEBUG") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}

// logTail returns the last n bytes of the file at path, or "" if it cannot be
// read: it only feeds failure reports.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// Binary is the edgequorum binary the agents run.
func (z *Zone) Binary() string { return z.opts.Binary }
