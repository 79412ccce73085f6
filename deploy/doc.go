// Package deploy holds the kustomize bases that install edgequorum (agent/ and
// webhook/) and the test that renders them and creates every object on a real
// apiserver with server-side dry run. It has no code of its own.
package deploy
