package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// FormatVersion is the command header format this package writes. A replica
// never guesses at a format it does not know: a leader must not emit a newer
// version until every member of its zone announces a level that reads it
// (skew.Zone), and a reader refuses one above it as a newer release's.
const FormatVersion byte = 1

// OldestFormatVersion is the oldest header format this package reads:
// release N−1's.
const OldestFormatVersion byte = 1

// headerLen is the version byte plus the type byte in front of every command.
const headerLen = 2

// maxNameLen bounds node names (Kubernetes node names are DNS subdomains of at
// most 253 bytes). Without a bound a name could exceed bbolt's key size limit and
// fail inside Apply on every replica instead of at the leader's Encode.
const maxNameLen = 253

// CommandType tells DecodeCommand which body follows the header.
type CommandType byte

// Command types. The numbers are part of the replicated log: never reuse or
// renumber one.
const (
	TypeReportBatch  CommandType = 1
	TypeVerdictBatch CommandType = 2
	TypeMemberSet    CommandType = 3
	// TypeSignedReportBatch is a ReportBatch whose reports carry their
	// senders' node signatures. It replaced TypeReportBatch, which is still
	// read (an old log may hold it) but whose reports, unsigned, are skipped.
	TypeSignedReportBatch CommandType = 4
	// TypeTalliedVerdictBatch is a VerdictBatch that names the state it was
	// tallied from and the vote timeout it used, so that every replica can
	// tally again and refuse a verdict the evidence does not support. It
	// replaced TypeVerdictBatch, which is still read, but whose verdicts,
	// unchecked, are refused.
	TypeTalliedVerdictBatch CommandType = 5
	// TypeAnnouncedReportBatch is a SignedReportBatch whose reports carry
	// their senders' announcements (release and protocol level), from which
	// every replica knows the level its zone may use. It replaced
	// TypeSignedReportBatch, which is still read.
	TypeAnnouncedReportBatch CommandType = 6
)

// typeLevels is the protocol level that introduced each command type: a
// leader commits a type only once its zone is at that level (skew.Zone),
// and a reader below it treats the type as one of a newer release.
var typeLevels = map[CommandType]skew.Level{
	TypeReportBatch:          skew.Level1,
	TypeVerdictBatch:         skew.Level1,
	TypeMemberSet:            skew.Level1,
	TypeSignedReportBatch:    skew.Level1,
	TypeTalliedVerdictBatch:  skew.Level1,
	TypeAnnouncedReportBatch: skew.Level1,
}

// reportTypes are the encodings of a report batch that carry
// announcements, newest first: a leader writes the newest its zone reads
// (Encode). A test build of the next release (tag skewnext) puts one in
// front, so that a zone of mixed releases can be tested in one process.
var reportTypes = []CommandType{TypeAnnouncedReportBatch}

// TypeLevel is the protocol level that introduced t; ok is false for a type
// this build does not know.
func TypeLevel(t CommandType) (l skew.Level, ok bool) {
	l, ok = typeLevels[t]
	return l, ok
}

// String names the type in errors and logs.
func (t CommandType) String() string {
	switch t {
	case TypeReportBatch:
		return "ReportBatch"
	case TypeVerdictBatch:
		return "VerdictBatch"
	case TypeMemberSet:
		return "MemberSet"
	case TypeSignedReportBatch:
		return "SignedReportBatch"
	case TypeTalliedVerdictBatch:
		return "TalliedVerdictBatch"
	case TypeAnnouncedReportBatch:
		return "AnnouncedReportBatch"
	}
	return fmt.Sprintf("CommandType(%d)", byte(t))
}

// Errors DecodeCommand returns (wrapped). Apply returns them too, with the state
// untouched, so the leader can tell a command it built wrong from a storage
// failure.
var (
	// ErrUnknownVersion means the command was written in a format this binary
	// does not read.
	ErrUnknownVersion = errors.New("unknown command format version")
	// ErrUnknownType means the header names no known command.
	ErrUnknownType = errors.New("unknown command type")
	// ErrBadCommand means the body is truncated, not well-formed, or carries
	// content the store refuses (an empty name, an invalid state, ...).
	ErrBadCommand = errors.New("bad command")
)

// Command is one of ReportBatch, VerdictBatch or MemberSet. The interface is
// sealed (see command()): Apply only knows these three.
type Command interface {
	// Type is the header byte the command is encoded under.
	Type() CommandType
	// Validate reports whether the store would accept the command. Encode and
	// DecodeCommand call it, so an invalid command is refused at the leader
	// instead of failing on every replica.
	Validate() error

	command()
}

