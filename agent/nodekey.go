package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/zone"
)

// Retry pacing of registerNodeKey. The first retry comes soon, because an agent
// often starts while the apiserver is briefly unreachable; the cap keeps an
// agent that cannot register (a WAN cut, a refused write) to about one GET a
// minute, which a fleet of thousands of such agents still costs little.
const (
	nodeKeyRetryFirst = time.Second
	nodeKeyRetryMax   = time.Minute
)

// registerNodeKey publishes pub, this node's key, in the zone.NodeKeyAnnotation
// of its own Node object, where its peers look it up to check that a join in
// this node's name really comes from this node. The annotation is written only
// when it is missing or holds another key (a data dir that was wiped made a new
// one); an agent restarting with its key already registered makes no write.
//
// Only this node's own agent can write the annotation: the admission policy in
// deploy/agent/nodekey-policy.yaml compares the Node with the node name the
// apiserver takes from the agent's pod-bound ServiceAccount token.
// A refusal therefore means a misconfigured installation (another namespace or
// ServiceAccount name than the policy's, credentials not bound to this node's
// pod), which the log names.
//
// The apiserver may be unreachable when the agent starts (an edge site cut off
// from the cloud), and the agent must run without it, so registerNodeKey is
// meant to run in a goroutine of its own: it retries with a capped, jittered
// backoff until it succeeds or ctx ends, logging each failed attempt through
// log. It gives up early only on a request the apiserver can never accept
// (Invalid, BadRequest). Its errors name the node and the annotation.
func registerNodeKey(ctx context.Context, client kubeclient.Interface, node string, pub ed25519.PublicKey,
	log func(msg string, args ...any)) error {
	return registerNodeKeyPaced(ctx, client, node, pub, log, nodeKeyRetryFirst, nodeKeyRetryMax)
}

// registerNodeKeyPaced is registerNodeKey with the retry pacing as parameters,
// so tests need not wait out real backoffs.
func registerNodeKeyPaced(ctx context.Context, client kubeclient.Interface, node string, pub ed25519.PublicKey,
	log func(msg string, args ...any), first, maxDelay time.Duration) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("register node key on node %s (annotation %s): %d-byte key, want an Ed25519 public key of %d",
			node, zone.NodeKeyAnnotation, len(pub), ed25519.PublicKeySize)
	}
	want := zone.EncodeNodeKey(pub)
	// A JSON merge patch touches this one annotation and nothing else of the
	// Node, so it never races the kubelet's or any controller's writes, as an
	// Update of the whole object would.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{zone.NodeKeyAnnotation: want}},
	})
	if err != nil {
		return fmt.Errorf("register node key on node %s (annotation %s): %w", node, zone.NodeKeyAnnotation, err)
	}
	// Doubling up to maxDelay, each wait stretched by up to half at random,
	// so that a fleet that lost the cloud together does not retry together.
	backoff := wait.Backoff{Duration: first, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: maxDelay}
	for attempt := 1; ; attempt++ {
		done, err := syncNodeKey(ctx, client, node, want, patch, log)
		if done {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return fmt.Errorf("register node key on node %s (annotation %s): %w", node, zone.NodeKeyAnnotation, err)
		}
		msg := "cannot register this node's key yet; retrying"
		if apierrors.IsForbidden(err) {
			// The message of a policy refusal names the rule; this says where
			// to look when it is RBAC instead.
			msg = "registering this node's key was refused (check deploy/agent's rbac.yaml and nodekey-policy.yaml against the agent's namespace and ServiceAccount); retrying"
		}
		next := backoff.Step()
		log(msg, "annotation", zone.NodeKeyAnnotation, "err", err, "attempt", attempt, "retryIn", next.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return fmt.Errorf("register node key on node %s (annotation %s): gave up after %d attempts (%w): %w",
				node, zone.NodeKeyAnnotation, attempt, context.Cause(ctx), err)
		case <-time.After(next):
		}
	}
}

// syncNodeKey makes one attempt: read the Node, patch the annotation if it is
// not want. done is true once the Node carries want.
func syncNodeKey(ctx context.Context, client kubeclient.Interface, node, want string, patch []byte,
	log func(msg string, args ...any)) (done bool, err error) {
	n, err := client.Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	old, had := n.Annotations[zone.NodeKeyAnnotation]
	if had && old == want {
		log("node key already registered", "annotation", zone.NodeKeyAnnotation, "key", want)
		return true, nil
	}
	if _, err := client.Nodes().Patch(ctx, node, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "edgequorum"}); err != nil {
		return false, err
	}
	if had {
		log("replaced the key registered for this node (a new data dir made a new key)", "annotation", zone.NodeKeyAnnotation,
			"key", want, "previous", old)
	} else {
		log("registered this node's key", "annotation", zone.NodeKeyAnnotation, "key", want)
	}
	return true, nil
}
