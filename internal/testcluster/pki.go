package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// pki is the cluster's private certificate authority. One CA signs the
// apiserver's serving certificate, the fake kubelets' client and serving
// certificates and any user certificate a test asks for, so a single CA bundle
// in the kubeconfig trusts all of them.
type pki struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// certLifetime outlives any test or demo; NotBefore is backdated so a clock that
// is a little behind still accepts fresh certificates.
const (
	certLifetime = 365 * 24 * time.Hour
	certBackdate = time.Hour
)

func newPKI(cn string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-certBackdate),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA: %w", err)
	}
	keyPEM, err := ecKeyPEM(key)
	if err != nil {
		return nil, err
	}
	return &pki{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// keyPair is a PEM certificate and its PEM private key.
type keyPair struct {
	certPEM, keyPEM []byte
}

func (kp keyPair) tlsCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.certPEM, kp.keyPEM)
}

// servingCert issues a server certificate valid for ips and dnsNames.
func (p *pki) servingCert(cn string, ips []net.IP, dnsNames []string) (keyPair, error) {
	return p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		IPAddresses: ips,
		DNSNames:    dnsNames,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// clientCert issues a client certificate the apiserver maps to user (CN) in
// groups (O), the way kubelets and kubeadm's admin.conf authenticate.
func (p *pki) clientCert(user string, groups []string) (keyPair, error) {
	return p.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *pki) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key for %q: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return keyPair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-certBackdate)
	tmpl.NotAfter = now.Add(certLifetime)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := ecKeyPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// serviceAccountKey generates the key pair the apiserver signs service-account
// tokens with and KCM's token controller uses; ECDSA keeps start-up fast.
func serviceAccountKey() (privPEM, pubPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating service-account key: %w", err)
	}
	privPEM, err = ecKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	return privPEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding EC key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return n, nil
}

// randomToken returns a bearer token for the apiserver's static token file.
func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// IssueClientCert issues a client certificate from the cluster CA for user (CN)
// in groups (O). A real kubelet registers with one (system:node:<name> in
// system:nodes) so that the Node authorizer and NodeRestriction treat it like
// any production node; kube-proxy uses one for system:kube-proxy.
func (c *Cluster) IssueClientCert(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	kp, err := c.pki.clientCert(user, groups)
	if err != nil {
		return nil, nil, fmt.Errorf("testcluster: %w", err)
	}
	return kp.certPEM, kp.keyPEM, nil
}

// IssueServingCert issues a server certificate from the cluster CA, which the
// apiserver trusts for kubelets (--kubelet-certificate-authority in
// node-network mode).
func (c *Cluster) IssueServingCert(cn string, ips []net.IP, dnsNames []string) (certPEM, keyPEM []byte, err error) {
	kp, err := c.pki.servingCert(cn, ips, dnsNames)
	if err != nil {
		return nil, nil, fmt.Errorf("testcluster: %w", err)
	}
	return kp.certPEM, kp.keyPEM, nil
}
