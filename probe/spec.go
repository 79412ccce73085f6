package probe

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind names how a probe reaches its target.
type Kind string

// The probe kinds. Kubelet is TCP to the kubelet's port because a node whose
// kubelet does not even accept connections is the failure the zone cares about
// most; Agent asks the peer's edgequorum agent itself over the authenticated peer
// connection the caller provides.
const (
	KindTCP     Kind = "tcp"
	KindHTTP    Kind = "http"
	KindHTTPS   Kind = "https"
	KindGRPC    Kind = "grpc"
	KindKubelet Kind = "kubelet"
	KindAgent   Kind = "agent"
)

// kinds lists every Kind in the order error messages mention them.
var kinds = []Kind{KindTCP, KindHTTP, KindHTTPS, KindGRPC, KindKubelet, KindAgent}

// Defaults applied to a Spec field left at its zero value. They follow the
// kubelet (thresholds 1 and 3, timeout 1s) except the period, which is 2s instead
// of 10s because a zone must notice a dead peer well within the ~50s the node
// lifecycle controller gives it.
const (
	// DefaultPeriod is the probe period; when the spec's timeout is longer, the
	// period defaults to the timeout instead so that an explicit timeout alone
	// never makes a spec invalid.
	DefaultPeriod = 2 * time.Second
	// DefaultTimeout is the probe timeout; when the spec's period is shorter,
	// the timeout defaults to the period.
	DefaultTimeout = time.Second
	// DefaultSuccessThreshold is how many consecutive successes flip a probe
	// to Success.
	DefaultSuccessThreshold = 1
	// DefaultFailureThreshold is how many consecutive failures flip a probe to
	// Failure; three rides out a single lost packet or a slow GC pause.
	DefaultFailureThreshold = 3
	// KubeletPort is the port the kubelet kind connects to unless the spec
	// names another.
	KubeletPort = 10250
	// DefaultHTTPPath is the path http and https probes GET unless the spec
	// names another.
	DefaultHTTPPath = "/"
	// DefaultAgentPath is the path agent probes GET unless the spec names
	// another.
	DefaultAgentPath = "/healthz"
)

// The option keys of the spec format.
const (
	keyPort             = "port"
	keyPath             = "path"
	keyHeader           = "header"
	keyService          = "service"
	keyInsecure         = "insecure-skip-verify"
	keyWeight           = "weight"
	keyTimeout          = "timeout"
	keyPeriod           = "period"
	keyInitialDelay     = "initial-delay"
	keySuccessThreshold = "success-threshold"
	keyFailureThreshold = "failure-threshold"
)

// commonKeys apply to every kind.
var commonKeys = []string{keyWeight, keyTimeout, keyPeriod, keyInitialDelay, keySuccessThreshold, keyFailureThreshold}

// kindKeys lists the keys that only some kinds accept. A key that exists but
// does not apply to the kind is rejected rather than ignored: an operator who
// writes tcp:path=/healthz believes something is checked that is not.
var kindKeys = map[Kind][]string{
	KindTCP:     {keyPort},
	KindKubelet: {keyPort},
	KindHTTP:    {keyPort, keyPath, keyHeader},
	KindHTTPS:   {keyPort, keyPath, keyHeader, keyInsecure},
	KindGRPC:    {keyPort, keyService},
	KindAgent:   {keyPort, keyPath, keyHeader},
}

func (k Kind) valid() bool { return slices.Contains(kinds, k) }

// accepts reports whether key is meaningful for kind k.
func (k Kind) accepts(key string) bool {
	return slices.Contains(commonKeys, key) || slices.Contains(kindKeys[k], key)
}

// needsPort reports whether a spec of kind k is invalid without a port: there is
// no port a TCP or gRPC service can be assumed to listen on.
func (k Kind) needsPort() bool { return k == KindTCP || k == KindGRPC }

func knownKey(key string) bool {
	if slices.Contains(commonKeys, key) {
		return true
	}
	for _, keys := range kindKeys {
		if slices.Contains(keys, key) {
			return true
		}
	}
	return false
}

// Header is one HTTP request header of an http, https or agent probe. A header
// named Host sets the request's Host, as in the kubelet.
type Header struct {
	Name  string
	Value string
}

