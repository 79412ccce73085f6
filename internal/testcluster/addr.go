package testcluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
)

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1. The
// listeners are closed before the ports are used, so another process can take one
// in between; Start retries when a component reports the address in use.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ipAllocator hands out node addresses from a loopback block chosen at random
// per cluster. Every fake kubelet binds <ip>:10250, and tests of different
// packages run as parallel processes, so clusters must not share addresses; a
// random 127.a.b.0/24 (a ≥ 1, which also keeps clear of 127.0.0.1) makes a clash
// unlikely, and AddNode skips an address that is taken anyway. Past 254 nodes
// the allocator moves on to the following /24.
type ipAllocator struct {
	mu   sync.Mutex
	base uint32 // 127.a.b.0
	next uint32 // addresses handed out so far, including skipped ones
}

// maxLoopbackNodes keeps the allocator inside 127.0.0.0/8.
const maxLoopbackNodes = 254 * 250

func newIPAllocator() *ipAllocator {
	// a stays below 251 so running into following /24s stays inside 127/8.
	a := 1 + rand.Uint32N(250)
	b := rand.Uint32N(256)
	return &ipAllocator{base: 127<<24 | a<<16 | b<<8}
}

// prefix is the /24 the first 254 addresses come from.
func (a *ipAllocator) prefix() netip.Prefix {
	return netip.PrefixFrom(u32Addr(a.base), 24)
}

func (a *ipAllocator) allocate() (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= maxLoopbackNodes {
		return netip.Addr{}, errors.New("testcluster: loopback node addresses exhausted")
	}
	n := a.next
	a.next++
	// Skip .0 and .255 of every /24: they are network and broadcast addresses
	// by habit, and people reading logs expect them to be.
	return u32Addr(a.base + (n/254)<<8 + n%254 + 1), nil
}

func u32Addr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// podCIDR returns the pod range of the i-th node. Pod IPs end up in
// EndpointSlices, whose validation rejects loopback addresses, so pods cannot
// borrow their node's 127.x address; they get addresses from 10.64.0.0/10 that
// nothing routes, which is all the EndpointSlice controller needs.
func podCIDR(i int) (netip.Prefix, error) {
	if i < 0 || i >= 1<<14 {
		return netip.Prefix{}, fmt.Errorf("testcluster: no pod range for node #%d", i)
	}
	v := (uint32(10)<<24 | uint32(64)<<16) + uint32(i)<<8
	return netip.PrefixFrom(u32Addr(v), 24), nil
}
