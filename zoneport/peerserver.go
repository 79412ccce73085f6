package zoneport

import (
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// peerIdleServer is how long the peer API keeps an idle connection: longer
// than the client (PeerIdleClient), so that the client always lets go first
// and never sends a request into a connection the server is closing.
const peerIdleServer = 2 * PeerIdleClient

// NewPeerServer returns the HTTP server of the peer API, to serve h on the
// port's PeerAPI listener: every request knows who sent it (CallerOf), idle
// connections outlive the client's, and Shutdown does not wait for
// connections that never carried a request. errLog receives net/http's own
// errors; nil is the standard logger.
func NewPeerServer(h http.Handler, errLog *log.Logger) *http.Server {
	fresh := &freshConns{conns: map[net.Conn]struct{}{}}
	srv := &http.Server{
		Handler:           h,
		ConnState:         fresh.track,
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		// Without an IdleTimeout, net/http would close idle connections
		// after ReadTimeout, and every probe slower than that would pay a
		// new handshake.
		IdleTimeout: peerIdleServer,
		ErrorLog:    errLog,
	}
	srv.RegisterOnShutdown(fresh.closeAll)
	return srv
}

// freshConns tracks the peer API's connections that have not sent a request
// yet. http.Server.Shutdown counts such a connection as busy for five
// seconds, and a peer's HTTP client often holds one it dialed for a request
// another connection served; closing them first lets a stopping member go at
// once instead of lying dead for those seconds while its peers judge it.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st == http.StateNew {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

// closeAll closes the connections that have carried no request: nothing is
// in flight on them.
func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}