// Spec describes one probe run against every target. Zero fields take the
// documented defaults when the probe runs, so a Spec says only what its author
// chose; String prints exactly those choices.
type Spec struct {
	Kind Kind
	// Port is the TCP port to reach. Required for tcp and grpc; defaults to
	// 80 for http and 443 for https. A kubelet probe without a port connects
	// to the port the target's Node publishes (status.daemonEndpoints, see
	// Target), else 10250. An agent probe without a port sends the bare host
	// and leaves the port to the injected transport.
	Port int
	// Path is the request path of http, https (default "/") and agent
	// (default "/healthz") probes, optionally with a query.
	Path string
	// Headers are sent with http, https and agent requests, in order.
	Headers []Header
	// Service is the service name a grpc probe asks about; empty asks about
	// the server as a whole.
	Service string
	// InsecureSkipVerify makes an https probe accept any certificate, which
	// probing a kubelet's self-signed serving certificate needs.
	InsecureSkipVerify bool
	// Weight is the probe's share of its target's score, in (0, 1]. Zero means
	// unset: the probes without a weight share equally what the explicit
	// weights leave of 1, so a lone probe weighs 1 and n unweighted probes
	// weigh 1/n each. See NewChecker.
	Weight float64
	// Timeout bounds one probe; it must not exceed Period.
	Timeout time.Duration
	// Period is the time between the starts of two probes.
	Period time.Duration
	// InitialDelay postpones the first probe after a target is added; the
	// first probe then waits, by less than one Period, for the start of a
	// slot of the zone's grid drawn at random (Config.GridPhase).
	InitialDelay time.Duration
	// SuccessThreshold and FailureThreshold are the numbers of consecutive
	// successes and failures that flip the probe's state.
	SuccessThreshold int
	FailureThreshold int
}

// Sentinel errors a *SpecError wraps, one per class of mistake, so callers and
// tests can tell them apart with errors.Is.
var (
	// ErrSyntax: an empty spec, an empty option or an empty key.
	ErrSyntax = errors.New("malformed probe spec")
	// ErrUnknownKind: the text before ':' is not a probe kind.
	ErrUnknownKind = errors.New("unknown probe kind")
	// ErrUnknownKey: the key does not exist, or does not apply to the kind.
	ErrUnknownKey = errors.New("unknown key")
	// ErrMissingEquals: an option is not of the form key=value.
	ErrMissingEquals = errors.New("missing '='")
	// ErrDuplicateKey: a key other than header appears twice.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrBadValue: the value is empty, does not parse, or holds characters the
	// format cannot carry.
	ErrBadValue = errors.New("bad value")
	// ErrOutOfRange: the value parses but is not allowed (port 0, threshold 0,
	// timeout longer than the period, ...).
	ErrOutOfRange = errors.New("value out of range")
	// ErrMissingKey: the kind needs a key the spec does not give.
	ErrMissingKey = errors.New("missing key")
)

// SpecError reports what is wrong with a probe spec, naming the key and the text
// at fault so an operator can find the mistake in a long flag value.
type SpecError struct {
	// Spec is the text being parsed, or the String form of the Spec being
	// validated.
	Spec string
	// Key is the option at fault; empty when the kind or the syntax is.
	Key string
	// Text is the offending text as written.
	Text string
	// Err wraps one of the Err* sentinels.
	Err error
}

func (e *SpecError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "probe spec %q", e.Spec)
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	if e.Text != "" {
		fmt.Fprintf(&b, ": %q", e.Text)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *SpecError) Unwrap() error { return e.Err }

// fieldError is a SpecError before it knows which spec it belongs to.
type fieldError struct {
	key, text string
	err       error
}

