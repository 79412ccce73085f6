package webhookcerts

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var testPolicy = Policy{
	CAValidity:   30 * time.Minute,
	CertValidity: 10 * time.Minute,
	Names:        Names{DNS: ServiceNames("edgequorum-webhook", "edgequorum-webhook"), IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
	Settle:       time.Minute,
}

// leafOf is the serving certificate in data.
func leafOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(data[CertFile], data[KeyFile])
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// verifies reports whether leaf chains, at now, to a CA of bundle.
func verifies(leaf *x509.Certificate, bundle []byte, now time.Time) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: "edgequorum-webhook.edgequorum-webhook.svc"})
	return err
}

// TestPolicyKeepsEveryReplicaVerifiable runs the policy for five hours of a
// CA lasting 30 minutes and serving certificates lasting 10, with an
// apiserver that picks up each caBundle 20 s after it is published. At every
// moment what the replicas serve verifies against what the apiserver holds,
// the CA rotates (with old and new in the bundle while the serving
// certificate switches), the serving certificate is renewed well before it
// expires, and an expired CA leaves the bundle.
func TestPolicyKeepsEveryReplicaVerifiable(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const pickup = 20 * time.Second
	var (
		data           map[string][]byte
		published      []byte    // the bundle in the configuration
		publishedAt    time.Time // when it was written there
		apiserver      []byte    // the bundle the apiserver verifies with
		trusted        time.Time
		trustedSigner  string
		steps          = map[string]int{}
		minLeft        = time.Duration(1<<63 - 1)
		maxBundleCerts int
	)
	for end := now.Add(5 * time.Hour); now.Before(end); now = now.Add(10 * time.Second) {
		// The caller: publish the Secret's bundle; the apiserver takes it
		// up pickup later. trusted is when the caller saw the
		// configuration hold the signer (it cannot see the apiserver's
		// own copy: Settle covers that).
		if data != nil && string(published) != string(data[CAFile]) {
			published, publishedAt = data[CAFile], now
		}
		if published != nil && now.Sub(publishedAt) >= pickup {
			apiserver = published
		}
		if data != nil {
			signer, err := ParseCA(data[SignerCertKey], data[SignerKeyKey])
			if err != nil {
				t.Fatalf("%s: signer: %v", now, err)
			}
			if id := signer.Cert.SerialNumber.String(); id != trustedSigner && BundleTrusts(published, signer.Cert) {
				trustedSigner, trusted = id, now
			}
		}
		var signerTrusted time.Time
		if trustedSigner != "" {
			signerTrusted = trusted
		}
		step, err := testPolicy.Next(data, now, signerTrusted)
		if err != nil {
			t.Fatalf("%s: %v", now, err)
		}
		if step.Data != nil {
			steps[strings.Fields(step.Reason)[0]]++
			if s, _ := ParseCA(step.Data[SignerCertKey], step.Data[SignerKeyKey]); s != nil &&
				(data == nil || string(step.Data[SignerCertKey]) != string(data[SignerCertKey])) {
				trustedSigner = "" // a new signer: not trusted until published
			}
			data = step.Data
		}
		leaf := leafOf(t, data)
		if apiserver != nil {
			if err := verifies(leaf, apiserver, now); err != nil {
				t.Fatalf("%s: the apiserver cannot verify what the replicas serve: %v (last step %q)", now, err, step.Reason)
			}
		}
		if left := leaf.NotAfter.Sub(now); left < minLeft {
			minLeft = left
		}
		if certs, _ := parseCerts(data[CAFile]); len(certs) > maxBundleCerts {
			maxBundleCerts = len(certs)
		}
	}
	// 5 h of a 30 min CA renewed at 20 min: 15 rotations, each publishing a
	// bundle with the old CA beside the new, then dropping the old.
	if steps[StepCreated] != 1 || steps[StepCARotated] < 14 || steps[StepBundle] < 13 || steps[StepCertIssued] < 15 {
		t.Errorf("steps %v", steps)
	}
	if maxBundleCerts != 2 {
		t.Errorf("the bundle held at most %d CAs, want 2 while one replaces the other", maxBundleCerts)
	}
	// Renewed with a third of 10 min left; one signed by the CA being
	// replaced waits a Settle more for the new CA to be trusted.
	if minLeft < testPolicy.CertValidity/3-testPolicy.Settle {
		t.Errorf("a serving certificate came within %s of expiry", minLeft)
	}
}

// TestPolicyRepairsWhatItCannotRead: a Secret of garbage gets a new CA, then
// a serving pair once the new CA is trusted; a pair for other names is
// replaced.
func TestPolicyRepairsWhatItCannotRead(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	garbage := map[string][]byte{CAFile: []byte("x"), SignerCertKey: []byte("y"), SignerKeyKey: []byte("z"), CertFile: []byte("-"), KeyFile: []byte("-")}
	step, err := testPolicy.Next(garbage, now, time.Time{})
	if err != nil || step.Reason != StepCARotated {
		t.Fatalf("garbage: %q, %v; want a new CA", step.Reason, err)
	}
	// No valid pair to keep serving: issued at once.
	step, err = testPolicy.Next(step.Data, now, time.Time{})
	if err != nil || !strings.HasPrefix(step.Reason, StepCertIssued) {
		t.Fatalf("no valid pair: %q, %v", step.Reason, err)
	}
	if err := verifies(leafOf(t, step.Data), step.Data[CAFile], now); err != nil {
		t.Fatal(err)
	}
	other := testPolicy
	other.Names.DNS = []string{"elsewhere.svc"}
	next, err := other.Next(step.Data, now, now.Add(-time.Hour))
	if err != nil || next.Reason != StepCertIssued+" (names changed)" {
		t.Fatalf("names changed: %q, %v", next.Reason, err)
	}
	if got := leafOf(t, next.Data).DNSNames; len(got) != 1 || got[0] != "elsewhere.svc" {
		t.Errorf("reissued for %v", got)
	}
}

