package zoneport

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/time/rate"

	"github.com/edgequorum/edgequorum/internal/promutil"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zonekeys"
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
	// authVersion 4 carries each side's announcement (its protocol level
	// and release, package skew); 3 carried everything after the channel
	// byte as frames (frames.go); 2 added the node and server ID each side
	// claims; 1 proved only the zone key.
	authVersion byte = 4
	// oldestAuthVersion is the oldest proof this build reads: release
	// N−1's. v0.2.0 wrote 3, which no release of the skew policy reads.
	oldestAuthVersion byte = 4
	ekmLabel               = "EXPORTER-edgequorum-peer-auth"
	maxHandshakes          = 64
	roleClient             = "edgequorum client"
	roleServer             = "edgequorum server"
	authMACSize            = 32
	maxKeyIDLength         = 64
	maxClaimLength         = 253
	// maxHandshakesPerSource bounds the handshakes one address may have in
	// flight: a member needs one or two at a time (Raft, peer API), so a
	// source holding more is not a member at work.
	maxHandshakesPerSource = 4
	// firstBytesTimeout is how long an accepted connection may stay silent
	// before its TLS ClientHello: a dialer sends it at once, a slot holder
	// never does.
	firstBytesTimeout = time.Second
)

// Handshake failures, counted by reason in edgequorum_transport_handshake_failures_total.
var (
	errBadPeerMAC   = errors.New("peer's zone-key proof does not verify")
	errPeerUnknownK = errors.New("peer used an unknown key id")
	errBadChannel   = errors.New("unknown channel")
	errSilent       = errors.New("peer sent nothing within the first-bytes deadline")
	errSkew         = errors.New("peer runs a release this one cannot share a zone with")
)

// secureNet is the zone port: TLS 1.3 in which both sides present a
// certificate made from their node key, then a mutual proof of the zone key
// bound to the TLS session (HMAC over the exported keying material, the role
// and the node and server ID claimed), then a channel byte. The claimed node
// must be the one whose pinned (or, to join, registered) key the certificate
// carries. A man in the middle terminates two TLS sessions with different
// keying material, so it cannot relay a proof without the key, and it cannot
// present a node's certificate without that node's key.
type secureNet struct {
	network  Network
	keys     *zonekeys.Ring
	cert     tls.Certificate
	nodeKey  ed25519.PrivateKey
	node     string
	serverID string
	self     skew.Announcement
	book     *peerBook
	// skewLogged limits the warnings about peers of other releases.
	skewLogged rate.Sometimes
	advertise  string
	timeout    time.Duration
	log        *slog.Logger
	metrics    *portMetrics

	listener net.Listener
	raft     *channelListener
	peerAPI  *channelListener
	sem      chan struct{}
	wg       sync.WaitGroup

	sourcesMu sync.Mutex
	sources   map[string]int // handshakes in flight per source IP

	// raftConn admits an authenticated Raft connection and returns what
	// raft reads: the peer book's guard; transport tests echo instead.
	raftConn func(*Conn) (net.Conn, error)
}

func newSecureNet(network Network, keys *zonekeys.Ring, nodeKey ed25519.PrivateKey, node, serverID string, book *peerBook,
	advertise string, timeout time.Duration, log *slog.Logger, m *portMetrics) (*secureNet, error) {
	cert, err := nodeCert(node, nodeKey)
	if err != nil {
		return nil, err
	}
	return &secureNet{network: network, keys: keys, cert: cert, nodeKey: nodeKey, node: node, serverID: serverID,
		self: skew.Announcement{Level: skew.Current()}, skewLogged: rate.Sometimes{Interval: time.Minute}, book: book,
		advertise: advertise, timeout: timeout, log: log, metrics: m,
		sem: make(chan struct{}, maxHandshakes), sources: map[string]int{}, raftConn: book.admitRaft}, nil
}

// listen binds the zone port and starts accepting. close stops it and waits.
func (s *secureNet) listen(bind string) error {
	l, err := s.network.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("listen on zone port %s: %w", bind, err)
	}
	s.listener = promutil.CountListener(l, s.metrics.bytes)
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

