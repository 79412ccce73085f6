package probe

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
	}{
		{"kubelet", Spec{Kind: KindKubelet}},
		{"tcp:port=10250,weight=0.5,timeout=1s,period=5s,failure-threshold=3", Spec{
			Kind: KindTCP, Port: 10250, Weight: 0.5, Timeout: time.Second, Period: 5 * time.Second, FailureThreshold: 3}},
		{" http : port = 8080 , path=/healthz?verbose=1 , header=X-Probe: yes , header=Host:example.test ", Spec{
			Kind: KindHTTP, Port: 8080, Path: "/healthz?verbose=1",
			Headers: []Header{{"X-Probe", "yes"}, {"Host", "example.test"}}}},
		{"https:insecure-skip-verify=true,path=/livez", Spec{Kind: KindHTTPS, InsecureSkipVerify: true, Path: "/livez"}},
		{"https:insecure-skip-verify=false", Spec{Kind: KindHTTPS}},
		{"grpc:port=9000,service=grpc.health.v1.Health", Spec{Kind: KindGRPC, Port: 9000, Service: "grpc.health.v1.Health"}},
		{"agent", Spec{Kind: KindAgent}},
		{"agent:port=7443,path=/readyz", Spec{Kind: KindAgent, Port: 7443, Path: "/readyz"}},
		{"kubelet:port=10255,success-threshold=2,initial-delay=30s", Spec{
			Kind: KindKubelet, Port: 10255, SuccessThreshold: 2, InitialDelay: 30 * time.Second}},
		{"tcp:port=1,initial-delay=0s", Spec{Kind: KindTCP, Port: 1}},
		// An explicit timeout longer than the default period stretches the
		// period; an explicit short period shrinks the timeout.
		{"tcp:port=1,timeout=3s", Spec{Kind: KindTCP, Port: 1, Timeout: 3 * time.Second}},
		{"tcp:port=1,period=500ms", Spec{Kind: KindTCP, Port: 1, Period: 500 * time.Millisecond}},
		{"tcp:port=1,timeout=2s,period=2s", Spec{Kind: KindTCP, Port: 1, Timeout: 2 * time.Second, Period: 2 * time.Second}},
		{"http:header=X-Empty:", Spec{Kind: KindHTTP, Headers: []Header{{"X-Empty", ""}}}},
		{"http:header=X-Eq:a=b:c", Spec{Kind: KindHTTP, Headers: []Header{{"X-Eq", "a=b:c"}}}},
		{"tcp:port=65535,weight=1", Spec{Kind: KindTCP, Port: 65535, Weight: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSpec(tt.in)
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseSpec = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr error
		key     string // SpecError.Key
		text    string // must appear in the message; the offending text
	}{
		{"", ErrSyntax, "", ""},
		{"   ", ErrSyntax, "", ""},
		{"udp:port=1", ErrUnknownKind, "", "udp"},
		{"TCP:port=1", ErrUnknownKind, "", "TCP"},
		{"tcp:", ErrSyntax, "", ""},
		{"tcp:port=1,,weight=1", ErrSyntax, "", ""},
		{"tcp:port=1,", ErrSyntax, "", ""},
		{"tcp:=1", ErrSyntax, "", "=1"},
		{"tcp:port", ErrMissingEquals, "port", "port"},
		{"tcp:port=1,weight", ErrMissingEquals, "weight", "weight"},
		{"tcp:port=1,colour=red", ErrUnknownKey, "colour", "colour=red"},
		{"tcp:port=1,path=/x", ErrUnknownKey, "path", "path=/x"},
		{"http:insecure-skip-verify=true", ErrUnknownKey, "insecure-skip-verify", "insecure-skip-verify=true"},
		{"grpc:port=1,header=A:b", ErrUnknownKey, "header", "header=A:b"},
		{"agent:insecure-skip-verify=true", ErrUnknownKey, "insecure-skip-verify", "insecure-skip-verify=true"},
		{"kubelet:service=x", ErrUnknownKey, "service", "service=x"},
		{"tcp:port=1,port=2", ErrDuplicateKey, "port", "port=2"},
		{"tcp:port=1,weight=0.5,weight=0.5", ErrDuplicateKey, "weight", "weight=0.5"},
		{"tcp:port=", ErrBadValue, "port", "port="},
		{"tcp:port=abc", ErrBadValue, "port", "abc"},
		{"tcp:port=1.5", ErrBadValue, "port", "1.5"},
		{"tcp:port=0", ErrOutOfRange, "port", "0"},
		{"tcp:port=-1", ErrOutOfRange, "port", "-1"},
		{"tcp:port=65536", ErrOutOfRange, "port", "65536"},
		{"tcp:port=1,weight=heavy", ErrBadValue, "weight", "heavy"},
		{"tcp:port=1,weight=0", ErrOutOfRange, "weight", "0"},
		{"tcp:port=1,weight=1.5", ErrOutOfRange, "weight", "1.5"},
		{"tcp:port=1,weight=-0.5", ErrOutOfRange, "weight", "-0.5"},
		{"tcp:port=1,weight=NaN", ErrOutOfRange, "weight", "NaN"},
		{"tcp:port=1,timeout=1", ErrBadValue, "timeout", "1"},
		{"tcp:port=1,timeout=fast", ErrBadValue, "timeout", "fast"},
		{"tcp:port=1,timeout=0s", ErrOutOfRange, "timeout", "0s"},
		{"tcp:port=1,period=-1s", ErrOutOfRange, "period", "-1s"},
		{"tcp:port=1,period=0", ErrOutOfRange, "period", "0"},
		{"tcp:port=1,initial-delay=-5s", ErrOutOfRange, "initial-delay", "-5s"},
		{"tcp:port=1,success-threshold=0", ErrOutOfRange, "success-threshold", "0"},
		{"tcp:port=1,failure-threshold=x", ErrBadValue, "failure-threshold", "x"},
		{"tcp:port=1,failure-threshold=-3", ErrOutOfRange, "failure-threshold", "-3"},
		{"tcp:port=1,timeout=5s,period=2s", ErrOutOfRange, "timeout", "5s"},
		{"tcp:port=1,period=500ms,timeout=1s", ErrOutOfRange, "timeout", "1s"},
		{"tcp", ErrMissingKey, "port", ""},
		{"grpc:service=x", ErrMissingKey, "port", ""},
		{"http:path=healthz", ErrBadValue, "path", "healthz"},
		{"http:path=/a b", ErrBadValue, "path", "/a b"},
		{"http:path=/%zz", ErrBadValue, "path", "/%zz"},
		{"http:header=NoColon", ErrBadValue, "header", "NoColon"},
		{"http:header=:value", ErrBadValue, "header", ":value"},
		{"http:header=Bad Name:x", ErrBadValue, "header", "Bad Name:x"},
		{"http:header=X:a\x01b", ErrBadValue, "header", "X:a\x01b"},
		{"https:insecure-skip-verify=maybe", ErrBadValue, "insecure-skip-verify", "maybe"},
		{"grpc:port=1,service=a b", ErrBadValue, "service", "a b"},
		{"grpc:port=1,service=caf\u00e9", ErrBadValue, "service", "caf\u00e9"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseSpec(tt.in)
			if err == nil {
				t.Fatal("ParseSpec succeeded, want an error")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q does not wrap %q", err, tt.wantErr)
			}
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("error %q is not a *SpecError", err)
			}
			if se.Key != tt.key {
				t.Errorf("SpecError.Key = %q, want %q (error %q)", se.Key, tt.key, err)
			}
			msg := err.Error()
			if tt.key != "" && !strings.Contains(msg, tt.key) {
				t.Errorf("error %q does not name the key %q", msg, tt.key)
			}
			if tt.text != "" && !strings.Contains(msg, strconv.Quote(tt.text)) {
				t.Errorf("error %q does not quote the offending text %q", msg, tt.text)
			}
			if !strings.Contains(msg, strconv.Quote(tt.in)) {
				t.Errorf("error %q does not quote the spec", msg)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		name    string
		spec    Spec
		wantErr error
		key     string
	}{
		{"kubelet defaults", Spec{Kind: KindKubelet}, nil, ""},
		{"full https", Spec{Kind: KindHTTPS, Port: 10250, Path: "/healthz", InsecureSkipVerify: true,
			Headers: []Header{{"Authorization", "Bearer x"}}, Weight: 0.5, Timeout: time.Second,
			Period: 5 * time.Second, InitialDelay: time.Second, SuccessThreshold: 2, FailureThreshold: 4}, nil, ""},
		{"no kind", Spec{}, ErrUnknownKind, ""},
		{"tcp without port", Spec{Kind: KindTCP}, ErrMissingKey, "port"},
		{"port too big", Spec{Kind: KindTCP, Port: 70000}, ErrOutOfRange, "port"},
		{"path on tcp", Spec{Kind: KindTCP, Port: 1, Path: "/x"}, ErrUnknownKey, "path"},
		{"service on http", Spec{Kind: KindHTTP, Service: "x"}, ErrUnknownKey, "service"},
		{"skip-verify on grpc", Spec{Kind: KindGRPC, Port: 1, InsecureSkipVerify: true}, ErrUnknownKey, "insecure-skip-verify"},
		{"weight above 1", Spec{Kind: KindKubelet, Weight: 2}, ErrOutOfRange, "weight"},
		{"negative weight", Spec{Kind: KindKubelet, Weight: -0.1}, ErrOutOfRange, "weight"},
		{"negative timeout", Spec{Kind: KindKubelet, Timeout: -time.Second}, ErrOutOfRange, "timeout"},
		{"timeout over period", Spec{Kind: KindKubelet, Timeout: 3 * time.Second, Period: time.Second}, ErrOutOfRange, "timeout"},
		{"negative threshold", Spec{Kind: KindKubelet, FailureThreshold: -1}, ErrOutOfRange, "failure-threshold"},
		{"comma in header", Spec{Kind: KindHTTP, Headers: []Header{{"Accept", "a, b"}}}, ErrBadValue, "header"},
		{"space around header value", Spec{Kind: KindHTTP, Headers: []Header{{"X", " a"}}}, ErrBadValue, "header"},
		{"semicolon in path", Spec{Kind: KindHTTP, Path: "/a;b"}, ErrBadValue, "path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				return
			}
			var se *SpecError
			if !errors.As(err, &se) || se.Key != tt.key {
				t.Fatalf("Validate() = %#v, want a *SpecError with key %q", err, tt.key)
			}
		})
	}
}

