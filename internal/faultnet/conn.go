package faultnet

import (
	"net"
	"os"
	"sync"
	"time"
)

// conn applies the fabric's link state to one real connection. Writes on a cut
// link are swallowed; reads on a cut link wait for the link to heal, for the
// deadline, or for Close — whatever comes first.
type conn struct {
	net.Conn
	fabric   *Fabric
	host     *Host
	peer     string
	mu       sync.Mutex
	notify   chan struct{}
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

func (f *Fabric) wrap(c net.Conn, h *Host, peer string) *conn {
	w := &conn{Conn: c, fabric: f, host: h, peer: peer,
		notify: make(chan struct{}, 1), closed: make(chan struct{})}
	f.track(w)
	return w
}

func (c *conn) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *conn) Write(b []byte) (int, error) {
	up, delay := c.fabric.linkState(c.host.ip, c.peer)
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.closed:
			t.Stop()
			return 0, net.ErrClosed
		}
	}
	if !up {
		return len(b), nil
	}
	n, err := c.Conn.Write(b)
	c.host.sent.Add(int64(n))
	return n, err
}

func (c *conn) Read(b []byte) (int, error) {
	for {
		if up, _ := c.fabric.linkState(c.peer, c.host.ip); up {
			break
		}
		c.mu.Lock()
		dl := c.deadline
		c.mu.Unlock()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-c.notify:
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		if up, _ := c.fabric.linkState(c.peer, c.host.ip); !up {
			// Bytes sent before the cut but read after it: a real network
			// would have lost them in flight; drop them and wait again.
			return c.Read(b)
		}
	}
	c.host.received.Add(int64(n))
	return n, err
}

func (c *conn) SetDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) setReadDeadline(t time.Time) {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	c.wake()
}

func (c *conn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.fabric.untrack(c)
	})
	return c.Conn.Close()
}
