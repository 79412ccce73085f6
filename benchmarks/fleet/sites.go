package fleet

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// The agent's identity, as its pod-bound ServiceAccount token carries it.
const (
	agentUser     = "system:serviceaccount:" + zone.DefaultLeaseNamespace + ":edgequorum-agent"
	nodeNameExtra = "authentication.kubernetes.io/node-name"
)

var agentGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + zone.DefaultLeaseNamespace, "system:authenticated"}

// site is one small zone: its nodes, the first of them its leader.
type site struct {
	name   string
	nodes  []*simNode
	writer *apiwriter.Writer
	// link is cut while the site has lost the cloud: its leader's requests
	// fail as a dead link's would.
	link atomic.Bool
}

// asAgent makes req one of node's agent's.
func asAgent(req *rest.Request, node string) *rest.Request {
	return req.SetHeader("Impersonate-User", agentUser).
		SetHeader("Impersonate-Group", agentGroups...).
		SetHeader("Impersonate-Extra-"+nodeNameExtraHeader, node)
}

// nodeNameExtraHeader is nodeNameExtra as an Impersonate-Extra- header key
// (escaped as client-go's impersonating round tripper does).
const nodeNameExtraHeader = "authentication.kubernetes.io%2fnode-name"

// agentClient is a client that speaks as node's agent over base, through
// its site's link.
func agentClient(cfg *rest.Config, base http.RoundTripper, node string, link *atomic.Bool) (kubeclient.Interface, error) {
	rt := transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
		UserName: agentUser, Groups: agentGroups, Extra: map[string][]string{nodeNameExtra: {node}},
	}, cutTransport{cut: link, next: base})
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 50, 100
	return kubeclient.NewForConfigAndClient(c, &http.Client{Transport: rt, Timeout: 30 * time.Second})
}

// startLeader makes s's first node its leader: the agent's writer, fenced by
// a term that never changes, following verdicts that never change.
func (s *site) startLeader(ctx context.Context, client kubeclient.Interface, dilation float64) error {
	leader := s.nodes[0]
	cfg := apiwriter.DefaultConfig()
	d := func(x time.Duration) time.Duration { return time.Duration(float64(x) * dilation) }
	cfg.Zone, cfg.Node, cfg.NodeKey = s.name, leader.name, leader.key
	cfg.WebhookReadsPeriod, cfg.LeaseRenew, cfg.LeaseDuration = d(cfg.WebhookReadsPeriod), d(cfg.LeaseRenew), d(cfg.LeaseDuration)
	cfg.QuietRenew, cfg.QuietDuration, cfg.HealthPeriod = d(cfg.QuietRenew), d(cfg.QuietDuration), d(cfg.HealthPeriod)
	cfg.RetryBase, cfg.RetryMax = d(cfg.RetryBase), d(cfg.RetryMax)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := apiwriter.New(cfg, client, fixedTerm(1), s)
	if err != nil {
		return err
	}
	w.Follow(s)
	w.Gather(s)
	s.writer = w
	var vs []zone.Verdict
	for _, n := range s.nodes {
		v, _ := s.CommittedVerdict(n.name)
		vs = append(vs, v)
	}
	w.Verdicts(1, vs, true)
	go func() { _ = w.Run(ctx) }()
	return nil
}

// fixedTerm is a fence that always leads in its term: a site's leadership
// never changes in steady state.
type fixedTerm uint64

func (f fixedTerm) VerifyLeader(context.Context) (uint64, error) { return uint64(f), nil }
func (f fixedTerm) Term() uint64                                 { return uint64(f) }

// MemberCount and ZoneLevel: every member runs this build.
func (s *site) MemberCount() int      { return len(s.nodes) }
func (s *site) ZoneLevel() skew.Level { return skew.Current() }

// ZoneNodes are the site's Nodes as the leader's informer would hold them
// (what the writer reads of them: names, labels, readiness).
func (s *site) ZoneNodes() []*kubeclient.Node {
	out := make([]*kubeclient.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, &kubeclient.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{zone.DefaultZoneLabel: s.name},
				Annotations: map[string]string{zone.NodeKeyAnnotation: zone.EncodeNodeKey(n.key.Public().(ed25519.PublicKey))}},
			Status: kubeclient.NodeStatus{Conditions: []zonek8s.NodeCondition{{Type: kubeclient.NodeReady, Status: zonek8s.ConditionTrue}}},
		})
	}
	return out
}

// decided is when every site's verdicts were decided.
var decided = time.Now().UTC().Truncate(time.Second)

// CommittedVerdict: every member healthy by every other's word, from term 1.
func (s *site) CommittedVerdict(node string) (zone.Verdict, bool) {
	for _, n := range s.nodes {
		if n.name == node {
			m := len(s.nodes)
			return zone.Verdict{Node: node, State: zone.Healthy, Pros: m - 1, Members: m, Term: 1,
				Leader: s.nodes[0].name, DecidedAt: decided}, true
		}
	}
	return zone.Verdict{}, false
}

// WantEvidence: in steady state no member needs its peers' word.
func (s *site) WantEvidence() []string { return nil }

// GatherEvidence is every member's signed word on nodes: reached.
func (s *site) GatherEvidence(_ context.Context, nodes []string) []zone.Attestation {
	var out []zone.Attestation
	for _, m := range s.nodes {
		a := zone.Attestation{Zone: s.name, Signer: m.name, At: time.Now()}
		for _, n := range nodes {
			if n != m.name {
				a.Reach = append(a.Reach, n)
			}
		}
		a.Sign(m.key)
		out = append(out, a)
	}
	return out
}

// Leadership is every member's signed vote that the leader leads term 1.
func (s *site) Leadership(context.Context) (uint64, []zone.LeaderVote) {
	var out []zone.LeaderVote
	for _, m := range s.nodes {
		v := zone.LeaderVote{Zone: s.name, Term: 1, Leader: s.nodes[0].name, Signer: m.name}
		v.Sign(m.key)
		out = append(out, v)
	}
	return 1, out
}

// reviews plays the site's other members' reachability check: a
// SelfSubjectReview every HealthPeriod, as their agents make it.
type reviews struct {
	rest   rest.Interface // authentication.k8s.io/v1
	errors atomic.Int64
}

func (r *reviews) check(ctx context.Context, node string) {
	var out authenticationv1.SelfSubjectReview
	err := asAgent(r.rest.Post().Resource("selfsubjectreviews").Body(&authenticationv1.SelfSubjectReview{}), node).
		Do(ctx).Into(&out)
	if err == nil && out.Status.UserInfo.Username == "" {
		err = errors.New("review without a user")
	}
	if err != nil && ctx.Err() == nil {
		r.errors.Add(1)
	}
}
