package store

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

func TestCommandRoundTrip(t *testing.T) {
	t.Parallel()
	cet := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		cmd  Command
		want Command // the decoded form; times come back in UTC
	}{
		{"report batch", batch(1, report("a", 1, ok("b", 90), fail("c")), report("b", 2)),
			batch(1, report("a", 1, ok("b", 90), fail("c")), report("b", 2))},
		{"empty report batch", batch(1), ReportBatch{At: at(1)}},
		{"report batch times in another zone",
			ReportBatch{At: at(1).In(cet), Reports: []zone.Report{{From: "a", Seq: 1, SentAt: at(0).In(cet)}}},
			ReportBatch{At: at(1), Reports: []zone.Report{{From: "a", Seq: 1, SentAt: at(0)}}}},
		{"verdict batch", VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy), verdict("b", zone.Unknown)}},
			VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy), verdict("b", zone.Unknown)}}},
		{"member set", members("a", "b"), members("a", "b")},
		{"empty member set", MemberSet{}, MemberSet{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := mustEncode(t, tt.cmd)
			if data[0] != FormatVersion || CommandType(data[1]) != tt.cmd.Type() {
				t.Errorf("header % x, want version %d type %d", data[:2], FormatVersion, tt.cmd.Type())
			}
			got, err := DecodeCommand(data)
			if err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decoded\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestEncodeRejectsInvalidCommands(t *testing.T) {
	t.Parallel()
	withReport := func(f func(r *zone.Report)) ReportBatch {
		r := report("a", 1, ok("b", 50), ok("c", 60))
		f(&r)
		return batch(1, r)
	}
	withVerdict := func(f func(v *zone.Verdict)) VerdictBatch {
		v := verdict("a", zone.Healthy)
		f(&v)
		return VerdictBatch{Verdicts: []zone.Verdict{v}}
	}
	withMember := func(f func(m *zone.Member)) MemberSet {
		m := member("a")
		f(&m)
		return MemberSet{Members: []zone.Member{m, member("b")}}
	}
	tests := []struct {
		name string
		cmd  Command
	}{
		{"zero batch time", ReportBatch{Reports: []zone.Report{report("a", 1)}}},
		{"batch time out of range", ReportBatch{At: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"empty sender", withReport(func(r *zone.Report) { r.From = "" })},
		{"long sender", withReport(func(r *zone.Report) { r.From = strings.Repeat("n", maxNameLen+1) })},
		{"zero sent-at", withReport(func(r *zone.Report) { r.SentAt = time.Time{} })},
		{"empty peer", withReport(func(r *zone.Report) { r.Results[0].Peer = "" })},
		{"unsorted results", withReport(func(r *zone.Report) { r.Results[0], r.Results[1] = r.Results[1], r.Results[0] })},
		{"duplicate peer", withReport(func(r *zone.Report) { r.Results[1].Peer = r.Results[0].Peer })},
		{"NaN score", withReport(func(r *zone.Report) { r.Results[0].Score = math.NaN() })},
		{"negative score", withReport(func(r *zone.Report) { r.Results[0].Score = -1 })},
		{"score above 100", withReport(func(r *zone.Report) { r.Results[0].Score = 100.5 })},
		{"negative latency", withReport(func(r *zone.Report) { r.Results[0].Latency = -1 })},
		{"verdict without node", withVerdict(func(v *zone.Verdict) { v.Node = "" })},
		{"empty state", withVerdict(func(v *zone.Verdict) { v.State = "" })},
		{"invalid state", withVerdict(func(v *zone.Verdict) { v.State = "fine" })},
		{"negative pros", withVerdict(func(v *zone.Verdict) { v.Pros = -1 })},
		{"duplicate verdict", VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy), verdict("a", zone.Unknown)}}},
		{"member without node", withMember(func(m *zone.Member) { m.Node = "" })},
		{"member without server ID", withMember(func(m *zone.Member) { m.ServerID = "" })},
		{"member without role", withMember(func(m *zone.Member) { m.Role = "" })},
		{"shared server ID", withMember(func(m *zone.Member) { m.ServerID = "id-b" })},
		{"duplicate member", members("a", "a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			switch c := tt.cmd.(type) {
			case ReportBatch:
				_, err = EncodeReportBatch(c)
			case VerdictBatch:
				_, err = EncodeVerdictBatch(c)
			case MemberSet:
				_, err = EncodeMemberSet(c)
			}
			if !errors.Is(err, ErrBadCommand) {
				t.Errorf("encode = %v, want ErrBadCommand", err)
			}
		})
	}
}

