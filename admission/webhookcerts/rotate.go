package webhookcerts

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Keys of the Secret the webhook keeps its own certificates in (--tls-secret
// with --manage-certs): those of a kubernetes.io/tls Secret, the trust bundle
// under CAFile (what the webhook configurations' caBundle holds, and what a
// Prometheus scraping the webhook verifies with), and the CA that signs now.
const (
	SignerCertKey = "ca-signer.crt"
	SignerKeyKey  = "ca-signer.key"
)

// backdate is how far before now a certificate starts, so that a machine
// whose clock lags ours still accepts it.
const backdate = 5 * time.Minute

// CA is a certificate authority that signs serving certificates.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
	KeyPEM  []byte
}

// NewCA makes an ECDSA P-256 CA valid for validity from now.
func NewCA(now time.Time, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("CA validity must be positive, got %s", validity)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	notBefore := now.Add(-backdate).UTC()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		// The serial in the name tells two generations apart in a bundle.
		Subject:               pkix.Name{CommonName: "edgequorum-webhook-ca", SerialNumber: sn.Text(16)[:8]},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity + backdate),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode CA key: %w", err)
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: key, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}

// ParseCA reads a CA from its PEM certificate and PKCS#8 key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := parseCerts(certPEM)
	if err != nil || len(certs) != 1 {
		return nil, fmt.Errorf("CA certificate: want one certificate, got %d (%v)", len(certs), err)
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(certs[0].PublicKey) || !certs[0].IsCA {
		return nil, errors.New("CA key does not match its certificate, or the certificate is no CA")
	}
	return &CA{Cert: certs[0], CertPEM: certPEM, key: key, KeyPEM: keyPEM}, nil
}

// Names are what a serving certificate is valid for.
type Names struct {
	DNS []string
	IPs []net.IP
}

// ServiceNames are the names a Service's clients dial it by, the apiserver's
// <service>.<namespace>.svc among them.
func ServiceNames(service, namespace string) []string {
	svc := service + "." + namespace + ".svc"
	return []string{service, service + "." + namespace, svc, svc + ".cluster.local"}
}