func fieldErr(key, text string, sentinel error, format string, args ...any) *fieldError {
	if format == "" {
		return &fieldError{key: key, text: text, err: sentinel}
	}
	return &fieldError{key: key, text: text, err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}

func (f *fieldError) in(spec string) *SpecError {
	return &SpecError{Spec: spec, Key: f.key, Text: f.text, Err: f.err}
}

// ParseSpec parses one probe spec of the form
//
//	kind[:key=value[,key=value...]]
//
// for example "tcp:port=10250,weight=0.5,timeout=1s,period=5s,failure-threshold=3"
// or just "kubelet". The keys are port, path, header (repeatable, Name:Value),
// service, insecure-skip-verify, weight, timeout, period, initial-delay,
// success-threshold and failure-threshold; which apply depends on the kind.
// Values cannot contain ',' or ';' because those separate options and specs.
// Space around kinds, keys and values is ignored.
//
// Every mistake is an error naming the key and the text: unlike SuperEdge's
// check-plugin flags, a typo never silently becomes a default. The result keeps
// unset fields zero; defaults are applied when the probe runs.
func ParseSpec(text string) (Spec, error) {
	in := strings.TrimSpace(text)
	if in == "" {
		return Spec{}, &SpecError{Spec: text, Err: fmt.Errorf("%w: empty spec", ErrSyntax)}
	}
	kindText, opts, hasOpts := strings.Cut(in, ":")
	kind := Kind(strings.TrimSpace(kindText))
	if !kind.valid() {
		return Spec{}, &SpecError{Spec: text, Text: string(kind),
			Err: fmt.Errorf("%w (want one of %s)", ErrUnknownKind, kindList())}
	}
	s := Spec{Kind: kind}
	if hasOpts {
		seen := make(map[string]bool)
		for opt := range strings.SplitSeq(opts, ",") {
			if fe := s.parseOption(opt, seen); fe != nil {
				return Spec{}, fe.in(text)
			}
		}
	}
	if fe := s.check(); fe != nil {
		return Spec{}, fe.in(text)
	}
	return s, nil
}

// parseOption applies one key=value option to s.
func (s *Spec) parseOption(opt string, seen map[string]bool) *fieldError {
	opt = strings.TrimSpace(opt)
	if opt == "" {
		return fieldErr("", "", ErrSyntax, "empty option (stray ',' or ':'?)")
	}
	key, val, ok := strings.Cut(opt, "=")
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	if !ok {
		return fieldErr(key, opt, ErrMissingEquals, "want key=value")
	}
	if key == "" {
		return fieldErr("", opt, ErrSyntax, "empty key")
	}
	if !knownKey(key) {
		return fieldErr(key, opt, ErrUnknownKey, "")
	}
	if !s.Kind.accepts(key) {
		return fieldErr(key, opt, ErrUnknownKey, "%s does not apply to %s probes", key, s.Kind)
	}
	if seen[key] && key != keyHeader {
		return fieldErr(key, opt, ErrDuplicateKey, "")
	}
	seen[key] = true
	if val == "" {
		return fieldErr(key, opt, ErrBadValue, "empty value")
	}
	switch key {
	case keyPort:
		n, err := strconv.Atoi(val)
		if err != nil {
			return fieldErr(key, val, ErrBadValue, "%v", err)
		}
		if n < 1 || n > 65535 {
			return fieldErr(key, val, ErrOutOfRange, "want 1..65535")
		}
		s.Port = n
	case keyPath:
		if fe := checkPath(val); fe != nil {
			return fe
		}
		s.Path = val
	case keyHeader:
		name, value, ok := strings.Cut(val, ":")
		if !ok {
			return fieldErr(key, val, ErrBadValue, "want Name:Value")
		}
		h := Header{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}
		if fe := checkHeader(h); fe != nil {
			return fe
		}
		s.Headers = append(s.Headers, h)
	case keyService:
		if fe := checkText(key, val); fe != nil {
			return fe
		}
		s.Service = val
	case keyInsecure:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return fieldErr(key, val, ErrBadValue, "want true or false")
		}
		s.InsecureSkipVerify = b
	case keyWeight:
		w, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fieldErr(key, val, ErrBadValue, "%v", err)
		}
		if !(w > 0 && w <= 1) {
			return fieldErr(key, val, ErrOutOfRange, "want a number in (0, 1]")
		}
		s.Weight = w
	case keyTimeout, keyPeriod, keyInitialDelay:
		d, err := time.ParseDuration(val)
		if err != nil {
			return fieldErr(key, val, ErrBadValue, "%v", err)
		}
		if key == keyInitialDelay {
			if d < 0 {
				return fieldErr(key, val, ErrOutOfRange, "must not be negative")
			}
			s.InitialDelay = d
			break
		}
		if d <= 0 {
			return fieldErr(key, val, ErrOutOfRange, "must be positive")
		}
		if key == keyTimeout {
			s.Timeout = d
		} else {
			s.Period = d
		}
	case keySuccessThreshold, keyFailureThreshold:
		n, err := strconv.Atoi(val)
		if err != nil {
			return fieldErr(key, val, ErrBadValue, "%v", err)
		}
		if n < 1 {
			return fieldErr(key, val, ErrOutOfRange, "must be at least 1")
		}
		if key == keySuccessThreshold {
			s.SuccessThreshold = n
		} else {
			s.FailureThreshold = n
		}
	}
	return nil
}

