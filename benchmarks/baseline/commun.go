package baseline

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// CommunInfo is the exchange message, field names as SuperEdge's.
type CommunInfo struct {
	SourceIP    string
	CheckDetail Row
	Hmac        string
}

// ErrNoKey means the hmac-config ConfigMap or its key is missing: nothing is
// sent or accepted without it.
var ErrNoKey = errors.New("no exchange key in " + ConfigNamespace + "/" + HMACConfigMap)

// Sign returns the hex HMAC-SHA256 of the JSON of SourceIP followed by the JSON
// of CheckDetail — SuperEdge's construction, including the JSON encoding of the
// map, which encoding/json sorts by key so both sides agree.
func Sign(info CommunInfo, key []byte) (string, error) {
	src, err := json.Marshal(info.SourceIP)
	if err != nil {
		return "", fmt.Errorf("encode source for hmac: %w", err)
	}
	detail, err := json.Marshal(info.CheckDetail)
	if err != nil {
		return "", fmt.Errorf("encode detail for hmac: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(src)
	m.Write(detail)
	return hex.EncodeToString(m.Sum(nil)), nil
}

// keySource reads the exchange key from the ConfigMap lister on every use, as
// SuperEdge does, so a rotated key takes effect without a restart.
type keySource struct{ lister corelisters.ConfigMapLister }

func (k keySource) key() ([]byte, error) {
	cm, err := k.lister.ConfigMaps(ConfigNamespace).Get(HMACConfigMap)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	v, ok := cm.Data[HMACKey]
	if !ok || v == "" {
		return nil, ErrNoKey
	}
	return []byte(v), nil
}

// commun sends this node's row to its peers and receives theirs.
type commun struct {
	cfg     Config
	state   *state
	keys    keySource
	client  *http.Client
	metrics *metrics
	log     *slog.Logger
}

func newCommun(cfg Config, st *state, keys keySource, m *metrics, log *slog.Logger) *commun {
	local := net.ParseIP(cfg.LocalIP)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: cfg.CommunTimeout, LocalAddr: &net.TCPAddr{IP: local}}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return promutil.CountConn(c, m.bytes), nil
	}
	return &commun{cfg: cfg, state: st, keys: keys, metrics: m, log: log,
		client: &http.Client{Transport: tr, Timeout: cfg.CommunTimeout}}
}

// send PUTs the local row to every other IP in it, 16 at a time. The message
// is signed and encoded once per destination, as SuperEdge does.
func (c *commun) send(ctx context.Context) {
	row := c.state.localRow(c.cfg.LocalIP)
	dsts := make([]string, 0, len(row))
	for ip := range row {
		if ip != c.cfg.LocalIP {
			dsts = append(dsts, ip)
		}
	}
	workqueue.ParallelizeUntil(ctx, 16, len(dsts), func(i int) {
		if err := c.sendTo(ctx, dsts[i], row); err != nil {
			c.log.Debug("exchange send failed", "peer", dsts[i], "err", err)
		}
	})
}

func (c *commun) sendTo(ctx context.Context, dst string, row Row) error {
	key, err := c.keys.key()
	if err != nil {
		return err
	}
	info := CommunInfo{SourceIP: c.cfg.LocalIP, CheckDetail: row}
	if info.Hmac, err = Sign(info, key); err != nil {
		return err
	}
	body, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode exchange message: %w", err)
	}
	url := "http://" + net.JoinHostPort(dst, strconv.Itoa(c.cfg.CommunPort)) + "/result"
	var last error
	for range c.cfg.CommunTries {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("build exchange request: %w", err)
		}
		c.metrics.requests.WithLabelValues("out").Inc()
		resp, err := c.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		// Drain so the connection is reused, as DoRequestAndDiscard does.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("peer %s answered %s", dst, resp.Status)
			continue
		}
		return nil
	}
	return last
}

// handler serves PUT /result: decode, check the HMAC, replace the sender's row.
func (c *commun) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /result", func(w http.ResponseWriter, r *http.Request) {
		c.metrics.requests.WithLabelValues("in").Inc()
		var info CommunInfo
		if err := json.NewDecoder(r.Body).Decode(&info); err != nil {
			http.Error(w, "invalid commun information: "+err.Error(), http.StatusBadRequest)
			return
		}
		key, err := c.keys.key()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		want, err := Sign(CommunInfo{SourceIP: info.SourceIP, CheckDetail: info.CheckDetail}, key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !hmac.Equal([]byte(want), []byte(info.Hmac)) {
			c.metrics.rejected.Inc()
			http.Error(w, "hmac not match", http.StatusForbidden)
			return
		}
		c.state.setRow(info.SourceIP, info.CheckDetail, time.Now())
		_, _ = io.WriteString(w, "Received!\n")
	})
	return mux
}
