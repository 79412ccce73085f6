// Package exepages lets a long-running process give back the pages of its
// own executable that it touched once, at start-up, and no longer uses.
//
// A Go binary's package initialisers, flag parsing and one-off set-up code
// lie all over its text, and the kernel maps the cached pages around every
// page fault (fault-around, 64 KiB by default), so a process that ran its
// start-up holds nearly its whole binary resident whatever it does next.
// Release drops the process's mappings of those pages (madvise
// MADV_DONTNEED on the executable's read-only mappings); the page cache
// keeps them, so a page still in use comes back on a minor fault, and the
// process's resident set then holds what it touches. The pages left in the
// page cache are clean and unmapped: the first memory the kernel reclaims
// for the workload beside it.
//
// It owns only that: which of the process's own mappings are safe to drop,
// and dropping them. It must not touch a writable mapping, nor a read-only
// one with a page written before it was made read-only (relocations of a
// position-independent binary): dropping those would lose what was written.
package exepages

// Stats says what one Release did.
type Stats struct {
	// Mappings is how many of the executable's mappings were dropped.
	Mappings int
	// Skipped is how many read-only mappings of it were left because a
	// page of them had been written (copied on write).
	Skipped int
	// ResidentBefore and ResidentAfter are the bytes of those mappings
	// resident in this process before and after.
	ResidentBefore, ResidentAfter uint64
}