func TestDecodeCommandErrors(t *testing.T) {
	t.Parallel()
	valid := mustEncode(t, members("a"))
	rb := mustEncode(t, batch(1, report("a", 1, ok("b", 50))))
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"nil", nil, ErrBadCommand},
		{"one byte", []byte{FormatVersion}, ErrBadCommand},
		{"unknown version", append([]byte{FormatVersion + 1}, valid[1:]...), ErrUnknownVersion},
		{"unknown type", []byte{FormatVersion, 200, '{', '}'}, ErrUnknownType},
		{"not JSON", []byte("\x01\x03members"), ErrBadCommand},
		{"JSON of the wrong shape", []byte("\x01\x03[]"), ErrBadCommand},
		{"null body", []byte("\x01\x03null"), nil},
		{"second value", append(bytes.Clone(valid), "{}"...), ErrBadCommand},
		{"unknown field", []byte(`` + "\x01\x03" + `{"members":[],"x":1}`), ErrBadCommand},
		{"unknown nested field", []byte("\x01\x02" + `{"verdicts":[{"node":"a","state":"healthy","vote":1}]}`), ErrBadCommand},
		{"report batch without body", []byte{FormatVersion, byte(TypeReportBatch)}, ErrBadCommand},
		{"report batch truncated", rb[:len(rb)-1], ErrBadCommand},
		{"report batch trailing byte", append(bytes.Clone(rb), 0), ErrBadCommand},
		{"report batch forged report count", patchAt(rb, 10, 0x7f), ErrBadCommand},
		{"report batch bad boolean", patchAt(rb, len(rb)-17, 2), ErrBadCommand},
		{"report batch bad varint", append(bytes.Clone(rb[:10]), bytes.Repeat([]byte{0xff}, 11)...), ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := DecodeCommand(tt.data)
			if tt.want == nil {
				if err != nil {
					t.Errorf("DecodeCommand = %v, want success", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || c != nil {
				t.Errorf("DecodeCommand = %v, %v; want nil, %v", c, err, tt.want)
			}
		})
	}
}

// patchAt returns a copy of b with b[i] = v.
func patchAt(b []byte, i int, v byte) []byte {
	c := bytes.Clone(b)
	c[i] = v
	return c
}

// FuzzDecodeCommand checks that the decoder never panics and that whatever it
// accepts re-encodes to a fixed point: encode(decode(x)) decodes and encodes to
// the same bytes, so replicas and leader agree on what a command means.
func FuzzDecodeCommand(f *testing.F) {
	seeds := []Command{
		batch(1, report("a", 1, ok("b", 90), fail("c")), report("b", 2)),
		batch(1),
		VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy), verdict("b", zone.Unhealthy)}},
		VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy)}, Basis: 42, VoteTimeout: 10 * time.Second},
		members("a", "b", "c"),
		MemberSet{},
	}
	for _, c := range seeds {
		f.Add(mustEncode(f, c))
	}
	// The legacy verdict batch, which names no basis.
	f.Add([]byte("\x01\x02{\"verdicts\":[{\"node\":\"a\",\"state\":\"healthy\",\"pros\":2,\"cons\":0,\"members\":3,\"term\":1,\"leader\":\"a\",\"decidedAt\":\"2025-03-01T12:00:00Z\"}]}"))
	f.Add([]byte{})
	f.Add([]byte{FormatVersion, byte(TypeReportBatch)})
	f.Add([]byte("\x01\x03{\"members\":[{\"node\":\"a\",\"serverID\":\"x\",\"role\":\"voter\",\"joinedAt\":\"2025-03-01T12:00:00+01:00\"}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			if c != nil {
				t.Fatalf("error %v with command %+v", err, c)
			}
			if !errors.Is(err, ErrBadCommand) && !errors.Is(err, ErrUnknownType) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded command does not validate: %v", err)
		}
		first, err := encode(c)
		if err != nil {
			t.Fatalf("decoded command does not encode: %v", err)
		}
		again, err := DecodeCommand(first)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		second, err := encode(again)
		if err != nil {
			t.Fatalf("re-decoded command does not encode: %v", err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("encoding is not a fixed point:\n%q\n%q", first, second)
		}
	})
}