// Issue signs a fresh ECDSA P-256 serving certificate for names, valid for
// validity from now, and returns it and its key, PEM-encoded.
func (ca *CA) Issue(names Names, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, fmt.Errorf("certificate validity must be positive, got %s", validity)
	}
	if len(names.DNS) == 0 && len(names.IPs) == 0 {
		return nil, nil, errors.New("a serving certificate needs a DNS name or an IP")
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	cn := ""
	if len(names.DNS) > 0 {
		cn = names.DNS[min(2, len(names.DNS)-1)]
	}
	notBefore := now.Add(-backdate).UTC()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     names.DNS,
		IPAddresses:  names.IPs,
		NotBefore:    notBefore,
		// Never past the CA: a chain is only as valid as its shortest link.
		NotAfter:    minTime(notBefore.Add(validity+backdate), ca.Cert.NotAfter),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode serving key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// longerThan reports whether c was issued to last longer than validity: the
// operator shortened it, and expects that to hold now rather than when the
// certificate would have been renewed under the old validity.
func longerThan(c *x509.Certificate, validity time.Duration) bool {
	return c.NotAfter.Sub(c.NotBefore) > validity+backdate+time.Minute
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// parseCerts reads every CERTIFICATE block of b.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return out, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
}

// Policy is how the webhook keeps its own certificates: how long each lasts,
// what the serving certificate names, and how long a new CA must have been in
// the webhook configurations before it signs what the replicas serve.
type Policy struct {
	CAValidity   time.Duration
	CertValidity time.Duration
	Names        Names
	// Settle is how long the apiserver is given to pick up a caBundle
	// change before a certificate only the new bundle trusts is served.
	Settle time.Duration
}

// renewAt is when a certificate issued for validity and expiring at notAfter
// is replaced: with a third of its validity left, "well before expiry".
func renewAt(notAfter time.Time, validity time.Duration) time.Time {
	return notAfter.Add(-validity / 3)
}

// Step is what Next decided: the Secret's next data (nil: nothing to change)
// and why.
type Step struct {
	Data   map[string][]byte
	Reason string
}

// Reasons of a Step.
const (
	StepCreated    = "created"
	StepCARotated  = "ca-rotated"
	StepBundle     = "bundle-updated"
	StepCertIssued = "cert-issued"
)

// Next decides the next content of the Secret that holds data at now, one
// step at a time, so that the apiserver can verify every replica at every
// moment:
//
//  1. no valid signing CA, or one due for renewal or issued for longer than
//     CAValidity: a new CA, added to the
//     trust bundle beside the CAs still valid there (at most one other);
//     the serving certificate is left alone;
//  2. a bundle holding an expired CA, or lacking the signer: fixed;
//  3. a serving certificate missing, expired, invalid, not signed by the
//     signer, naming other names, issued for longer than CertValidity, or
//     due for renewal: a new one, signed by
//     the signer, once every caBundle holds the bundle (signerTrusted, when
//     the caller saw that, is set) and, if the pair served now was signed
//     by another CA, the signer has been trusted for Settle or the old pair
//     expires before it has: until then the replicas keep serving the old
//     pair, which the old CA in the bundle still vouches for. A Secret with
//     no valid serving pair gets one at once.
func (p Policy) Next(data map[string][]byte, now time.Time, signerTrusted time.Time) (Step, error) {
	next := cloneData(data)
	signer, err := ParseCA(data[SignerCertKey], data[SignerKeyKey])
	if err != nil || !now.Before(renewAt(signer.Cert.NotAfter, p.CAValidity)) || now.After(signer.Cert.NotAfter) ||
		longerThan(signer.Cert, p.CAValidity) {
		reason := StepCARotated
		if len(data) == 0 {
			reason = StepCreated
		}
		ca, err := NewCA(now, p.CAValidity)
		if err != nil {
			return Step{}, err
		}
		next[SignerCertKey], next[SignerKeyKey] = ca.CertPEM, ca.KeyPEM
		next[CAFile] = bundle(ca.Cert, data[CAFile], now)
		if reason == StepCreated {
			cert, key, err := ca.Issue(p.Names, now, p.CertValidity)
			if err != nil {
				return Step{}, err
			}
			next[CertFile], next[KeyFile] = cert, key
		}
		return Step{Data: next, Reason: reason}, nil
	}
	if b := bundle(signer.Cert, data[CAFile], now); !bytes.Equal(b, data[CAFile]) {
		next[CAFile] = b
		return Step{Data: next, Reason: StepBundle}, nil
	}
	due, leaf := p.certDue(data, signer, now)
	switch {
	case due == "":
		return Step{}, nil
	case due == dueNoPair:
		// Nothing valid to keep serving: anything is better.
	case signerTrusted.IsZero():
		return Step{}, nil // the bundle is not in place yet
	case due == dueOtherCA && now.Sub(signerTrusted) < p.Settle && leaf.NotAfter.After(signerTrusted.Add(p.Settle)):
		// The old pair serves until the new CA is trusted, unless it
		// would expire first: then the new CA's word, published, is
		// better than a certificate no one accepts.
		return Step{}, nil
	}
	cert, key, err := signer.Issue(p.Names, now, p.CertValidity)
	if err != nil {
		return Step{}, err
	}
	next[CertFile], next[KeyFile] = cert, key
	return Step{Data: next, Reason: StepCertIssued + " (" + due + ")"}, nil
}

// Why a serving pair is replaced.
const (
	dueNoPair  = "no valid pair"
	dueOtherCA = "signed by another CA"
)

// certDue says why the serving pair in data must be replaced at now, or ""
// if it need not, and returns its certificate (nil when there is no valid
// pair). A pair the signer signed is renewed as soon as it is due:
// the apiserver trusts its CA already. One another CA signed waits for the
// signer to have been trusted for Settle.
func (p Policy) certDue(data map[string][]byte, signer *CA, now time.Time) (string, *x509.Certificate) {
	pair, err := tls.X509KeyPair(data[CertFile], data[KeyFile])
	if err != nil {
		return dueNoPair, nil
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	switch {
	case err != nil, !now.Before(leaf.NotAfter):
		return dueNoPair, nil
	case leaf.CheckSignatureFrom(signer.Cert) != nil:
		return dueOtherCA, leaf
	case !now.Before(renewAt(leaf.NotAfter, p.CertValidity)):
		return "due for renewal", leaf
	case longerThan(leaf, p.CertValidity):
		return "validity shortened", leaf
	case !slices.Equal(leaf.DNSNames, p.Names.DNS) || !slices.EqualFunc(leaf.IPAddresses, p.Names.IPs, net.IP.Equal):
		return "names changed", leaf
	}
	return "", leaf
}

// bundle is the trust bundle for signer: signer first, then the newest other
// CA of the old bundle that is still valid at now. One other is enough: the
// one before signed what the replicas may still serve; any older signed
// nothing still served.
func bundle(signer *x509.Certificate, old []byte, now time.Time) []byte {
	out := slices.Clone(pemOf(signer))
	certs, _ := parseCerts(old)
	var prev *x509.Certificate
	for _, c := range certs {
		if c.Equal(signer) || !c.IsCA || now.After(c.NotAfter) {
			continue
		}
		if prev == nil || c.NotBefore.After(prev.NotBefore) {
			prev = c
		}
	}
	if prev != nil {
		out = append(out, pemOf(prev)...)
	}
	return out
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func cloneData(d map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(d)+5)
	for k, v := range d {
		out[k] = v
	}
	return out
}

// BundleTrusts reports whether the PEM bundle b holds c.
func BundleTrusts(b []byte, c *x509.Certificate) bool {
	certs, _ := parseCerts(b)
	return slices.ContainsFunc(certs, c.Equal)
}