// Validate checks a Spec built in code by the same rules ParseSpec applies to
// text, so that every valid Spec prints (String) as text ParseSpec accepts.
func (s Spec) Validate() error {
	if fe := s.check(); fe != nil {
		return fe.in(s.String())
	}
	return nil
}

// check validates field ranges, kind applicability and the rules that involve
// more than one field, with defaults applied where a rule needs them.
func (s Spec) check() *fieldError {
	if !s.Kind.valid() {
		return &fieldError{text: string(s.Kind), err: fmt.Errorf("%w (want one of %s)", ErrUnknownKind, kindList())}
	}
	// Keys set on a kind that ignores them.
	set := map[string]bool{
		keyPort: s.Port != 0, keyPath: s.Path != "", keyHeader: len(s.Headers) > 0,
		keyService: s.Service != "", keyInsecure: s.InsecureSkipVerify,
	}
	for _, key := range []string{keyPort, keyPath, keyHeader, keyService, keyInsecure} {
		if set[key] && !s.Kind.accepts(key) {
			return fieldErr(key, "", ErrUnknownKey, "%s does not apply to %s probes", key, s.Kind)
		}
	}
	if s.Port < 0 || s.Port > 65535 {
		return fieldErr(keyPort, strconv.Itoa(s.Port), ErrOutOfRange, "want 1..65535")
	}
	if s.Port == 0 && s.Kind.needsPort() {
		return fieldErr(keyPort, "", ErrMissingKey, "%s probes need a port", s.Kind)
	}
	if s.Path != "" {
		if fe := checkPath(s.Path); fe != nil {
			return fe
		}
	}
	for _, h := range s.Headers {
		if fe := checkHeader(h); fe != nil {
			return fe
		}
	}
	if s.Service != "" {
		if fe := checkText(keyService, s.Service); fe != nil {
			return fe
		}
	}
	if !(s.Weight >= 0 && s.Weight <= 1) {
		return fieldErr(keyWeight, formatFloat(s.Weight), ErrOutOfRange, "want a number in (0, 1]")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{keyTimeout, s.Timeout}, {keyPeriod, s.Period}, {keyInitialDelay, s.InitialDelay}} {
		if d.v < 0 {
			return fieldErr(d.key, d.v.String(), ErrOutOfRange, "must not be negative")
		}
	}
	if s.SuccessThreshold < 0 {
		return fieldErr(keySuccessThreshold, strconv.Itoa(s.SuccessThreshold), ErrOutOfRange, "must be at least 1")
	}
	if s.FailureThreshold < 0 {
		return fieldErr(keyFailureThreshold, strconv.Itoa(s.FailureThreshold), ErrOutOfRange, "must be at least 1")
	}
	// A timeout longer than the period would let probes of one worker
	// overlap in spirit: the next is due before the previous may give up.
	eff := s.withDefaults()
	if eff.Timeout > eff.Period {
		return fieldErr(keyTimeout, eff.Timeout.String(), ErrOutOfRange, "exceeds period %s", eff.Period)
	}
	return nil
}

// withDefaults fills every zero field that has a default. Weight is left alone:
// its default depends on the other probes (see NewChecker).
func (s Spec) withDefaults() Spec {
	if s.Port == 0 {
		switch s.Kind {
		case KindKubelet:
			s.Port = KubeletPort
		case KindHTTP:
			s.Port = 80
		case KindHTTPS:
			s.Port = 443
		}
	}
	if s.Path == "" {
		switch s.Kind {
		case KindHTTP, KindHTTPS:
			s.Path = DefaultHTTPPath
		case KindAgent:
			s.Path = DefaultAgentPath
		}
	}
	if s.Period == 0 {
		s.Period = max(DefaultPeriod, s.Timeout)
	}
	if s.Timeout == 0 {
		s.Timeout = min(DefaultTimeout, s.Period)
	}
	if s.SuccessThreshold == 0 {
		s.SuccessThreshold = DefaultSuccessThreshold
	}
	if s.FailureThreshold == 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	return s
}

