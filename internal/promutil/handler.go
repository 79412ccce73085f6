package promutil

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves g's metrics as promhttp's handler does, gzipped when the
// scraper accepts it, but with a stateless deflate. promhttp's gzip writer
// carries about 0.9 MiB of compressor state (compress/flate's hash chains),
// allocated afresh for most scrapes: the largest single allocation of an
// agent of a small zone, whose whole heap is a few MiB, and it raised the
// agent's peak memory and the pages it touches. A stateless deflate of the
// whole response needs a few hundred KiB, and a scrape's tens of KiB still
// reach the scraper as a quarter of that over an edge uplink.
func Handler(g prometheus.Gatherer) http.Handler {
	inner := promhttp.HandlerFor(g, promhttp.HandlerOpts{DisableCompression: true})
	var lastSize atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			inner.ServeHTTP(w, r)
			return
		}
		buf := bufs.Get().(*bytes.Buffer)
		defer func() {
			if buf.Cap() <= maxPooledBuffer {
				buf.Reset()
				bufs.Put(buf)
			}
		}()
		// A buffer the pool lost to a collection grows once, to the last
		// scrape's size, not by doubling from 512 bytes.
		buf.Grow(min(int(lastSize.Load()), maxPooledBuffer))
		rec := &recorder{header: w.Header(), body: buf, status: http.StatusOK}
		inner.ServeHTTP(rec, r)
		lastSize.Store(int64(buf.Len()))
		plain := func() {
			w.WriteHeader(rec.status)
			w.Write(buf.Bytes())
		}
		if rec.status != http.StatusOK || buf.Len() < minGzip {
			plain()
			return
		}
		var out bytes.Buffer
		out.Grow(buf.Len()/3 + 64)
		if err := writeGzip(&out, buf.Bytes()); err != nil {
			plain() // writing to a bytes.Buffer does not fail; the encoder might
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
		w.WriteHeader(rec.status)
		w.Write(out.Bytes())
	})
}

// minGzip is the smallest response worth gzipping: below it the 18 bytes of
// gzip framing and the deflate block header eat what compression saves.
const minGzip = 512

// maxPooledBuffer bounds the response buffers kept between scrapes, so that
// one huge scrape (a debugging registry) is not held for the process's life.
const maxPooledBuffer = 1 << 20

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// acceptsGzip reports whether an Accept-Encoding header value admits gzip
// (RFC 9110): listed by name with a q above 0, or not listed and "*" so.
// net/http parses no Accept-Encoding, promhttp's negotiation is internal to
// it, and goautoneg (linked through expfmt) skips names without a "/".
func acceptsGzip(header string) bool {
	gzipQ, starQ := -1.0, -1.0
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.TrimSpace(name)
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || !(f > 0) {
					f = 0
				}
				q = f
			}
		}
		switch {
		case strings.EqualFold(name, "gzip"):
			gzipQ = q
		case name == "*":
			starQ = q
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

// recorder keeps what promhttp's handler writes, to compress it whole: a
// stateless deflate compresses each write on its own, so the handler's
// small writes would compress poorly.
type recorder struct {
	header http.Header
	body   *bytes.Buffer
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

// writeGzip writes data to w as one gzip member (RFC 1952): a header without
// name, time or extra fields, data deflated without state kept between
// calls, and the CRC-32 and length of data. The framing is ours because
// klauspost/compress/gzip's writer reaches every compression level's encoder
// and would link them all into the agent; compress/gzip's cannot take
// another deflate.
func writeGzip(w *bytes.Buffer, data []byte) error {
	// ID1, ID2, CM = deflate, FLG = 0, MTIME = 0, XFL = 0, OS = unknown.
	w.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255})
	if err := flate.StatelessDeflate(w, data, true, nil); err != nil {
		return err
	}
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc32.ChecksumIEEE(data))
	binary.LittleEndian.PutUint32(trailer[4:], uint32(len(data)))
	w.Write(trailer[:])
	return nil
}
