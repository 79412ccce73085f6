package zoneport

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/testkeys"
)

// BenchmarkPeerAPIGet is one agent probe as a member of a large zone sends
// and serves it about a hundred times a second: GET /healthz on a kept,
// authenticated zone-port connection over real loopback sockets, the client
// and the peer server of this package at both ends.
func BenchmarkPeerAPIGet(b *testing.B) {
	keys := testkeys.Ring(b, "k1", "a")
	server, client := newTestPeer(b, "server"), newTestPeer(b, "client")
	const serverIP, clientIP = "127.0.11.1", "127.0.11.2"
	list := &memberList{ok: true}
	list.set([]Candidate{server.candidate(serverIP), client.candidate(clientIP)}, true)
	srvNet := peerNetOn(b, HostNetwork(net.ParseIP(serverIP)), serverIP, keys, server, list)
	if err := srvNet.listen(serverIP + ":9470"); err != nil {
		b.Fatal(err)
	}
	srv := NewPeerServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	}), nil)
	go srv.Serve(srvNet.peerAPI)
	b.Cleanup(func() { srv.Close(); srvNet.close() })
	clientNet := peerNetOn(b, HostNetwork(net.ParseIP(clientIP)), clientIP, keys, client, list)
	b.Cleanup(clientNet.close)
	hc := clientNet.httpClient()
	url := "https://" + srvNet.advertise + "/healthz"
	get := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	get() // the handshake is not what is measured
	b.ReportAllocs()
	for b.Loop() {
		get()
	}
}