// TestPolicyAppliesAShorterValidityNow: an operator who shortens the
// validities gets certificates of the new length at once, the CA first.
func TestPolicyAppliesAShorterValidityNow(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	long := testPolicy
	long.CAValidity, long.CertValidity = 5*365*24*time.Hour, 90*24*time.Hour
	step, err := long.Next(nil, now, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	step, err = testPolicy.Next(step.Data, now, time.Time{})
	if err != nil || step.Reason != StepCARotated {
		t.Fatalf("CA of 5 years under a policy of 30 minutes: %q, %v; want %s", step.Reason, err, StepCARotated)
	}
	data := step.Data
	step, err = testPolicy.Next(data, now.Add(testPolicy.Settle), now)
	if err != nil || !strings.HasPrefix(step.Reason, StepCertIssued) {
		t.Fatalf("after the new CA settled: %q, %v", step.Reason, err)
	}
	if got := leafOf(t, step.Data); got.NotAfter.Sub(now) > testPolicy.CertValidity+testPolicy.Settle {
		t.Errorf("serving certificate lasts until %s, want within %s", got.NotAfter, testPolicy.CertValidity)
	}
	if step, _ = testPolicy.Next(step.Data, now.Add(testPolicy.Settle), now); step.Data != nil {
		t.Errorf("a certificate of the new length renewed again at once: %q", step.Reason)
	}
}

// TestPolicyNeverLetsThePairExpireWaiting: a pair of the old CA that would
// expire before the new CA has been trusted for Settle is replaced as soon as
// the new CA is published, not left to expire.
func TestPolicyNeverLetsThePairExpireWaiting(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	step, err := testPolicy.Next(nil, now, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// At 19m the pair is renewed, capped at the CA's end (30m). The CA is
	// due from 20m; looked at only at 28m, its pair has 2 minutes left,
	// less than a Settle of 3.
	slow := testPolicy
	slow.Settle = 3 * time.Minute
	if step, err = slow.Next(step.Data, now.Add(19*time.Minute), now); err != nil || !strings.HasPrefix(step.Reason, StepCertIssued) {
		t.Fatalf("at 19m: %q, %v", step.Reason, err)
	}
	at := now.Add(28 * time.Minute)
	step, err = slow.Next(step.Data, at, now)
	if err != nil || step.Reason != StepCARotated {
		t.Fatalf("at 28m: %q, %v; want %s", step.Reason, err, StepCARotated)
	}
	if left := leafOf(t, step.Data).NotAfter.Sub(at); left >= slow.Settle {
		t.Fatalf("the old pair has %s left; the test wants less than the Settle", left)
	}
	if next, _ := slow.Next(step.Data, at, time.Time{}); next.Data != nil {
		t.Errorf("issued before the new CA was published: %q", next.Reason)
	}
	next, err := slow.Next(step.Data, at.Add(time.Second), at.Add(time.Second))
	if err != nil || !strings.HasPrefix(next.Reason, StepCertIssued) {
		t.Fatalf("published, the old pair expiring within the Settle: %q, %v; want a new pair at once", next.Reason, err)
	}
}

// TestPolicyTakesOverASecretOfEdgequorumCerts: the upgrade from v0.3.0, whose
// install put a Secret made by `edgequorum certs` in place (a CA and a pair,
// no CA key). The policy adds a CA of its own beside that one, keeps serving
// the old pair until the new CA has been trusted for Settle, then moves the
// pair to it: at every step the pair served verifies against the bundle.
func TestPolicyTakesOverASecretOfEdgequorumCerts(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b, err := Generate(Options{Service: "edgequorum-webhook", Namespace: "edgequorum-webhook", Validity: 365 * 24 * time.Hour,
		Clock: clocktesting.NewFakeClock(now.Add(-30 * 24 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{CAFile: b.CACert, CertFile: b.Cert, KeyFile: b.Key}
	old := leafOf(t, data)
	step, err := testPolicy.Next(data, now, time.Time{})
	if err != nil || step.Reason != StepCARotated {
		t.Fatalf("a Secret without a CA key: %q, %v; want %s", step.Reason, err, StepCARotated)
	}
	if leaf := leafOf(t, step.Data); !leaf.Equal(old) {
		t.Error("the pair in service changed with the CA")
	}
	if err := verifies(old, step.Data[CAFile], now); err != nil {
		t.Errorf("the new bundle does not hold the CA of the pair in service: %v", err)
	}
	if next, _ := testPolicy.Next(step.Data, now.Add(time.Second), now); next.Data != nil {
		t.Errorf("moved the pair before the new CA settled: %q", next.Reason)
	}
	next, err := testPolicy.Next(step.Data, now.Add(testPolicy.Settle), now)
	if err != nil || next.Reason != StepCertIssued+" ("+dueOtherCA+")" {
		t.Fatalf("after the Settle: %q, %v", next.Reason, err)
	}
	if err := verifies(leafOf(t, next.Data), next.Data[CAFile], now.Add(testPolicy.Settle)); err != nil {
		t.Errorf("the new pair does not verify against the bundle: %v", err)
	}
}