func TestSpecStringRoundTrip(t *testing.T) {
	tests := []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindKubelet}, "kubelet"},
		{Spec{Kind: KindTCP, Port: 10250, Weight: 0.5, Timeout: time.Second, Period: 5 * time.Second, FailureThreshold: 3},
			"tcp:port=10250,weight=0.5,timeout=1s,period=5s,failure-threshold=3"},
		{Spec{Kind: KindHTTPS, Port: 8443, Path: "/healthz?x=1", Headers: []Header{{"X-A", "1"}, {"X-A", "2"}, {"Host", "h"}},
			InsecureSkipVerify: true, Weight: 1.0 / 3, InitialDelay: 1500 * time.Millisecond, SuccessThreshold: 2},
			"https:port=8443,path=/healthz?x=1,header=X-A:1,header=X-A:2,header=Host:h,insecure-skip-verify=true," +
				"weight=0.3333333333333333,initial-delay=1.5s,success-threshold=2"},
		{Spec{Kind: KindGRPC, Port: 9000, Service: "svc", Period: time.Hour}, "grpc:port=9000,service=svc,period=1h0m0s"},
		{Spec{Kind: KindAgent, Path: "/readyz", Headers: []Header{{"X-Empty", ""}}}, "agent:path=/readyz,header=X-Empty:"},
		{Spec{Kind: KindTCP, Port: 1, Timeout: time.Nanosecond, Weight: 1e-9}, "tcp:port=1,weight=1e-09,timeout=1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if err := tt.spec.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := tt.spec.String()
			if got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseSpec(got)
			if err != nil {
				t.Fatalf("ParseSpec(String()): %v", err)
			}
			if !reflect.DeepEqual(back, tt.spec) {
				t.Fatalf("ParseSpec(String()) = %#v, want %#v", back, tt.spec)
			}
		})
	}
}

