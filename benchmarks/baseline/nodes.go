package baseline

import (
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// nodeList is SyncNodeList: it decides which nodes this daemon checks and
// votes on, from informer caches only.
type nodeList struct {
	cfg        Config
	state      *state
	nodes      corelisters.NodeLister
	configMaps corelisters.ConfigMapLister
	log        *slog.Logger
}

func (l *nodeList) sync() {
	host, err := l.nodes.Get(l.cfg.NodeName)
	if err != nil {
		l.log.Warn("own node not found; keeping the old node list", "err", err)
		return
	}
	nodes, err := l.zoneNodes(host)
	if err != nil {
		l.log.Warn("node list not refreshed", "err", err)
		return
	}
	l.state.setNodes(l.cfg.LocalIP, nodes)
}

// zoneNodes applies SuperEdge's rules: all non-master nodes unless zone
// checking is on; with it, the nodes of this node's zone, or only this node
// when it carries no zone label.
func (l *nodeList) zoneNodes(host *corev1.Node) ([]*corev1.Node, error) {
	notMaster, err := labels.NewRequirement(MasterLabel, selection.DoesNotExist, nil)
	if err != nil {
		return nil, fmt.Errorf("master selector: %w", err)
	}
	sel := labels.NewSelector().Add(*notMaster)
	cm, err := l.configMaps.ConfigMaps(ConfigNamespace).Get(ZoneConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		return l.nodes.List(sel)
	case err != nil:
		return nil, fmt.Errorf("read %s/%s: %w", ConfigNamespace, ZoneConfigMap, err)
	case cm.Data[TaintZoneConfigKey] == "false":
		return l.nodes.List(sel)
	}
	zoneName, ok := host.Labels[ZoneLabel]
	if !ok {
		return []*corev1.Node{host}, nil
	}
	inZone, err := labels.NewRequirement(ZoneLabel, selection.Equals, []string{zoneName})
	if err != nil {
		return nil, fmt.Errorf("zone selector: %w", err)
	}
	return l.nodes.List(sel.Add(*inZone))
}
