package raftzone

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Network is how raftzone reaches the wire. The default dials from the advertise
// address; tests inject a fault-injecting fabric and benchmarks a counting one.
type Network interface {
	Listen(network, address string) (net.Listener, error)
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Channels multiplexed on the one zone port, chosen by the dialer after
// authentication so that nothing reaches Raft or the peer API unauthenticated.
const (
	channelRaft    byte = 'R'
	channelPeerAPI byte = 'H'
)

const (
	authVersion    byte = 1
	ekmLabel            = "EXPORTER-edgequorum-peer-auth"
	maxHandshakes       = 64
	roleClient          = "edgequorum client"
	roleServer          = "edgequorum server"
	authMACSize         = 32
	maxKeyIDLength      = 64
)

// Handshake failures, counted by reason in edgequorum_transport_handshake_failures_total.
var (
	errBadPeerMAC   = errors.New("peer's zone-key proof does not verify")
	errPeerUnknownK = errors.New("peer used an unknown key id")
	errBadChannel   = errors.New("unknown channel")
)

// secureNet is the zone port: TLS 1.3 with a per-process self-signed certificate,
// then a mutual proof of the zone key bound to the TLS session (HMAC over the
// exported keying material and the role), then a channel byte. A man in the
// middle terminates two TLS sessions with different keying material, so it cannot
// relay a proof without the key.
type secureNet struct {
	network   Network
	keys      *Keyring
	cert      tls.Certificate
	advertise string
	timeout   time.Duration
	log       *slog.Logger
	metrics   *portMetrics

	listener net.Listener
	raft     *channelListener
	peerAPI  *channelListener
	sem      chan struct{}
	wg       sync.WaitGroup
}

func newSecureNet(network Network, keys *Keyring, advertise string, timeout time.Duration, log *slog.Logger, m *portMetrics) (*secureNet, error) {
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	return &secureNet{network: network, keys: keys, cert: cert, advertise: advertise,
		timeout: timeout, log: log, metrics: m, sem: make(chan struct{}, maxHandshakes)}, nil
}

// listen binds the zone port and starts accepting. close stops it and waits.
func (s *secureNet) listen(bind string) error {
	l, err := s.network.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("listen on zone port %s: %w", bind, err)
	}
	s.listener = countingListener{Listener: l, m: s.metrics}
	addr := l.Addr()
	s.raft = newChannelListener(addr)
	s.peerAPI = newChannelListener(addr)
	s.wg.Add(1)
	go s.acceptLoop()
	return nil
}

// close stops accepting and waits for every handshake in flight. The channel
// listeners close first so that no handshake waits for a consumer that is gone.
func (s *secureNet) close() {
	if s.listener != nil {
		s.listener.Close()
	}
	if s.raft != nil {
		s.raft.Close()
		s.peerAPI.Close()
	}
	s.wg.Wait()
}

func (s *secureNet) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.listener.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("zone port accept failed", "err", err)
			}
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			// Too many handshakes in flight: shed the newest instead of
			// letting a flood of half-open connections pin memory.
			s.metrics.handshakeFailures.WithLabelValues("overload").Inc()
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			s.serveConn(c)
		}()
	}
}

func (s *secureNet) serveConn(raw net.Conn) {
	raw.SetDeadline(time.Now().Add(s.timeout))
	tc := tls.Server(raw, &tls.Config{
		Certificates: []tls.Certificate{s.cert},
		MinVersion:   tls.VersionTLS13,
	})
	ch, err := s.serverAuth(tc)
	if err != nil {
		s.fail(raw, err)
		tc.Close()
		return
	}
	raw.SetDeadline(time.Time{})
	s.metrics.handshakes.WithLabelValues("server").Inc()
	var dst *channelListener
	switch ch {
	case channelRaft:
		dst = s.raft
	case channelPeerAPI:
		dst = s.peerAPI
	}
	if !dst.deliver(tc) {
		tc.Close()
	}
}

func (s *secureNet) fail(c net.Conn, err error) {
	reason := "tls"
	switch {
	case errors.Is(err, errBadPeerMAC):
		reason = "bad_mac"
	case errors.Is(err, errPeerUnknownK):
		reason = "unknown_key"
	case errors.Is(err, errBadChannel):
		reason = "bad_channel"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		reason = "eof"
	}
	s.metrics.handshakeFailures.WithLabelValues(reason).Inc()
	s.log.Debug("zone port handshake failed", "peer", c.RemoteAddr().String(), "reason", reason, "err", err)
}

