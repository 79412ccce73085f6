package webhookcerts

import (
	"crypto/tls"
	"crypto/x509"
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