// ReportBatch carries the verified reports the leader collected since its last
// batch.
type ReportBatch struct {
	// At is the leader's clock when it formed the batch. Replicas store it as
	// each report's receive time, so every member agrees on how fresh a report
	// is without consulting its own clock.
	At time.Time
	// Reports are applied in order; a sender may appear more than once.
	Reports []zone.Report
}

// VerdictBatch carries verdicts the leader computed, committed before they are
// written to the API so that a new leader continues from them. Every replica
// tallies them again (verdict.go) and applies only those the committed
// evidence supports.
type VerdictBatch struct {
	Verdicts []zone.Verdict `json:"verdicts"`
	// Basis is the applied index of the state the leader tallied: replicas
	// check the verdicts only against that same evidence, and refuse the
	// batch as stale when evidence was applied after it.
	Basis uint64 `json:"basis,omitempty"`
	// VoteTimeout is how fresh the leader required a report to be.
	VoteTimeout time.Duration `json:"voteTimeout,omitempty"`
	// Recovery marks the verdicts of an operator's recovery from a lost
	// quorum: "unhealthy" for members that are no voters of the recovered
	// configuration and have been silent for VoteTimeout, which no tally of
	// the survivors could give (they are too few for a quorum of the old
	// zone).
	Recovery bool `json:"recovery,omitempty"`
	// unchecked marks a batch decoded from the legacy TypeVerdictBatch,
	// which carries neither.
	unchecked bool
}

// MemberSet replaces the member list. It is a full list rather than a diff so
// that applying it twice, or after a missed one, converges on the same state.
type MemberSet struct {
	Members []zone.Member `json:"members"`
}

// Type implements Command. Report batches are always written signed and
// announced.
func (ReportBatch) Type() CommandType { return TypeAnnouncedReportBatch }

// Type implements Command. Verdict batches are always written tallied.
func (VerdictBatch) Type() CommandType { return TypeTalliedVerdictBatch }

// Type implements Command.
func (MemberSet) Type() CommandType { return TypeMemberSet }

func (ReportBatch) command()  {}
func (VerdictBatch) command() {}
func (MemberSet) command()    {}

// Validate implements Command.
func (b ReportBatch) Validate() error {
	if !representable(b.At) {
		return fmt.Errorf("%w: report batch time %v is zero or out of range", ErrBadCommand, b.At)
	}
	for i := range b.Reports {
		if err := ValidateReport(&b.Reports[i]); err != nil {
			return fmt.Errorf("report %d: %w", i, err)
		}
	}
	return nil
}

// MaxReportResults bounds the results one report may carry: a member reports
// on each of its peers, so this is far above any zone's size, yet one report
// cannot make a batch, or the Raft log entry that carries it, unbounded.
const MaxReportResults = 10000

// ValidateReport applies the rules a report must meet to enter a ReportBatch.
// The leader's report intake calls it per report, so one malformed report is
// refused at the door instead of failing a whole batch at Encode.
func ValidateReport(r *zone.Report) error {
	if err := validName(r.From); err != nil {
		return fmt.Errorf("%w: report sender: %w", ErrBadCommand, err)
	}
	if len(r.Results) > MaxReportResults {
		return fmt.Errorf("%w: report from %q: %d results, at most %d", ErrBadCommand, r.From, len(r.Results), MaxReportResults)
	}
	if !representable(r.SentAt) {
		return fmt.Errorf("%w: report from %q: sent-at %v is zero or out of range", ErrBadCommand, r.From, r.SentAt)
	}
	if err := (skew.Announcement{Release: r.Release, Level: r.Level}).Validate(); err != nil {
		return fmt.Errorf("%w: report from %q: %w", ErrBadCommand, r.From, err)
	}
	for i, res := range r.Results {
		if err := validName(res.Peer); err != nil {
			return fmt.Errorf("%w: report from %q: result %d: %w", ErrBadCommand, r.From, i, err)
		}
		// The MAC covers results in strictly ascending order, so a duplicate or
		// unsorted peer cannot come from a verified report.
		if i > 0 && r.Results[i-1].Peer >= res.Peer {
			return fmt.Errorf("%w: report from %q: results not strictly sorted by peer at %q (see zone.SortResults)",
				ErrBadCommand, r.From, res.Peer)
		}
		if math.IsNaN(res.Score) || res.Score < 0 || res.Score > 100 {
			return fmt.Errorf("%w: report from %q: score %v for %q outside 0..100", ErrBadCommand, r.From, res.Score, res.Peer)
		}
		if res.Latency < 0 {
			return fmt.Errorf("%w: report from %q: negative latency for %q", ErrBadCommand, r.From, res.Peer)
		}
	}
	return nil
}

