package promutil

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// registry returns a registry of n gauges with fixed values, so that two
// scrapes read the same text.
func registry(t testing.TB, n int) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_peer_up", Help: "Whether a peer answers."}, []string{"peer", "probe"})
	for i := range n {
		g.WithLabelValues("node-"+strconv.Itoa(i), "agent").Set(float64(i % 2))
	}
	reg.MustRegister(g)
	return reg
}

func scrape(t testing.TB, h http.Handler, acceptEncoding string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec
}

// A scraper that accepts gzip gets, gunzipped, the very text one that does
// not gets, at sizes of one deflate block and of several (the stateless
// deflate cuts its input at 32 KiB).
func TestHandlerGzipsWhatPromhttpServes(t *testing.T) {
	for _, n := range []int{20, 300, 5000} {
		h := Handler(registry(t, n))
		plain := scrape(t, h, "")
		if ce := plain.Header().Get("Content-Encoding"); ce != "" {
			t.Fatalf("%d series: Content-Encoding %q without Accept-Encoding", n, ce)
		}
		zipped := scrape(t, h, "deflate, gzip;q=0.8")
		if ce := zipped.Header().Get("Content-Encoding"); ce != "gzip" {
			t.Fatalf("%d series: Content-Encoding %q, want gzip", n, ce)
		}
		if cl := zipped.Header().Get("Content-Length"); cl != strconv.Itoa(zipped.Body.Len()) {
			t.Errorf("%d series: Content-Length %s for %d bytes", n, cl, zipped.Body.Len())
		}
		if ct, want := zipped.Header().Get("Content-Type"), plain.Header().Get("Content-Type"); ct != want || ct == "" {
			t.Errorf("%d series: Content-Type %q, want %q", n, ct, want)
		}
		for _, rec := range []*httptest.ResponseRecorder{plain, zipped} {
			if !slices.Contains(rec.Header().Values("Vary"), "Accept-Encoding") {
				t.Errorf("%d series: Vary %q lacks Accept-Encoding", n, rec.Header().Values("Vary"))
			}
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped.Body.Bytes()))
		if err != nil {
			t.Fatalf("%d series: %v", n, err)
		}
		got, err := io.ReadAll(zr) // checks the CRC-32 and length
		if err != nil {
			t.Fatalf("%d series: %v", n, err)
		}
		if !bytes.Equal(got, plain.Body.Bytes()) {
			t.Fatalf("%d series: gunzipped %d bytes differ from the plain %d", n, len(got), plain.Body.Len())
		}
		if zipped.Body.Len() > plain.Body.Len()/3 {
			t.Errorf("%d series: %d bytes gzipped from %d; want at most a third", n, zipped.Body.Len(), plain.Body.Len())
		}
	}
}

func TestHandlerServesSmallResponsesPlain(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_up", Help: "Up."}))
	rec := scrape(t, Handler(reg), "gzip")
	if ce := rec.Header().Get("Content-Encoding"); ce != "" {
		t.Errorf("a %d-byte response has Content-Encoding %q", rec.Body.Len(), ce)
	}
	if !bytes.Contains(rec.Body.Bytes(), []byte("test_up 0")) {
		t.Errorf("body %q", rec.Body)
	}
}

// failing is a collector whose every collection fails, as a broken
// collector in a registry does.
type failing struct{ desc *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.desc, errors.New("disk gone"))
}

// A scrape that fails reaches a gzip-accepting scraper as promhttp's error,
// with its status and in plain text, not as a gzipped 200.
func TestHandlerPassesAFailedScrapeThroughPlain(t *testing.T) {
	reg := registry(t, 300)
	reg.MustRegister(failing{prometheus.NewDesc("test_broken", "Broken.", nil, nil)})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", rec.Code)
	}
	if ce := rec.Header().Get("Content-Encoding"); ce != "" {
		t.Errorf("a failed scrape has Content-Encoding %q", ce)
	}
	if !bytes.Contains(rec.Body.Bytes(), []byte("disk gone")) {
		t.Errorf("body %q does not name the collector's error", rec.Body)
	}
}

// Scrapes at once share the handler's buffer pool and size hint; each still
// gets its own whole response.
func TestHandlerConcurrentScrapes(t *testing.T) {
	h := Handler(registry(t, 300))
	want := scrape(t, h, "").Body.Bytes()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				if i%2 == 0 {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				body := rec.Body.Bytes()
				if rec.Header().Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					if body, err = io.ReadAll(zr); err != nil {
						t.Error(err)
						return
					}
				}
				if !bytes.Equal(body, want) {
					t.Errorf("a concurrent scrape got %d bytes, not the %d of one alone", len(body), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                    false,
		"gzip":                true,
		"GZip":                true,
		"deflate, gzip;q=0.5": true,
		"gzip;q=0":            false,
		"gzip; q=0.0":         false,
		"gzip;q=bad":          false,
		"*":                   true,
		"*;q=0":               false,
		"gzip;q=0, *":         false,
		"*, gzip;q=0":         false,
		"br, *;q=0.1":         true,
		"identity":            false,
		"br, zstd":            false,
		"x-gzip":              false,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "deflate, gzip;q=0.5", "*;q=0", ";;=,", "gzip;q=1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		acceptsGzip(header)
	})
}

// BenchmarkScrape compares the bytes a scrape of an agent-sized registry
// allocates with this handler and with promhttp's own gzip, each scrape after
// two collections, as an agent's scrapes come (seconds apart), so that
// sync.Pools hold nothing from the scrape before.
func BenchmarkScrape(b *testing.B) {
	reg := registry(b, 300)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"stateless", Handler(reg)},
		{"promhttp", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for range b.N {
				b.StopTimer()
				runtime.GC()
				runtime.GC()
				b.StartTimer()
				size = scrape(b, c.h, "gzip").Body.Len()
			}
			b.ReportMetric(float64(size), "gzip-bytes")
		})
	}
}
