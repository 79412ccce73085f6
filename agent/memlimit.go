package agent

import "github.com/edgequorum/edgequorum/internal/memlimit"

// MemoryLimitAuto is the --memory-limit that derives the Go soft memory limit
// from the container's memory limit.
const MemoryLimitAuto = memlimit.Auto
