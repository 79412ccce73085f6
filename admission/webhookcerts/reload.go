package webhookcerts

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reloader serves the TLS pair from disk and picks up a rotated pair on the
// next handshake, without a restart. Kubernetes updates a mounted Secret by
// swapping a symlink and cert-manager renews well before expiry, so checking the
// files' size and modification time on each handshake is enough: a stat is cheap
// next to a handshake, and there is no watcher goroutine to own.
//
// A pair that fails to load (say the cert was written and the key not yet) is
// not retried until one of the files changes again; meanwhile the last good pair
// is served.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger
	reloads           *prometheus.CounterVec
	expiry            prometheus.Gauge

	mu     sync.Mutex
	cert   *tls.Certificate
	seen   [2]fileStamp
	failed [2]fileStamp
}

// fileStamp identifies one version of a file well enough to notice a rewrite.
type fileStamp struct {
	size  int64
	mtime time.Time
}

// NewReloader loads the pair in certFile and keyFile, which must load now,
// and serves it until the files change. reloads counts the reloads after the
// first by result ("ok", "error"); expiry, when not nil, is set to when the
// certificate served expires (Unix seconds), so that an alert fires before
// the apiserver stops trusting it; log receives one line per reload.
func NewReloader(certFile, keyFile string, log *slog.Logger, reloads *prometheus.CounterVec, expiry prometheus.Gauge) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log, reloads: reloads, expiry: expiry}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current()
}

func (r *Reloader) current() (*tls.Certificate, error) {
	stamps, statErr := r.stat()
	r.mu.Lock()
	defer r.mu.Unlock()
	if statErr == nil && r.cert != nil && (stamps == r.seen || stamps == r.failed) {
		return r.cert, nil
	}
	err := statErr
	if err == nil {
		var pair tls.Certificate
		if pair, err = tls.LoadX509KeyPair(r.certFile, r.keyFile); err == nil {
			first := r.cert == nil
			r.cert, r.seen = &pair, stamps
			r.showExpiry(&pair)
			if !first {
				r.reloads.WithLabelValues("ok").Inc()
				r.log.Info("reloaded serving certificate", "cert", r.certFile)
			}
			return r.cert, nil
		}
	}
	err = fmt.Errorf("load TLS pair %s, %s: %w", r.certFile, r.keyFile, err)
	if r.cert == nil {
		return nil, err
	}
	if statErr == nil {
		r.failed = stamps
	}
	r.reloads.WithLabelValues("error").Inc()
	r.log.Warn("keeping the previous serving certificate", "err", err)
	return r.cert, nil
}

func (r *Reloader) stat() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return s, err
		}
		s[i] = fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	}
	return s, nil
}

// showExpiry sets the expiry gauge from pair's leaf certificate.
func (r *Reloader) showExpiry(pair *tls.Certificate) {
	if r.expiry == nil || len(pair.Certificate) == 0 {
		return
	}
	leaf := pair.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return
		}
	}
	r.expiry.Set(float64(leaf.NotAfter.Unix()))
}

// SecretPair serves the TLS pair of a Secret the webhook reads through the
// API (--tls-secret), as each handshake finds it in the informer's cache: a
// replica serves a rotated pair as soon as its watch delivers it, without a
// volume for the kubelet to refresh. Until the Secret holds a valid pair
// there is nothing to serve, and handshakes fail (the replica is not ready);
// a pair that fails to load later leaves the last good one in service.
type SecretPair struct {
	get     func() (data map[string][]byte, ok bool)
	log     *slog.Logger
	reloads *prometheus.CounterVec
	expiry  prometheus.Gauge

	mu sync.Mutex
	// cert is the pair served, loaded from certPEM and keyPEM; tried the
	// pair last tried, which failed if it is not cert's.
	cert            *tls.Certificate
	certPEM, keyPEM []byte
	tried           [2][]byte
}

// NewSecretPair serves the pair in the data get returns, ok false while
// there is no Secret. reloads and expiry are as for NewReloader.
func NewSecretPair(get func() (map[string][]byte, bool), log *slog.Logger, reloads *prometheus.CounterVec, expiry prometheus.Gauge) *SecretPair {
	return &SecretPair{get: get, log: log, reloads: reloads, expiry: expiry}
}

// GetCertificate is tls.Config.GetCertificate. Comparing the Secret's bytes
// with the pair served costs a few microseconds, nothing next to a
// handshake.
func (s *SecretPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	data, ok := s.get()
	certPEM, keyPEM := data[CertFile], data[KeyFile]
	s.mu.Lock()
	defer s.mu.Unlock()
	same := func(c, k []byte) bool { return bytes.Equal(c, certPEM) && bytes.Equal(k, keyPEM) }
	switch {
	case ok && s.cert != nil && same(s.certPEM, s.keyPEM):
		return s.cert, nil
	case !ok || same(s.tried[0], s.tried[1]):
		if s.cert == nil {
			return nil, errors.New("no serving certificate yet: the Secret holds no valid pair")
		}
		return s.cert, nil
	}
	s.tried = [2][]byte{certPEM, keyPEM}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		s.reloads.WithLabelValues("error").Inc()
		if s.cert == nil {
			return nil, fmt.Errorf("load TLS pair from Secret: %w", err)
		}
		s.log.Warn("keeping the previous serving certificate", "err", err)
		return s.cert, nil
	}
	first := s.cert == nil
	s.cert, s.certPEM, s.keyPEM = &pair, certPEM, keyPEM
	(&Reloader{expiry: s.expiry}).showExpiry(&pair)
	if !first {
		s.reloads.WithLabelValues("ok").Inc()
	}
	s.log.Info("serving the certificate from the Secret", "notAfter", leafNotAfter(&pair))
	return s.cert, nil
}

// leafNotAfter is when pair's leaf expires, zero if it does not parse.
func leafNotAfter(pair *tls.Certificate) time.Time {
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return time.Time{}
	}
	return leaf.NotAfter
}
