package raftzone

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
)

const serverIDFile = "server-id"

// loadOrCreateServerID returns the member's Raft server ID, creating a random
// UUID on first start. It is never the node name: a node whose data dir was
// wiped must come back as a new server so the leader can retire the old one.
func loadOrCreateServerID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, serverIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if _, perr := uuid.Parse(id); perr != nil {
			return "", fmt.Errorf("server ID file %s is corrupt (%q); remove it to make this member rejoin as a new server: %w", path, id, perr)
		}
		return id, nil
	case errors.Is(err, fs.ErrNotExist):
		id := uuid.NewString()
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return "", fmt.Errorf("--data-dir %s: %w", dataDir, err)
		}
		if err := atomicfile.Write(path, []byte(id+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("persist server ID: %w", err)
		}
		return id, nil
	default:
		return "", fmt.Errorf("read server ID: %w", err)
	}
}

// seqBlock is how many report sequence numbers are reserved per fsync. A crash
// skips the rest of a block, which is harmless: seqs need only increase.
const seqBlock = 1024

// seqAllocator hands out strictly increasing report sequence numbers that stay
// increasing across restarts: it persists a reserved upper bound and starts the
// next run from there.
type seqAllocator struct {
	mu    sync.Mutex
	path  string
	next  uint64
	limit uint64
}

func openSeqAllocator(path string, now func() time.Time) (*seqAllocator, error) {
	a := &seqAllocator{path: path}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		v, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("report sequence file %s is corrupt: %w", path, perr)
		}
		a.next = v
	case errors.Is(err, fs.ErrNotExist):
		// Start from the clock so that even a member whose data dir was wiped
		// does not reuse the seqs of its former self.
		a.next = uint64(now().UnixMicro())
	default:
		return nil, fmt.Errorf("read report sequence: %w", err)
	}
	a.limit = a.next
	return a, nil
}

// atLeast moves the allocator forward to v.
func (a *seqAllocator) atLeast(v uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next < v {
		a.next = v
	}
	return a.reserveLocked()
}

// Next returns the next sequence number.
func (a *seqAllocator) Next() (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.reserveLocked(); err != nil {
		return 0, err
	}
	v := a.next
	a.next++
	return v, nil
}

func (a *seqAllocator) reserveLocked() error {
	if a.next < a.limit {
		return nil
	}
	limit := a.next + seqBlock
	if err := atomicfile.Write(a.path, []byte(strconv.FormatUint(limit, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("persist report sequence: %w", err)
	}
	a.limit = limit
	return nil
}