// acceptLoop admits a connection to the handshake only from the address of a
// member or candidate, at most maxHandshakesPerSource at a time per address and
// maxHandshakes in all. Everything else is closed before TLS costs anything.
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
		ip, ok := remoteIP(c)
		if !ok || !s.book.allowsAddress(ip) {
			s.metrics.handshakeFailures.WithLabelValues("not_member_address").Inc()
			c.Close()
			continue
		}
		if !s.takeSource(ip.String()) {
			s.metrics.handshakeFailures.WithLabelValues("source_limit").Inc()
			c.Close()
			continue
		}
		select {
		case s.sem <- struct{}{}:
		default:
			// Too many handshakes in flight: shed the newest instead of
			// letting a flood of half-open connections pin memory.
			s.releaseSource(ip.String())
			s.metrics.handshakeFailures.WithLabelValues("overload").Inc()
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.sem }()
			defer s.releaseSource(ip.String())
			s.serveConn(c)
		}()
	}
}

func remoteIP(c net.Conn) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

func (s *secureNet) takeSource(ip string) bool {
	s.sourcesMu.Lock()
	defer s.sourcesMu.Unlock()
	if s.sources[ip] >= maxHandshakesPerSource {
		return false
	}
	s.sources[ip]++
	return true
}

func (s *secureNet) releaseSource(ip string) {
	s.sourcesMu.Lock()
	defer s.sourcesMu.Unlock()
	if s.sources[ip]--; s.sources[ip] <= 0 {
		delete(s.sources, ip)
	}
}

func (s *secureNet) serveConn(raw net.Conn) {
	// The first bytes must come at once; only then does the whole
	// handshake get its timeout.
	first := make([]byte, 1)
	raw.SetReadDeadline(time.Now().Add(min(firstBytesTimeout, s.timeout)))
	if _, err := io.ReadFull(raw, first); err != nil {
		s.fail(raw, fmt.Errorf("%w: %w", errSilent, err))
		raw.Close()
		return
	}
	raw.SetDeadline(time.Now().Add(s.timeout))
	tc := tls.Server(&prefixConn{Conn: raw, prefix: first}, &tls.Config{
		Certificates: []tls.Certificate{s.cert},
		// The certificate's key is checked against the claimed node
		// after the handshake; no CA is involved.
		ClientAuth: tls.RequireAnyClientCert,
		MinVersion: tls.VersionTLS13,
	})
	ch, peer, err := s.serverAuth(tc)
	if err != nil {
		s.fail(raw, err)
		tc.Close()
		return
	}
	raw.SetDeadline(time.Time{})
	s.metrics.handshakes.WithLabelValues("server").Inc()
	ac := &Conn{Conn: newFramedConn(tc, s.metrics.badFrames.Inc), Peer: peer}
	switch ch {
	case channelRaft:
		conn, err := s.raftConn(ac)
		if err != nil {
			s.fail(raw, err)
			tc.Close()
			return
		}
		if !s.raft.deliver(conn) {
			conn.Close()
		}
	case channelPeerAPI:
		if !s.peerAPI.deliver(ac) {
			tc.Close()
		}
	}
}

// prefixConn replays bytes already read from a connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
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
	case errors.Is(err, errSilent):
		reason = "silent"
	case errors.Is(err, ErrUnknownPeer):
		reason = "unknown_peer"
	case errors.Is(err, ErrPeerKey):
		reason = "wrong_node_key"
	case errors.Is(err, ErrPeerID):
		reason = "wrong_server_id"
	case errors.Is(err, ErrRaftCaller):
		reason = "raft_caller"
	case errors.Is(err, errSkew):
		reason = "release_skew"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		reason = "eof"
	}
	s.metrics.handshakeFailures.WithLabelValues(reason).Inc()
	level := slog.LevelDebug
	if reason == "release_skew" {
		// An operator must see this one: a member of a release this one
		// cannot share a zone with is knocking. At most once a minute,
		// since anyone who reaches the port can make it happen.
		s.skewLogged.Do(func() { level = slog.LevelWarn })
	}
	s.log.Log(context.Background(), level, "zone port handshake failed", "peer", c.RemoteAddr().String(), "reason", reason, "err", err)
}