// Validate implements Command.
func (b VerdictBatch) Validate() error {
	seen := make(map[string]struct{}, len(b.Verdicts))
	for i, v := range b.Verdicts {
		if err := validName(v.Node); err != nil {
			return fmt.Errorf("%w: verdict %d: %w", ErrBadCommand, i, err)
		}
		if _, dup := seen[v.Node]; dup {
			return fmt.Errorf("%w: two verdicts for %q in one batch", ErrBadCommand, v.Node)
		}
		seen[v.Node] = struct{}{}
		if !v.State.Valid() {
			return fmt.Errorf("%w: verdict for %q: invalid state %q", ErrBadCommand, v.Node, v.State)
		}
		if v.Pros < 0 || v.Cons < 0 || v.Members < 0 {
			return fmt.Errorf("%w: verdict for %q: negative count", ErrBadCommand, v.Node)
		}
	}
	if b.VoteTimeout < 0 {
		return fmt.Errorf("%w: negative vote timeout %v", ErrBadCommand, b.VoteTimeout)
	}
	return nil
}

// Validate implements Command.
func (m MemberSet) Validate() error {
	nodes := make(map[string]struct{}, len(m.Members))
	ids := make(map[string]string, len(m.Members))
	for i, mem := range m.Members {
		if err := validName(mem.Node); err != nil {
			return fmt.Errorf("%w: member %d: %w", ErrBadCommand, i, err)
		}
		if _, dup := nodes[mem.Node]; dup {
			return fmt.Errorf("%w: member %q listed twice", ErrBadCommand, mem.Node)
		}
		nodes[mem.Node] = struct{}{}
		if mem.ServerID == "" {
			return fmt.Errorf("%w: member %q has no server ID", ErrBadCommand, mem.Node)
		}
		if other, dup := ids[mem.ServerID]; dup {
			return fmt.Errorf("%w: members %q and %q share server ID %q", ErrBadCommand, other, mem.Node, mem.ServerID)
		}
		ids[mem.ServerID] = mem.Node
		if mem.Role != zone.Voter && mem.Role != zone.Nonvoter {
			return fmt.Errorf("%w: member %q: role %q is neither %q nor %q", ErrBadCommand, mem.Node, mem.Role, zone.Voter, zone.Nonvoter)
		}
	}
	return nil
}

// Encode validates c and encodes it for raft.Apply in a zone at level
// zoneLevel (skew.Zone of what its members announced). A command whose type
// that level does not read yet is refused with an error wrapping
// ErrNotYet: some member could not apply it, so a leader keeps to the
// formats its zone reads.
func Encode(c Command, zoneLevel skew.Level) ([]byte, error) {
	t := c.Type()
	if _, ok := c.(ReportBatch); ok {
		for _, rt := range reportTypes {
			if l := typeLevels[rt]; skew.Reads(zoneLevel, l) {
				t = rt
				break
			}
		}
	}
	if l, ok := TypeLevel(t); !ok || !skew.Reads(zoneLevel, l) {
		return nil, fmt.Errorf("encode %v: %w: the zone is at %v, the type needs %v", t, ErrNotYet, zoneLevel, l)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("encode %v: %w", t, err)
	}
	b, err := marshalAs(c, t)
	if err != nil {
		return nil, fmt.Errorf("encode %v: %w", t, err)
	}
	return b, nil
}

// ErrNotYet means a command's format is newer than the zone reads.
var ErrNotYet = errors.New("not every member of the zone reads this format yet")

// EncodeReportBatch validates b and encodes it for a zone at this build's
// level: for tests and tools; a leader uses Encode with its zone's level.
func EncodeReportBatch(b ReportBatch) ([]byte, error) { return Encode(b, skew.Current()) }

// EncodeVerdictBatch is EncodeReportBatch for a VerdictBatch.
func EncodeVerdictBatch(b VerdictBatch) ([]byte, error) { return Encode(b, skew.Current()) }

// EncodeMemberSet is EncodeReportBatch for a MemberSet.
func EncodeMemberSet(m MemberSet) ([]byte, error) { return Encode(m, skew.Current()) }

func encode(c Command) ([]byte, error) { return Encode(c, skew.Current()) }

// marshal encodes without validating; tests use it to build invalid commands.
//
// A ReportBatch has a binary body: a full batch of a 129-member zone carries
// 16,512 results, and decoding them from JSON took most of Apply's time on
// every replica. The rare commands stay JSON, readable in a log dump.
func marshal(c Command) ([]byte, error) { return marshalAs(c, c.Type()) }

