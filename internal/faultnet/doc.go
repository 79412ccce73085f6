// Package faultnet is an in-process network fabric for tests and benchmarks: every
// agent gets a Host bound to its own loopback address, and the Fabric between them
// can partition, black-hole and delay traffic and counts every byte that crosses it.
//
// It wraps real loopback sockets (so TLS, timeouts and kernel buffering are real)
// rather than simulating a network, and it must never dial anything but the
// addresses its caller hands it.
package faultnet