// String prints s in the form ParseSpec reads, with only the fields that are set,
// in a fixed key order; ParseSpec(s.String()) returns s for every valid s.
func (s Spec) String() string {
	var opts []string
	add := func(key, val string) { opts = append(opts, key+"="+val) }
	if s.Port != 0 {
		add(keyPort, strconv.Itoa(s.Port))
	}
	if s.Path != "" {
		add(keyPath, s.Path)
	}
	for _, h := range s.Headers {
		add(keyHeader, h.Name+":"+h.Value)
	}
	if s.Service != "" {
		add(keyService, s.Service)
	}
	if s.InsecureSkipVerify {
		add(keyInsecure, "true")
	}
	if s.Weight != 0 {
		add(keyWeight, formatFloat(s.Weight))
	}
	if s.Timeout != 0 {
		add(keyTimeout, s.Timeout.String())
	}
	if s.Period != 0 {
		add(keyPeriod, s.Period.String())
	}
	if s.InitialDelay != 0 {
		add(keyInitialDelay, s.InitialDelay.String())
	}
	if s.SuccessThreshold != 0 {
		add(keySuccessThreshold, strconv.Itoa(s.SuccessThreshold))
	}
	if s.FailureThreshold != 0 {
		add(keyFailureThreshold, strconv.Itoa(s.FailureThreshold))
	}
	if len(opts) == 0 {
		return string(s.Kind)
	}
	return string(s.Kind) + ":" + strings.Join(opts, ",")
}

// checkPath accepts an absolute request path with an optional query, in
// printable ASCII so that what the operator wrote is what goes on the wire.
func checkPath(p string) *fieldError {
	if !strings.HasPrefix(p, "/") {
		return fieldErr(keyPath, p, ErrBadValue, "must start with '/'")
	}
	if fe := checkText(keyPath, p); fe != nil {
		return fe
	}
	if _, err := url.ParseRequestURI(p); err != nil {
		return fieldErr(keyPath, p, ErrBadValue, "%v", err)
	}
	return nil
}

// checkHeader accepts an RFC 9110 token as name and a value without control
// characters or the format's separators.
func checkHeader(h Header) *fieldError {
	text := h.Name + ":" + h.Value
	if h.Name == "" {
		return fieldErr(keyHeader, text, ErrBadValue, "empty header name")
	}
	for i := 0; i < len(h.Name); i++ {
		if !isTokenChar(h.Name[i]) {
			return fieldErr(keyHeader, text, ErrBadValue, "header name %q has a character not allowed in a token", h.Name)
		}
	}
	if h.Value != strings.TrimSpace(h.Value) {
		return fieldErr(keyHeader, text, ErrBadValue, "header value has surrounding space")
	}
	for i := 0; i < len(h.Value); i++ {
		c := h.Value[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return fieldErr(keyHeader, text, ErrBadValue, "header value has a control character")
		}
		if c == ',' || c == ';' {
			return fieldErr(keyHeader, text, ErrBadValue, "header value cannot contain %q in a probe spec", c)
		}
	}
	return nil
}

// checkText accepts printable ASCII without ',' and ';', the alphabet of paths
// and gRPC service names that survives the spec format unchanged.
func checkText(key, v string) *fieldError {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f {
			return fieldErr(key, v, ErrBadValue, "only printable ASCII without spaces is allowed")
		}
		if c == ',' || c == ';' {
			return fieldErr(key, v, ErrBadValue, "cannot contain %q in a probe spec", c)
		}
	}
	return nil
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func kindList() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// ParseSpecs parses a ';'-separated list of specs, the form a single flag or
// environment variable can carry. Empty items are errors, like empty options.
func ParseSpecs(text string) ([]Spec, error) {
	var specs []Spec
	for item := range strings.SplitSeq(text, ";") {
		s, err := ParseSpec(item)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// SpecList is a flag.Value for a repeatable probe flag: every Set appends the
// specs of its argument (one spec or a ';'-separated list). Leave it empty and
// apply a default after parsing, or the flag would append to the default.
type SpecList []Spec

// String prints the list in the form Set reads.
func (l *SpecList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, s := range *l {
		parts[i] = s.String()
	}
	return strings.Join(parts, ";")
}

// Set appends the specs in v.
func (l *SpecList) Set(v string) error {
	specs, err := ParseSpecs(v)
	if err != nil {
		return err
	}
	*l = append(*l, specs...)
	return nil
}

// Get returns the specs as a []Spec, making SpecList a flag.Getter.
func (l *SpecList) Get() any { return []Spec(*l) }