// serverAuth runs the server side: read and check the client's proof and channel,
// then prove ourselves. The client speaks first so that a peer without the key
// learns nothing but a closed connection.
func (s *secureNet) serverAuth(tc *tls.Conn) (byte, error) {
	if err := tc.Handshake(); err != nil {
		return 0, fmt.Errorf("tls handshake: %w", err)
	}
	ekm, err := exportKeyingMaterial(tc)
	if err != nil {
		return 0, err
	}
	if err := s.readProof(tc, ekm, roleClient); err != nil {
		return 0, err
	}
	var ch [1]byte
	if _, err := io.ReadFull(tc, ch[:]); err != nil {
		return 0, fmt.Errorf("read channel: %w", err)
	}
	if ch[0] != channelRaft && ch[0] != channelPeerAPI {
		return 0, fmt.Errorf("%w %q", errBadChannel, ch[0])
	}
	if err := s.writeProof(tc, ekm, roleServer); err != nil {
		return 0, err
	}
	return ch[0], nil
}

// dial opens an authenticated connection to address on the given channel.
func (s *secureNet) dial(ctx context.Context, address string, ch byte) (net.Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	raw, err := s.network.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("dial zone peer %s: %w", address, err)
	}
	raw = s.metrics.count(raw)
	dl, _ := ctx.Deadline()
	raw.SetDeadline(dl)
	tc := tls.Client(raw, &tls.Config{
		// Peers use throwaway self-signed certificates; identity comes from
		// the zone-key proof below, which is bound to this very session.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
	})
	if err := s.clientAuth(ctx, tc, ch); err != nil {
		tc.Close()
		s.metrics.handshakeFailures.WithLabelValues("dial").Inc()
		return nil, fmt.Errorf("authenticate to zone peer %s: %w", address, err)
	}
	raw.SetDeadline(time.Time{})
	s.metrics.handshakes.WithLabelValues("client").Inc()
	return tc, nil
}

func (s *secureNet) clientAuth(ctx context.Context, tc *tls.Conn, ch byte) error {
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("tls handshake: %w", err)
	}
	ekm, err := exportKeyingMaterial(tc)
	if err != nil {
		return err
	}
	if err := s.writeProof(tc, ekm, roleClient, ch); err != nil {
		return err
	}
	if err := s.readProof(tc, ekm, roleServer); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("peer closed the connection during authentication (is the zone key the same on both sides?): %w", err)
		}
		return err
	}
	return nil
}

func exportKeyingMaterial(tc *tls.Conn) ([]byte, error) {
	st := tc.ConnectionState()
	if st.Version != tls.VersionTLS13 {
		return nil, fmt.Errorf("negotiated TLS version %#x, need TLS 1.3", st.Version)
	}
	ekm, err := st.ExportKeyingMaterial(ekmLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("export keying material: %w", err)
	}
	return ekm, nil
}

// writeProof sends [version][len(keyID)][keyID][HMAC(key, ekm ‖ role)] and any
// trailing bytes (the channel) in one write.
func (s *secureNet) writeProof(w io.Writer, ekm []byte, role string, trailer ...byte) error {
	id, key := s.keys.SigningKey()
	msg := make([]byte, 0, 2+len(id)+authMACSize+len(trailer))
	msg = append(msg, authVersion, byte(len(id)))
	msg = append(msg, id...)
	msg = append(msg, mac(key, ekm, []byte(role))...)
	msg = append(msg, trailer...)
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("send zone-key proof: %w", err)
	}
	return nil
}

func (s *secureNet) readProof(r io.Reader, ekm []byte, role string) error {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("read zone-key proof: %w", err)
	}
	if hdr[0] != authVersion {
		return fmt.Errorf("%w: proof version %d", errBadPeerMAC, hdr[0])
	}
	if hdr[1] == 0 || int(hdr[1]) > maxKeyIDLength {
		return fmt.Errorf("%w: key id length %d", errPeerUnknownK, hdr[1])
	}
	buf := make([]byte, int(hdr[1])+authMACSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("read zone-key proof: %w", err)
	}
	id, got := string(buf[:hdr[1]]), buf[hdr[1]:]
	key, err := s.keys.Key(id)
	if err != nil {
		return fmt.Errorf("%w: %w", errPeerUnknownK, err)
	}
	if !hmac.Equal(got, mac(key, ekm, []byte(role))) {
		return errBadPeerMAC
	}
	return nil
}

// channelListener is a net.Listener fed by the accept loop with connections that
// already passed authentication.
type channelListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newChannelListener(addr net.Addr) *channelListener {
	return &channelListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *channelListener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *channelListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *channelListener) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *channelListener) Addr() net.Addr { return l.addr }

// streamLayer adapts secureNet to raft.StreamLayer.
type streamLayer struct {
	*channelListener
	sn *secureNet
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.sn.dial(ctx, string(address), channelRaft)
}

// Addr must be the advertised address: raft puts it in its RPCs' headers.
func (l *streamLayer) Addr() net.Addr { return advertiseAddr(l.sn.advertise) }

type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// selfSignedCert makes the per-process TLS certificate. It carries no identity
// anyone checks; it only lets TLS 1.3 run.
func selfSignedCert() (tls.Certificate, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate TLS serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "edgequorum-peer"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-sign TLS certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}