// serverAuth runs the server side: read and check the client's proof, its
// claimed identity and its channel, then prove ourselves. The client speaks
// first so that a peer without the key learns nothing but a closed connection.
func (s *secureNet) serverAuth(tc *tls.Conn) (byte, Peer, error) {
	if err := tc.Handshake(); err != nil {
		return 0, Peer{}, fmt.Errorf("tls handshake: %w", err)
	}
	ekm, err := exportKeyingMaterial(tc)
	if err != nil {
		return 0, Peer{}, err
	}
	claims, err := s.readProof(tc, ekm, roleClient)
	if err != nil {
		return 0, Peer{}, err
	}
	peer, err := s.identifyPeer(tc, claims)
	if err != nil {
		return 0, Peer{}, err
	}
	var ch [1]byte
	if _, err := io.ReadFull(tc, ch[:]); err != nil {
		return 0, Peer{}, fmt.Errorf("read channel: %w", err)
	}
	if ch[0] != channelRaft && ch[0] != channelPeerAPI {
		return 0, Peer{}, fmt.Errorf("%w %q", errBadChannel, ch[0])
	}
	if err := s.writeProof(tc, ekm, roleServer); err != nil {
		return 0, Peer{}, err
	}
	return ch[0], peer, nil
}

// identifyPeer matches the certificate the peer proved in TLS with the node it
// claims.
func (s *secureNet) identifyPeer(tc *tls.Conn, c proofClaims) (Peer, error) {
	key, err := certKey(tc.ConnectionState().PeerCertificates)
	if err != nil {
		return Peer{}, fmt.Errorf("%w: %w", ErrPeerKey, err)
	}
	p, err := s.book.identify(c.node, c.serverID, key)
	p.Release, p.Level = c.self.Release, c.self.Level
	return p, err
}

// dial opens an authenticated connection to address on the given channel. When
// ctx names the node it must reach (ExpectPeer), any other node is refused.
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
	raw = promutil.CountConn(raw, s.metrics.bytes)
	dl, _ := ctx.Deadline()
	raw.SetDeadline(dl)
	tc := tls.Client(raw, &tls.Config{
		Certificates: []tls.Certificate{s.cert},
		// Peers' certificates are self-signed with their node keys; the
		// key is checked against the node the peer claims below.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
	})
	if _, err := s.clientAuth(ctx, tc, ch); err != nil {
		tc.Close()
		s.metrics.handshakeFailures.WithLabelValues("dial").Inc()
		return nil, fmt.Errorf("authenticate to zone peer %s: %w", address, err)
	}
	raw.SetDeadline(time.Time{})
	s.metrics.handshakes.WithLabelValues("client").Inc()
	return newFramedConn(tc, s.metrics.badFrames.Inc), nil
}

func (s *secureNet) clientAuth(ctx context.Context, tc *tls.Conn, ch byte) (Peer, error) {
	if err := tc.HandshakeContext(ctx); err != nil {
		return Peer{}, fmt.Errorf("tls handshake: %w", err)
	}
	ekm, err := exportKeyingMaterial(tc)
	if err != nil {
		return Peer{}, err
	}
	if err := s.writeProof(tc, ekm, roleClient, ch); err != nil {
		return Peer{}, err
	}
	claims, err := s.readProof(tc, ekm, roleServer)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Peer{}, fmt.Errorf("peer closed the connection during authentication "+
				"(same zone key on both sides? this node's key registered and this address a member's?): %w", err)
		}
		return Peer{}, err
	}
	if want := expectedPeer(ctx); want != "" && claims.node != want {
		return Peer{}, fmt.Errorf("%w: reached %s, meant %s", ErrWrongPeer, claims.node, want)
	}
	return s.identifyPeer(tc, claims)
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

// writeProof sends [version][uint16 level][len][release][len][keyID][len]
// [node][len][serverID][HMAC(key, ekm ‖ role ‖ level ‖ release ‖ node ‖
// serverID)] and any trailing bytes (the channel) in one write.
func (s *secureNet) writeProof(w io.Writer, ekm []byte, role string, trailer ...byte) error {
	id, key := s.keys.SigningKey()
	rel := s.self.Release
	msg := make([]byte, 0, 7+len(rel)+len(id)+len(s.node)+len(s.serverID)+authMACSize+len(trailer))
	msg = append(msg, authVersion)
	msg = binary.BigEndian.AppendUint16(msg, uint16(s.self.Level))
	msg = append(msg, byte(len(rel)))
	msg = append(msg, rel...)
	msg = append(msg, byte(len(id)))
	msg = append(msg, id...)
	msg = append(msg, byte(len(s.node)))
	msg = append(msg, s.node...)
	msg = append(msg, byte(len(s.serverID)))
	msg = append(msg, s.serverID...)
	msg = append(msg, proofMAC(key, ekm, role, s.self, s.node, s.serverID)...)
	msg = append(msg, trailer...)
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("send zone-key proof: %w", err)
	}
	return nil
}

