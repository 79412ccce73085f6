// Package deploy holds the kustomize bases that install edgequorum (agent/ and
// webhook/), their rendered form in install/ (kept current by `go generate
// ./deploy` and checked by a test), and the test that creates every object on a
// real apiserver with server-side dry run.
//
// Objects hands the rendered manifests, embedded, to the demo and the test
// harness, so they install exactly the RBAC an operator does. Rendering itself
// (deploy/internal/kustomize) stays out of the edgequorum binary: kustomize
// imports package plugin, which makes the linker keep every exported symbol.
package deploy
