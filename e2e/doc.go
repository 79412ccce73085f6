// Package e2e holds the end-to-end tests: real kube-apiserver, etcd and
// kube-controller-manager from internal/testcluster, agents and the webhook as
// real bin/edgequorum processes. It has no code of its own.
package e2e