func proofMAC(key, ekm []byte, role string, a skew.Announcement, node, serverID string) []byte {
	return mac(key, ekm, []byte(role), binary.BigEndian.AppendUint16(nil, uint16(a.Level)), []byte{byte(len(a.Release))}, []byte(a.Release),
		[]byte{byte(len(node))}, []byte(node), []byte{byte(len(serverID))}, []byte(serverID))
}

// proofClaims is what the other side's proof says of it.
type proofClaims struct {
	node, serverID string
	self           skew.Announcement
}

// readProof reads and checks the other side's proof and returns what it
// claims. A proof of another version, or of a release older than N−1, is
// refused with errSkew: the two cannot share a zone.
func (s *secureNet) readProof(r io.Reader, ekm []byte, role string) (proofClaims, error) {
	var c proofClaims
	var ver [1]byte
	if _, err := io.ReadFull(r, ver[:]); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	if v := ver[0]; v < oldestAuthVersion || v > authVersion {
		return c, fmt.Errorf("%w: proof version %d, this release (%s) reads %d to %d: %s", errSkew, v,
			s.self, oldestAuthVersion, authVersion, skewAdvice(v < oldestAuthVersion))
	}
	var lvl [3]byte
	if _, err := io.ReadFull(r, lvl[:]); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	c.self.Level = skew.Level(binary.BigEndian.Uint16(lvl[:2]))
	if lvl[2] > skew.MaxReleaseLen {
		return c, fmt.Errorf("%w: release of %d bytes", errBadPeerMAC, lvl[2])
	}
	rel := make([]byte, lvl[2])
	if _, err := io.ReadFull(r, rel); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	c.self.Release = string(rel)
	var idLen [1]byte
	if _, err := io.ReadFull(r, idLen[:]); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	if idLen[0] == 0 || int(idLen[0]) > maxKeyIDLength {
		return c, fmt.Errorf("%w: key id length %d", errPeerUnknownK, idLen[0])
	}
	idBuf := make([]byte, idLen[0])
	if _, err := io.ReadFull(r, idBuf); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	var err error
	if c.node, err = readClaim(r); err != nil {
		return c, err
	}
	if c.serverID, err = readClaim(r); err != nil {
		return c, err
	}
	got := make([]byte, authMACSize)
	if _, err := io.ReadFull(r, got); err != nil {
		return c, fmt.Errorf("read zone-key proof: %w", err)
	}
	key, err := s.keys.Key(string(idBuf))
	if err != nil {
		return c, fmt.Errorf("%w: %w", errPeerUnknownK, err)
	}
	if !hmac.Equal(got, proofMAC(key, ekm, role, c.self, c.node, c.serverID)) {
		return c, errBadPeerMAC
	}
	// Only now is the announcement the peer's own word.
	if err := c.self.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", errBadPeerMAC, err)
	}
	if c.self.Level < skew.Oldest() {
		return c, fmt.Errorf("%w: %s announces %s; this release (%s) shares a zone with %s and later: %s",
			errSkew, c.node, c.self, s.self, skew.Oldest(), skewAdvice(true))
	}
	return c, nil
}

// skewAdvice says what an operator does about a peer of a release this one
// cannot share a zone with.
func skewAdvice(peerOlder bool) string {
	if peerOlder {
		return "upgrade the peer to this release or the one before it (docs/operating.md, \"Upgrades\")"
	}
	return "upgrade this member: the peer runs a release more than one ahead of it (docs/operating.md, \"Upgrades\")"
}

// readClaim reads one length-prefixed claim of the proof.
func readClaim(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", fmt.Errorf("read zone-key proof: %w", err)
	}
	if n[0] == 0 || int(n[0]) > maxClaimLength {
		return "", fmt.Errorf("%w: claim length %d", errBadPeerMAC, n[0])
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("read zone-key proof: %w", err)
	}
	return string(b), nil
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

// Dial reaches the member the zone knows at address and nobody else.
func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if node, ok := l.sn.book.nodeAt(string(address)); ok {
		ctx = ExpectPeer(ctx, node)
	}
	return l.sn.dial(ctx, string(address), channelRaft)
}

// Addr must be the advertised address: raft puts it in its RPCs' headers.
func (l *streamLayer) Addr() net.Addr { return advertiseAddr(l.sn.advertise) }

type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// mac is HMAC-SHA256(key, parts...).
func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}
