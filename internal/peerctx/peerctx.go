// Package peerctx carries in a context the zone peer a call is meant for. The
// probe package names the peer it probes; the zone port checks that the
// member that answered is that peer and not whoever holds its address now.
// Neither imports the other: this is their only shared word.
//
// It owns the context key and nothing else; it must not import any package
// of this module.
package peerctx

import "context"

// key is the context key of the peer's node name.
type key struct{}

// With names the peer (its node name) that calls under ctx are meant for.
func With(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, key{}, node)
}

// Node returns the peer With put in ctx, or "" when none was named.
func Node(ctx context.Context) string {
	n, _ := ctx.Value(key{}).(string)
	return n
}
