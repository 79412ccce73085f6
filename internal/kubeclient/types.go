package kubeclient

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// The agent's own types for the core/v1 Node and the events.k8s.io/v1 Event:
// the fields it reads or writes, with core/v1's JSON. Importing
// k8s.io/api/core/v1 at all would link every core type's codecs (its init
// registers them all), a tenth of the agent's binary, and events/v1 imports
// it. A Node decoded into this type keeps only these fields, so the informer
// caches less; the agent changes Nodes by patch only, so nothing it does not
// hold can be lost by writing it back.

// Group-versions of the types, as the apiserver serves them.
var (
	CoreGroupVersion   = schema.GroupVersion{Version: "v1"}
	EventsGroupVersion = schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}
)

// Values of core/v1 fields the agent compares with.
const (
	NodeReady        = "Ready"
	NodeInternalIP   = "InternalIP"
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// Node is a core/v1 Node as far as the agent reads it.
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            NodeStatus `json:"status,omitempty"`
}

// NodeStatus is the part of a Node's status the agent reads: its conditions
// (Ready, and the EdgeQuorum one the leader writes), its addresses and its
// kubelet's port.
type NodeStatus struct {
	Conditions      []zonek8s.NodeCondition `json:"conditions,omitempty"`
	Addresses       []NodeAddress           `json:"addresses,omitempty"`
	DaemonEndpoints NodeDaemonEndpoints     `json:"daemonEndpoints,omitempty"`
}

// NodeAddress is one of a Node's addresses.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// NodeDaemonEndpoints holds the port the Node's kubelet listens on.
type NodeDaemonEndpoints struct {
	KubeletEndpoint DaemonEndpoint `json:"kubeletEndpoint,omitempty"`
}

// DaemonEndpoint is a port a Node's daemon listens on (core/v1 spells the
// field "Port").
type DaemonEndpoint struct {
	Port int32 `json:"Port"`
}

// NodeList is a list of Nodes, as List and the informer read them.
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Node `json:"items"`
}

// Event is an events.k8s.io/v1 Event as the zone leader records it.
type Event struct {
	metav1.TypeMeta     `json:",inline"`
	metav1.ObjectMeta   `json:"metadata"`
	EventTime           metav1.MicroTime `json:"eventTime"`
	ReportingController string           `json:"reportingController,omitempty"`
	ReportingInstance   string           `json:"reportingInstance,omitempty"`
	Action              string           `json:"action,omitempty"`
	Reason              string           `json:"reason,omitempty"`
	Regarding           ObjectReference  `json:"regarding,omitempty"`
	Note                string           `json:"note,omitempty"`
	Type                string           `json:"type,omitempty"`
}

// ObjectReference names the object an Event is about.
type ObjectReference struct {
	Kind       string    `json:"kind,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name,omitempty"`
	UID        types.UID `json:"uid,omitempty"`
	APIVersion string    `json:"apiVersion,omitempty"`
}

// DeepCopyInto copies n into out, sharing nothing.
func (n *Node) DeepCopyInto(out *Node) {
	out.TypeMeta = n.TypeMeta
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status = NodeStatus{
		Conditions:      slices.Clone(n.Status.Conditions),
		Addresses:       slices.Clone(n.Status.Addresses),
		DaemonEndpoints: n.Status.DaemonEndpoints,
	}
}

// DeepCopy returns a copy of n sharing nothing with it.
func (n *Node) DeepCopy() *Node {
	if n == nil {
		return nil
	}
	out := new(Node)
	n.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (n *Node) DeepCopyObject() runtime.Object { return n.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *NodeList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &NodeList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Node, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (e *Event) DeepCopyObject() runtime.Object {
	if e == nil {
		return nil
	}
	out := *e
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}
