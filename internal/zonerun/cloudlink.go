package zonerun

import (
	"io"
	"net"
	"net/url"
	"sync"
)

// cloudLink is one agent's path to the apiserver: a TCP relay on loopback that
// the test can cut. Cutting closes every open connection and refuses new ones,
// as a site whose WAN link dropped would see resets and timeouts; agents then
// fail their API calls exactly as they would on a real cut.
type cloudLink struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newCloudLink(apiserverURL string) (*cloudLink, error) {
	u, err := url.Parse(apiserverURL)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &cloudLink{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// URL is the apiserver URL through this link (same host, so its certificate
// still matches).
func (l *cloudLink) URL() string { return "https://" + l.ln.Addr().String() }

func (l *cloudLink) serve() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		l.wg.Add(1)
		go l.relay(c)
	}
}

func (l *cloudLink) relay(c net.Conn) {
	defer l.wg.Done()
	defer l.forget(c)
	up, err := net.Dial("tcp", l.target)
	if err != nil {
		c.Close()
		return
	}
	if !l.track(up) {
		up.Close()
		c.Close()
		return
	}
	defer l.forget(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); up.Close(); done <- struct{}{} }()
	go func() { io.Copy(c, up); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}

func (l *cloudLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *cloudLink) forget(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// setCut cuts (true) or restores (false) the link.
func (l *cloudLink) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for c := range l.conns {
			c.Close()
		}
	}
}

func (l *cloudLink) close() {
	l.setCut(true)
	l.ln.Close()
	l.wg.Wait()
}
