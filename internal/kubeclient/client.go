package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is every call an edge agent makes to the apiserver. Keeping it
// this small is what keeps the rest of the API out of the agent's binary.
type Interface interface {
	Nodes() NodeInterface
	Leases(namespace string) LeaseInterface
	Events(namespace string) EventInterface
	SelfSubjectReviews() SelfSubjectReviewInterface
}

// NodeInterface is what the agent does with Nodes: read its own and the
// zone's, watch the zone's through an informer, and patch annotations and
// conditions. Its Nodes are the agent's own slim type (package wrap adapts
// client-go's typed NodeInterface).
type NodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*Node, error)
}

// LeaseInterface is what the agent does with Leases: the zone's genesis
// record and the zone Lease the webhook reads, both written by optimistic
// concurrency (Get, then Create or Update with the version read).
type LeaseInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// EventInterface is how the leader tells an operator what the zone did.
type EventInterface interface {
	Create(ctx context.Context, event *Event, opts metav1.CreateOptions) (*Event, error)
}

// SelfSubjectReviewInterface lets the agent learn which user its
// credentials authenticate as, to name it in errors an operator must fix.
type SelfSubjectReviewInterface interface {
	Create(ctx context.Context, review *authenticationv1.SelfSubjectReview, opts metav1.CreateOptions) (*authenticationv1.SelfSubjectReview, error)
}

// Scheme holds the types Interface reaches, and nothing else: the agent's own
// Node, NodeList and Event under their group-versions, client-go's Lease and
// SelfSubjectReview; Codecs and ParameterCodec are built on it.
var (
	Scheme         = runtime.NewScheme()
	Codecs         = serializer.NewCodecFactory(Scheme)
	ParameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	// Options, Status and WatchEvent, as client-go's scheme registers them.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddKnownTypes(CoreGroupVersion, &Node{}, &NodeList{})
	metav1.AddToGroupVersion(Scheme, CoreGroupVersion)
	Scheme.AddKnownTypes(EventsGroupVersion, &Event{})
	metav1.AddToGroupVersion(Scheme, EventsGroupVersion)
	utilruntime.Must(coordinationv1.AddToScheme(Scheme))
	utilruntime.Must(authenticationv1.AddToScheme(Scheme))
}

// Client is the real Interface. Its methods are safe for concurrent use.
// Each call is one REST request built as client-go's generated clients
// build it, without their package (k8s.io/client-go/gentype), which links
// the server-side-apply machinery and the OpenAPI models for Apply calls
// the agent never makes.
type Client struct {
	core   rest.Interface
	coord  rest.Interface
	events rest.Interface
	authn  rest.Interface
}

var _ Interface = (*Client)(nil)

// New returns a client for c. Like a clientset, its API groups share one
// HTTP client (so one connection pool) and, when c sets QPS and no
// RateLimiter, one token bucket of c.QPS and c.Burst.
func New(c *rest.Config) (*Client, error) {
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: http client: %w", err)
	}
	return NewForConfigAndClient(c, httpClient)
}

// NewForConfigAndClient is New on an HTTP client of the caller's, for a
// caller that shapes the transport (the benchmarks impersonate agents and
// cut their links in it); c's transport settings are then ignored.
func NewForConfigAndClient(c *rest.Config, httpClient *http.Client) (*Client, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubeclient: burst must be > 0 when QPS is set (%v) and no rate limiter is given", cfg.QPS)
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	group := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
		gcfg := cfg
		gcfg.GroupVersion = &gv
		gcfg.APIPath = apiPath
		gcfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gcfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubeclient: %s client: %w", gv, err)
		}
		return rc, nil
	}
	out := &Client{}
	var err error
	if out.core, err = group(CoreGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if out.coord, err = group(coordinationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if out.events, err = group(EventsGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if out.authn, err = group(authenticationv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return out, nil
}

// Nodes reaches the cluster's Nodes, in JSON: the agent's Node type has no
// protobuf codec.
func (c *Client) Nodes() NodeInterface { return nodes{c.core} }

// Leases reaches the Leases of namespace, in protobuf as client-go's typed
// client prefers.
func (c *Client) Leases(namespace string) LeaseInterface { return leases{c.coord, namespace} }

// Events reaches the events.k8s.io/v1 Events of namespace, in JSON.
func (c *Client) Events(namespace string) EventInterface { return events{c.events, namespace} }

// SelfSubjectReviews reaches authentication.k8s.io/v1 SelfSubjectReviews.
func (c *Client) SelfSubjectReviews() SelfSubjectReviewInterface { return reviews{c.authn} }

// into finishes r into out; out is returned only when the call succeeded.
func into[T runtime.Object](ctx context.Context, r *rest.Request, out T) (T, error) {
	if err := r.Do(ctx).Into(out); err != nil {
		var none T
		return none, err
	}
	return out, nil
}

type nodes struct{ rc rest.Interface }

func (n nodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*Node, error) {
	return into(ctx, n.rc.Get().Resource("nodes").Name(name).VersionedParams(&opts, ParameterCodec), &Node{})
}

func (n nodes) List(ctx context.Context, opts metav1.ListOptions) (*NodeList, error) {
	return into(ctx, n.rc.Get().Resource("nodes").VersionedParams(&opts, ParameterCodec).Timeout(timeout(opts)), &NodeList{})
}

func (n nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return n.rc.Get().Resource("nodes").VersionedParams(&opts, ParameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (n nodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*Node, error) {
	return into(ctx, n.rc.Patch(pt).Resource("nodes").Name(name).SubResource(subresources...).
		VersionedParams(&opts, ParameterCodec).Body(data), &Node{})
}

// timeout is the list or watch's own timeout, as generated clients set it.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

type leases struct {
	rc rest.Interface
	ns string
}

func (l leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	return into(ctx, l.rc.Get().UseProtobufAsDefaultIfPreferred(true).Namespace(l.ns).Resource("leases").Name(name).
		VersionedParams(&opts, ParameterCodec), &coordinationv1.Lease{})
}

func (l leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return into(ctx, l.rc.Post().UseProtobufAsDefaultIfPreferred(true).Namespace(l.ns).Resource("leases").
		VersionedParams(&opts, ParameterCodec).Body(lease), &coordinationv1.Lease{})
}

func (l leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return into(ctx, l.rc.Put().UseProtobufAsDefaultIfPreferred(true).Namespace(l.ns).Resource("leases").Name(lease.Name).
		VersionedParams(&opts, ParameterCodec).Body(lease), &coordinationv1.Lease{})
}

type events struct {
	rc rest.Interface
	ns string
}

func (e events) Create(ctx context.Context, ev *Event, opts metav1.CreateOptions) (*Event, error) {
	return into(ctx, e.rc.Post().Namespace(e.ns).Resource("events").VersionedParams(&opts, ParameterCodec).Body(ev), &Event{})
}

type reviews struct{ rc rest.Interface }

func (r reviews) Create(ctx context.Context, review *authenticationv1.SelfSubjectReview, opts metav1.CreateOptions) (*authenticationv1.SelfSubjectReview, error) {
	return into(ctx, r.rc.Post().UseProtobufAsDefaultIfPreferred(true).Resource("selfsubjectreviews").
		VersionedParams(&opts, ParameterCodec).Body(review), &authenticationv1.SelfSubjectReview{})
}
