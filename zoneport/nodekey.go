package zoneport

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
)

// nodeKeyFile holds the member's Ed25519 node key in the data dir. It never
// leaves the node: peers learn the public half when the node joins (pinned in
// the zone's state) and from its own Node object (zone.NodeKeyAnnotation).
const nodeKeyFile = "node.key"

const pemPrivateKey = "PRIVATE KEY"

// LoadOrCreateNodeKey returns the member's node key from dataDir, creating it on
// first start. A node whose data dir was wiped gets a new key and must register
// it again through its own Node, which only its own agent may write.
func LoadOrCreateNodeKey(dataDir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dataDir, nodeKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return parseNodeKey(path, b)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("read node key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate node key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode node key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	if err := atomicfile.Write(path, pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("persist node key: %w", err)
	}
	return priv, nil
}

func parseNodeKey(path string, b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != pemPrivateKey {
		return nil, fmt.Errorf("node key file %s is not a PEM %q block; remove it to give this node a new key (it must then rejoin its zone)", path, pemPrivateKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("node key file %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("node key file %s holds a %T, want an Ed25519 key", path, k)
	}
	return priv, nil
}

// nodeCert is the member's zone-port certificate: self-signed with the node key,
// so the key the TLS handshake proves is the key pinned for the node. Nothing
// in it but the key is trusted; the name is there for a reader of a packet dump.
func nodeCert(node string, priv ed25519.PrivateKey) (tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate TLS serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-sign zone-port certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}

// certKey returns the Ed25519 key of a peer's leaf certificate.
func certKey(certs []*x509.Certificate) (ed25519.PublicKey, error) {
	if len(certs) == 0 {
		return nil, errors.New("peer sent no certificate")
	}
	pub, ok := certs[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("peer certificate holds a %T key, want Ed25519", certs[0].PublicKey)
	}
	return pub, nil
}
