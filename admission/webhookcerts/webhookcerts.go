// Package webhookcerts owns the webhook's serving certificate: making it and
// the CA the apiserver verifies it with (Generate, for `edgequorum certs` and
// the tests and benchmarks that run a webhook; NewCA and CA.Issue), the order
// in which a webhook that keeps its own renews them so that the apiserver can
// verify it at every moment (Policy.Next), the files' and Secret keys' names
// and format (those of a kubernetes.io/tls Secret plus the trust bundle and
// the signing CA), and serving the pair, from disk (Reloader) or from a
// Secret's cached data (SecretPair), a rotated pair picked up on the next
// handshake. It reads and writes nothing in the cluster (package admission
// does) and decides nothing about admission requests.
package webhookcerts

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
)

// File names WriteFiles uses: the names of a kubernetes.io/tls Secret's keys
// plus the CA, so the directory can feed `kubectl create secret tls` directly.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Options describes the serving certificate `edgequorum certs` writes for
// clusters without cert-manager.
type Options struct {
	// Service and Namespace name the webhook's Service; the certificate is
	// valid for <service>.<namespace>.svc, the name the apiserver dials.
	Service   string
	Namespace string
	// IPs are extra IP SANs, for tests that dial the webhook by address.
	IPs []net.IP
	// Validity is how long both the CA and the serving certificate last.
	Validity time.Duration
	// Clock sets NotBefore; nil is the real clock.
	Clock clock.PassiveClock
}

// Bundle is a freshly made CA and serving pair, PEM-encoded. The CA key is
// not kept: rotating means making a new bundle and a new caBundle, which keeps
// no signing key lying around on disk.
type Bundle struct {
	CACert []byte
	Cert   []byte
	Key    []byte
}

// Generate makes a CA and a serving certificate signed by it, both ECDSA
// P-256.
func Generate(opts Options) (*Bundle, error) {
	if msgs := validation.IsDNS1123Label(opts.Service); len(msgs) > 0 {
		return nil, fmt.Errorf("service %q: %s", opts.Service, msgs[0])
	}
	if msgs := validation.IsDNS1123Label(opts.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", opts.Namespace, msgs[0])
	}
	if opts.Validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %s", opts.Validity)
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	now := clk.Now()
	ca, err := NewCA(now, opts.Validity)
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue(Names{DNS: ServiceNames(opts.Service, opts.Namespace), IPs: opts.IPs}, now, opts.Validity)
	if err != nil {
		return nil, err
	}
	return &Bundle{CACert: ca.CertPEM, Cert: cert, Key: key}, nil
}

// CABundle is the value for a MutatingWebhookConfiguration's caBundle.
func (b *Bundle) CABundle() string { return base64.StdEncoding.EncodeToString(b.CACert) }

// ErrExists is returned by WriteFiles when a file is there already and
// overwrite was not asked for: a key someone deployed is not replaced by
// accident.
var ErrExists = errors.New("file exists")

// WriteFiles writes CAFile, CertFile and KeyFile into dir (created if needed),
// the key readable by its owner only. Each file is written to a temporary name,
// synced and renamed (atomicfile.Write), so a webhook reloading from dir never
// reads half a file.
func (b *Bundle) WriteFiles(dir string, overwrite bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{{CAFile, b.CACert, 0o644}, {CertFile, b.Cert, 0o644}, {KeyFile, b.Key, 0o600}}
	if !overwrite {
		for _, f := range files {
			p := filepath.Join(dir, f.name)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s: %w", p, ErrExists)
			}
		}
	}
	for _, f := range files {
		if err := atomicfile.Write(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// serial is a random positive serial number below 2^128, as RFC 5280 asks of
// certificates nobody keeps a register of.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