func marshalAs(c Command, t CommandType) ([]byte, error) {
	b := []byte{FormatVersion, byte(t)}
	if rb, ok := c.(ReportBatch); ok {
		return rb.appendBinary(b), nil
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append(b, body...), nil
}

// DecodeCommand parses and validates one command as this build reads it. It
// never panics on hostile input, so Apply can hand it any log entry.
func DecodeCommand(data []byte) (Command, error) { return DecodeCommandAt(data, skew.Current()) }

// DecodeCommandAt parses and validates one command as a reader of level
// reader does: a type introduced above it, or a header format newer than
// this package writes, is an error wrapping skew.ErrTooNew, so a member of
// an older release (or one simulated in a test) tells a newer release's
// entry from a damaged one.
func DecodeCommandAt(data []byte, reader skew.Level) (Command, error) {
	if len(data) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the header", ErrBadCommand, len(data))
	}
	switch v := data[0]; {
	case v > FormatVersion:
		return nil, fmt.Errorf("%w: %w", ErrUnknownVersion,
			skew.Newer(fmt.Sprintf("command format %d", v), skew.Unannounced, reader, skew.UpgradeMember))
	case v < OldestFormatVersion:
		return nil, fmt.Errorf("%w: %d (this binary reads %d to %d)", ErrUnknownVersion, v, OldestFormatVersion, FormatVersion)
	}
	if l, ok := TypeLevel(CommandType(data[1])); !ok {
		// Only an authenticated leader writes the log, and every type
		// ever written is in typeLevels: an unknown one is a newer
		// release's.
		return nil, fmt.Errorf("%w: %d: %w", ErrUnknownType, data[1],
			skew.Newer(fmt.Sprintf("command type %d", data[1]), skew.Unannounced, reader, skew.UpgradeMember))
	} else if !skew.Reads(reader, l) {
		return nil, fmt.Errorf("%w: %v: %w", ErrUnknownType, CommandType(data[1]),
			skew.Newer(CommandType(data[1]).String(), l, reader, skew.UpgradeMember))
	}
	body := data[headerLen:]
	var (
		c   Command
		err error
	)
	switch t := CommandType(data[1]); t {
	case TypeReportBatch, TypeSignedReportBatch:
		var b ReportBatch
		err = b.decodeBinary(body, t == TypeSignedReportBatch, false)
		c = b
	case TypeVerdictBatch, TypeTalliedVerdictBatch:
		var b VerdictBatch
		err = decodeBody(body, &b)
		b.normalize()
		if t == TypeVerdictBatch {
			b.Basis, b.VoteTimeout, b.unchecked = 0, 0, true
		}
		c = b
	case TypeMemberSet:
		var m MemberSet
		err = decodeBody(body, &m)
		m.normalize()
		c = m
	default:
		if !slices.Contains(reportTypes, t) {
			return nil, fmt.Errorf("%w: %d", ErrUnknownType, byte(t))
		}
		var b ReportBatch
		err = b.decodeBinary(body, true, true)
		c = b
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v body: %w", ErrBadCommand, c.Type(), err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("decode %v: %w", c.Type(), err)
	}
	return c, nil
}

// ReportBatch body, after the header. Integers are big-endian, times Unix
// nanoseconds, counts and lengths unsigned varints:
//
//	int64 at | count reports | per report:
//	  string zone | string from | uint64 seq | int64 sent-at | byte api-reachable |
//	  string key id | bytes mac | bytes sig | uvarint level | string release |
//	  count results | per result:
//	    string peer | byte ok | uint64 float64 bits score | int64 latency
//
// Validate has checked that every time survives UnixNano. The
// TypeSignedReportBatch body is the same without level and release, the
// unsigned TypeReportBatch body without "bytes sig" too.
func (b ReportBatch) appendBinary(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.At.UnixNano()))
	dst = binary.AppendUvarint(dst, uint64(len(b.Reports)))
	for i := range b.Reports {
		r := &b.Reports[i]
		dst = appendString(dst, r.Zone)
		dst = appendString(dst, r.From)
		dst = binary.BigEndian.AppendUint64(dst, r.Seq)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.SentAt.UnixNano()))
		dst = appendBool(dst, r.APIReachable)
		dst = appendString(dst, r.KeyID)
		dst = binary.AppendUvarint(dst, uint64(len(r.MAC)))
		dst = append(dst, r.MAC...)
		dst = binary.AppendUvarint(dst, uint64(len(r.Sig)))
		dst = append(dst, r.Sig...)
		dst = binary.AppendUvarint(dst, uint64(r.Level))
		dst = appendString(dst, r.Release)
		dst = binary.AppendUvarint(dst, uint64(len(r.Results)))
		for _, res := range r.Results {
			dst = appendString(dst, res.Peer)
			dst = appendBool(dst, res.OK)
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(res.Score))
			dst = binary.BigEndian.AppendUint64(dst, uint64(res.Latency))
		}
	}
	return dst
}