func TestParseSpecs(t *testing.T) {
	tests := []struct {
		in      string
		want    []Spec
		wantErr error
	}{
		{"kubelet", []Spec{{Kind: KindKubelet}}, nil},
		{"kubelet;http:port=8080, path=/x ; grpc:port=9", []Spec{
			{Kind: KindKubelet}, {Kind: KindHTTP, Port: 8080, Path: "/x"}, {Kind: KindGRPC, Port: 9}}, nil},
		{"", nil, ErrSyntax},
		{"kubelet;", nil, ErrSyntax},
		{"kubelet;;tcp:port=1", nil, ErrSyntax},
		{"kubelet;tcp:port=x", nil, ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSpecs(tt.in)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("ParseSpecs error = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseSpecs = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestSpecListFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // the list's String after parsing
		wantErr string // substring of the flag error
	}{
		{"unset", nil, "", ""},
		{"repeated", []string{"-probe", "kubelet", "-probe", "http:port=8080;grpc:port=9000"},
			"kubelet;http:port=8080;grpc:port=9000", ""},
		{"bad value names the key", []string{"-probe", "tcp:port=1,timeout=soon"}, "", `timeout: "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l SpecList
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Var(&l, "probe", "probe spec (repeatable)")
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := l.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := fs.Lookup("probe").Value.(flag.Getter).Get().([]Spec); len(got) != len(l) {
				t.Errorf("Get() has %d specs, want %d", len(got), len(l))
			}
		})
	}
}

// FuzzParseSpec holds ParseSpec to its contract on arbitrary operator input: it
// never panics, every error is a *SpecError, and every spec it accepts is valid
// and survives String and ParseSpec unchanged.
func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{
		"kubelet", "tcp:port=10250,weight=0.5,timeout=1s,period=5s,failure-threshold=3",
		"https:port=10250,path=/healthz,insecure-skip-verify=true,header=Authorization:Bearer x",
		"grpc:port=9000,service=svc", "agent:path=/healthz", "http:header=X:a=b,header=Host:h",
		"tcp:port=1,timeout=3s", "tcp:port=1,period=1h,initial-delay=1.5s,success-threshold=2",
		"tcp:", "tcp:port", "tcp:port=1,port=2", "x:y=z", ":", "tcp:port=1,weight=1e-300",
		"http:path=/%41", " http : port = 8080 ", "http:header=X:\u00a0a\u0085",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSpec(in)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSpec(%q) error %v is not a *SpecError", in, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSpec(%q) accepted a spec Validate rejects: %v", in, err)
		}
		text := s.String()
		back, err := ParseSpec(text)
		if err != nil {
			t.Fatalf("ParseSpec(%q).String() = %q does not parse: %v", in, text, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip of %q via %q: got %#v, want %#v", in, text, back, s)
		}
		if again := back.String(); again != text {
			t.Fatalf("String not stable: %q then %q", text, again)
		}
	})
}
