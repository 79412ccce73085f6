package probe

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestNewCheckerWeights(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		line    float64
		want    []float64
		wantErr []string // substrings of the error; nil means success
	}{
		{"lone probe weighs 1", []string{"kubelet"}, 100, []float64{1}, nil},
		{"unweighted probes share equally", []string{"kubelet", "http:port=80"}, 100, []float64{0.5, 0.5}, nil},
		{"three unweighted", []string{"kubelet", "http:port=80", "grpc:port=9"}, 100, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, nil},
		{"unweighted share the remainder", []string{"kubelet:weight=0.4", "http:port=80", "grpc:port=9"}, 100,
			[]float64{0.4, 0.3, 0.3}, nil},
		{"explicit weights", []string{"kubelet:weight=0.5", "http:weight=0.3", "grpc:port=9,weight=0.2"}, 70,
			[]float64{0.5, 0.3, 0.2}, nil},
		{"within tolerance", []string{"kubelet:weight=0.333", "http:weight=0.333", "grpc:port=9,weight=0.333"}, 100,
			[]float64{0.333, 0.333, 0.333}, nil},
		{"sum too small names probes and sum", []string{"kubelet:weight=0.5", "http:port=80,weight=0.3"}, 100, nil,
			[]string{"sum to 0.8", "kubelet:weight=0.5", "http:port=80,weight=0.3"}},
		{"sum too large", []string{"kubelet:weight=0.7", "http:weight=0.5"}, 100, nil,
			[]string{"sum to 1.2", "kubelet:weight=0.7", "http:weight=0.5"}},
		{"nothing left for unweighted", []string{"kubelet:weight=0.6", "http:weight=0.5", "grpc:port=9"}, 100, nil,
			[]string{"already sum to 1.1", "grpc:port=9", "kubelet:weight=0.6"}},
		{"explicit 1 leaves zero", []string{"kubelet:weight=1", "http"}, 100, nil,
			[]string{"already sum to 1", "#2 http = 0"}},
		{"score line zero", []string{"kubelet"}, 0, nil, []string{"score line 0"}},
		{"score line above 100", []string{"kubelet"}, 101, nil, []string{"score line 101"}},
		{"score line NaN", []string{"kubelet"}, math.NaN(), nil, []string{"score line NaN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []Spec
			for _, s := range tt.specs {
				specs = append(specs, mustParse(t, s))
			}
			c, err := NewChecker(specs, tt.line)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("NewChecker succeeded with weights %v, want an error", c.Weights())
				}
				for _, sub := range tt.wantErr {
					if !strings.Contains(err.Error(), sub) {
						t.Errorf("error %q does not contain %q", err, sub)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("NewChecker: %v", err)
			}
			got := c.Weights()
			for i := range tt.want {
				if math.Abs(got[i]-tt.want[i]) > 1e-12 {
					t.Fatalf("Weights() = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestNewCheckerWrapsErrWeights(t *testing.T) {
	_, err := NewChecker([]Spec{{Kind: KindKubelet, Weight: 0.5}}, 100)
	if !errors.Is(err, ErrWeights) {
		t.Fatalf("NewChecker error = %v, want ErrWeights", err)
	}
}

func TestCheckerEvaluate(t *testing.T) {
	specs := []Spec{{Kind: KindKubelet, Weight: 0.7}, {Kind: KindHTTP, Weight: 0.2}, {Kind: KindGRPC, Port: 9, Weight: 0.1}}
	c, err := NewChecker(specs, 90)
	if err != nil {
		t.Fatal(err)
	}
	S, F, U := Success, Failure, Unknown
	tests := []struct {
		name   string
		states []Result
		want   Evaluation
	}{
		{"all pass", []Result{S, S, S}, Evaluation{Known: true, OK: true, Score: 100}},
		{"exactly on the line", []Result{S, S, F}, Evaluation{Known: true, OK: true, Score: 90}},
		{"below the line", []Result{S, F, S}, Evaluation{Known: true, OK: false, Score: 80}},
		{"all fail", []Result{F, F, F}, Evaluation{Known: true, OK: false, Score: 0}},
		{"one unknown is not judged", []Result{U, S, S}, Evaluation{Known: false, OK: false, Score: 30}},
		{"unknown even with a passing score", []Result{S, S, U}, Evaluation{Known: false, OK: false, Score: 90}},
		{"nothing known", []Result{U, U, U}, Evaluation{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Evaluate(tt.states); got != tt.want {
				t.Fatalf("Evaluate(%v) = %+v, want %+v", tt.states, got, tt.want)
			}
		})
	}
}

// TestCheckerScoreNormalised checks that weights inside the tolerance but not
// summing to exactly 1 still give a passing target the full score.
func TestCheckerScoreNormalised(t *testing.T) {
	specs := []Spec{{Kind: KindKubelet, Weight: 0.333}, {Kind: KindHTTP, Weight: 0.333}, {Kind: KindHTTPS, Weight: 0.333}}
	c, err := NewChecker(specs, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Evaluate([]Result{Success, Success, Success}); !got.OK || got.Score != 100 {
		t.Fatalf("Evaluate(all success) = %+v, want OK with score 100", got)
	}
}