// Smallest encodings of a report and a result, which bound how many a body of a
// given length can hold, so a forged count cannot make decoding allocate more
// than the body's size.
const (
	minReportLen = 1 + 1 + 8 + 8 + 1 + 1 + 1 + 1 // + 1 for the sig when signed
	minResultLen = 1 + 1 + 8 + 8
)

func (b *ReportBatch) decodeBinary(body []byte, signed, announced bool) error {
	// Every name recurs in up to one report and 128 results of a full batch;
	// interning makes that one string instead of 129.
	r := &bodyReader{b: body, names: make(map[string]string)}
	b.At = r.time()
	n := r.count(minReportLen)
	if n > 0 {
		b.Reports = make([]zone.Report, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		rep := &b.Reports[i]
		rep.Zone = r.name()
		rep.From = r.name()
		rep.Seq = r.uint64()
		rep.SentAt = r.time()
		rep.APIReachable = r.bool()
		rep.KeyID = r.name()
		rep.MAC = r.bytes()
		if signed {
			rep.Sig = r.bytes()
		}
		if announced {
			if l := r.uvarint(); l > math.MaxUint16 {
				r.fail(fmt.Errorf("level %d out of range", l))
			} else {
				rep.Level = skew.Level(l)
			}
			rep.Release = r.name()
		}
		m := r.count(minResultLen)
		if m > 0 {
			rep.Results = make([]zone.Result, m)
		}
		for j := 0; j < m && r.err == nil; j++ {
			res := &rep.Results[j]
			res.Peer = r.name()
			res.OK = r.bool()
			res.Score = math.Float64frombits(r.uint64())
			res.Latency = time.Duration(r.uint64())
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes of trailing data", len(r.b))
	}
	return r.err
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// bodyReader consumes a binary body. The first error sticks and turns every
// later read into a zero value, so decoders check once at the end.
type bodyReader struct {
	b     []byte
	err   error
	names map[string]string
}

var errShortBody = errors.New("body ends early")

func (r *bodyReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *bodyReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail(errShortBody)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *bodyReader) time() time.Time {
	return time.Unix(0, int64(r.uint64())).UTC()
}

func (r *bodyReader) bool() bool {
	if len(r.b) < 1 {
		r.fail(errShortBody)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		r.fail(fmt.Errorf("boolean byte %d", v))
	}
	return v == 1
}

func (r *bodyReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items at least minLen bytes long each.
func (r *bodyReader) count(minLen int) int {
	v := r.uvarint()
	if v > uint64(len(r.b)/minLen) {
		r.fail(fmt.Errorf("count %d exceeds what %d bytes can hold", v, len(r.b)))
		return 0
	}
	return int(v)
}

func (r *bodyReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShortBody)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return v
}

// name reads a string that recurs throughout the body.
func (r *bodyReader) name() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShortBody)
		return ""
	}
	raw := r.b[:n]
	r.b = r.b[n:]
	if v, ok := r.names[string(raw)]; ok {
		return v
	}
	v := string(raw)
	r.names[v] = v
	return v
}

// decodeBody decodes a JSON body strictly: a field this binary does not know
// means the command was written by a newer one, which must bump FormatVersion,
// and trailing bytes mean the entry is not what the leader encoded.
func decodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after body")
	}
	return nil
}

// normalize puts times into UTC so that what a replica stores does not depend on
// the time zone the leader's clock was formatted in.
func (b *VerdictBatch) normalize() {
	for i := range b.Verdicts {
		b.Verdicts[i].DecidedAt = b.Verdicts[i].DecidedAt.UTC()
	}
}

func (m *MemberSet) normalize() {
	for i := range m.Members {
		m.Members[i].JoinedAt = m.Members[i].JoinedAt.UTC()
	}
}

func validName(s string) error {
	if s == "" {
		return errors.New("empty node name")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("node name of %d bytes exceeds %d", len(s), maxNameLen)
	}
	return nil
}

// representable reports whether t survives a round trip through UnixNano, the
// form the store keeps times in. The zero time does not (it lies before 1678).
func representable(t time.Time) bool {
	return time.Unix(0, t.UnixNano()).Equal(t)
}
