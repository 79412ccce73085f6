package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

const (
	// maxRedirects is how many same-host redirects an HTTP probe follows, as in
	// the kubelet.
	maxRedirects = 10
	// maxBodyBytes is how much of a response body is read before the
	// connection is closed: enough to let small health answers complete
	// cleanly, never enough for a misbehaving peer to cost us memory or time.
	maxBodyBytes = 10 << 10
	// userAgent identifies our probes in peers' access logs.
	userAgent = "edgequorum-probe/1"
)

var (
	errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)
	errHTTPStatus       = errors.New("unhealthy HTTP status")
)

// httpProber GETs a URL and succeeds on any 2xx or 3xx status. It serves http,
// https and agent kinds; they differ only in scheme and client.
type httpProber struct {
	client  *http.Client
	scheme  string
	port    string // empty: leave the port to the scheme or the transport
	path    string
	headers []Header
}

func newHTTPProber(s Spec, client *http.Client) *httpProber {
	client.CheckRedirect = checkRedirect
	scheme := "http"
	if s.Kind == KindHTTPS || s.Kind == KindAgent {
		// Agent traffic is TLS-only (DESIGN.md); https also makes
		// http.Transport use the caller's DialTLSContext, where the
		// peer authentication lives.
		scheme = "https"
	}
	p := &httpProber{client: client, scheme: scheme, path: s.Path, headers: s.Headers}
	if s.Port != 0 {
		p.port = strconv.Itoa(s.Port)
	}
	return p
}

// newHTTPTransport builds the transport of http and https probes. Keep-alives are
// off so that every probe measures a fresh connection and a removed target leaves
// no idle connection (or goroutine) behind; proxies are ignored because a probe
// through a proxy says nothing about the path between two zone members.
func newHTTPTransport(insecureSkipVerify bool, dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:              nil,
		DialContext:        dial,
		TLSClientConfig:    &tls.Config{InsecureSkipVerify: insecureSkipVerify, MinVersion: tls.VersionTLS12},
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
}

// checkRedirect follows redirects within the same host name and stops, without
// error, at one to another host: the 3xx then counts as success. That is the
// kubelet's rule; following a peer's redirect elsewhere would judge the peer by
// someone else's health.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	return nil
}

func (p *httpProber) Probe(ctx context.Context, host string) (Result, error) {
	if err := checkHost(host); err != nil {
		return Unknown, err
	}
	hostport := host
	switch {
	case p.port != "":
		hostport = net.JoinHostPort(host, p.port)
	case strings.Contains(host, ":"):
		hostport = "[" + host + "]"
	}
	target := p.scheme + "://" + hostport + p.path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Unknown, fmt.Errorf("http probe: build request: %w", err)
	}
	for _, h := range p.headers {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return Failure, fmt.Errorf("http probe: %w", err)
	}
	// Drain a little so a small body completes; the rest is cut off by Close.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Success, nil
	}
	return Failure, fmt.Errorf("http probe: GET %s: %w %d", resp.Request.URL.Redacted(), errHTTPStatus, resp.StatusCode)
}
