package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ErrUnreachable is returned by a dial across a cut link when the fabric is set to
// refuse rather than black-hole.
var ErrUnreachable = errors.New("faultnet: host unreachable")

// Fabric connects Hosts and decides, per ordered pair of host IPs, whether bytes
// flow. The zero value is not usable; call New.
type Fabric struct {
	mu    sync.Mutex
	cut   map[link]bool
	delay map[link]time.Duration
	conns map[*conn]struct{}
	hosts map[string]*Host
}

type link struct{ from, to string }

// New returns a fabric in which every link is up.
func New() *Fabric {
	return &Fabric{
		cut:   map[link]bool{},
		delay: map[link]time.Duration{},
		conns: map[*conn]struct{}{},
		hosts: map[string]*Host{},
	}
}

// Host returns the endpoint for ip, creating it on first use. Connections a Host
// dials leave from ip, so the far side sees which host called.
func (f *Fabric) Host(ip string) *Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.hosts[ip]; ok {
		return h
	}
	h := &Host{fabric: f, ip: ip}
	f.hosts[ip] = h
	return h
}

// Partition cuts every link between hosts of different groups, in both
// directions, and black-holes the connections already open across the cut: their
// writes vanish and their reads wait, as on a real network that lost a route.
// Hosts not named in any group keep all their links.
func (f *Fabric) Partition(groups ...[]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	group := map[string]int{}
	for i, g := range groups {
		for _, ip := range g {
			group[ip] = i
		}
	}
	for a, ga := range group {
		for b, gb := range group {
			if ga != gb {
				f.cut[link{a, b}] = true
			}
		}
	}
	f.wakeLocked()
}

// Isolate cuts ip off from every other host the fabric knows.
func (f *Fabric) Isolate(ip string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for other := range f.hosts {
		if other != ip {
			f.cut[link{ip, other}] = true
			f.cut[link{other, ip}] = true
		}
	}
	f.wakeLocked()
}

// Cut cuts the one-way link from → to.
func (f *Fabric) Cut(from, to string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut[link{from, to}] = true
	f.wakeLocked()
}

// Heal restores every link and removes every delay.
func (f *Fabric) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = map[link]bool{}
	f.delay = map[link]time.Duration{}
	f.wakeLocked()
}

// SetDelay delays every write from → to by d (0 removes the delay).
func (f *Fabric) SetDelay(from, to string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		delete(f.delay, link{from, to})
		return
	}
	f.delay[link{from, to}] = d
}

func (f *Fabric) linkState(from, to string) (up bool, delay time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.cut[link{from, to}], f.delay[link{from, to}]
}

// wakeLocked nudges blocked readers so they re-check their link.
func (f *Fabric) wakeLocked() {
	for c := range f.conns {
		c.wake()
	}
}

func (f *Fabric) track(c *conn) {
	f.mu.Lock()
	f.conns[c] = struct{}{}
	f.mu.Unlock()
}

func (f *Fabric) untrack(c *conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// Counters are the bytes and connections a Host saw, for traffic benchmarks.
type Counters struct {
	BytesSent, BytesReceived int64
	Dials, Accepts           int64
}

// Host is one agent's view of the fabric. It implements the Dial and Listen
// methods raftzone needs.
type Host struct {
	fabric *Fabric
	ip     string

	sent, received, dials, accepts atomic.Int64
}

// IP returns the host's address.
func (h *Host) IP() string { return h.ip }

// Counters returns the traffic seen so far.
func (h *Host) Counters() Counters {
	return Counters{BytesSent: h.sent.Load(), BytesReceived: h.received.Load(),
		Dials: h.dials.Load(), Accepts: h.accepts.Load()}
}

// Listen listens on a real loopback socket; the address must be this host's IP.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen %s: %w", address, err)
	}
	if host != h.ip {
		return nil, fmt.Errorf("faultnet: host %s cannot listen on %s", h.ip, address)
	}
	l, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: l, host: h}, nil
}

// DialContext dials from this host's IP. A dial across a cut link waits until the
// context ends, like a SYN into a black hole.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	to, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("faultnet: dial %s: %w", address, err)
	}
	if up, _ := h.fabric.linkState(h.ip, to); !up {
		<-ctx.Done()
		return nil, fmt.Errorf("faultnet: dial %s from %s: %w", address, h.ip, ctx.Err())
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(h.ip)}}
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	h.dials.Add(1)
	return h.fabric.wrap(c, h, to), nil
}

type listener struct {
	net.Listener
	host *Host
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		from, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		if up, _ := l.host.fabric.linkState(from, l.host.ip); !up {
			// The SYN never arrived; the dialer's own timeout ends its side.
			c.Close()
			continue
		}
		l.host.accepts.Add(1)
		return l.host.fabric.wrap(c, l.host, from), nil
	}
}

// Connected reports whether bytes flow both ways between a and b, so simulated
// probes can fail exactly where the fabric cut.
func (f *Fabric) Connected(a, b string) bool {
	up1, _ := f.linkState(a, b)
	up2, _ := f.linkState(b, a)
	return up1 && up2
}
