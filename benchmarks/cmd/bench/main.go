// Command bench runs edgequorum's zone-size benchmark suite against the
// SuperEdge edge-health baseline and writes results.md, results.csv,
// results.json and the plots into -out. `make bench` and `make bench-quick`
// run it; see benchmarks/README.md. With -detect (`make bench-detect`) it
// runs only the kill phase, with many reset and silent deaths, and writes
// detect.md and detect.json instead.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/edgequorum/edgequorum/benchmarks/suite"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	full, q, det := suite.FullConfig(), suite.QuickConfig(), suite.DetectConfig()
	var (
		quick         = flag.Bool("quick", false, "CI smoke run: sizes 3,5,9, fewer repetitions, no run at SuperEdge's default timings")
		sizes         = flag.String("sizes", "", fmt.Sprintf("comma-separated zone sizes (default %s; quick %s)", joinInts(full.Sizes), joinInts(q.Sizes)))
		kills         = flag.Int("kills", full.Kills, fmt.Sprintf("node kills per size (quick %d)", q.Kills))
		failovers     = flag.Int("failovers", full.Failovers, fmt.Sprintf("leader kills per size (quick %d)", q.Failovers))
		defaultsKills = flag.Int("defaults-kills", full.DefaultsKills, fmt.Sprintf("kills for the baseline at SuperEdge's default timings, 0 to skip (quick %d)", q.DefaultsKills))
		steady        = flag.Duration("steady", full.Steady, fmt.Sprintf("steady-state window (quick %s)", q.Steady))
		cut           = flag.Duration("cut", full.Cut, fmt.Sprintf("whole-zone cloud cut (quick %s)", q.Cut))
		out           = flag.String("out", "benchmarks/results", "directory for results.md, results.csv, results.json and the plots")
		readme        = flag.String("readme", "", "comma-separated READMEs whose results section to replace with the new summary (full runs)")
		binDir        = flag.String("bin", "", "directory with the control plane, edgequorum and edgehealth-baseline (default: the repository's bin/)")
		work          = flag.String("work", "", "directory for the control plane and logs (default: a new temporary directory, removed unless -keep)")
		data          = flag.String("data", "", "directory for agent state (default: a new directory under /dev/shm when it exists)")
		keep          = flag.Bool("keep", false, "keep the work directory (logs) after the run")
		seed          = flag.Uint64("seed", 1, "seed for victim choice")
		render        = flag.String("render", "", "only re-render the outputs from these results.json files (comma-separated; sizes are merged)")
		scale         = flag.String("scale", "", "time dilation per size as N=ours/baseline, e.g. 65=4/4,129=16/32 (default: suite.DefaultScale)")
		onlyDefaults  = flag.Bool("only-defaults", false, "run only the baseline at SuperEdge's default timings (on fresh nodes), e.g. to merge into a full run with -render")
		defaultsSizes = flag.String("defaults-sizes", "", fmt.Sprintf("sizes that get the run at SuperEdge's default timings (default %s; none with -defaults-kills 0)", joinInts(full.DefaultsSizes)))
		loss          = flag.String("loss", "", fmt.Sprintf("packet-loss levels of the lossy-link phase in %%, or none to skip it (default %s; quick %s)", joinInts(full.LossPercents), joinInts(q.LossPercents)))
		lossSizes     = flag.String("loss-sizes", "", fmt.Sprintf("sizes that get the lossy-link phase (default %s; quick %s; with -only-lossy every size of -sizes)", joinInts(full.LossSizes), joinInts(q.LossSizes)))
		lossWindow    = flag.Duration("loss-window", full.LossWindow, fmt.Sprintf("time per loss level with every node alive (quick %s)", q.LossWindow))
		lossKills     = flag.Int("loss-kills", full.LossKills, fmt.Sprintf("node kills per loss level (quick %d)", q.LossKills))
		onlyLossy     = flag.Bool("only-lossy", false, "run only formation and the lossy-link phase, for both systems, e.g. to merge into a full run with -render")
		liveSizes     = flag.String("live-sizes", "", fmt.Sprintf("sizes that get the real-time leader phase (server agents real, other members stand-ins), or none (default %s; quick %s; with -only-live every size of -sizes)", joinInts(full.LiveSizes), joinInts(q.LiveSizes)))
		liveSpares    = flag.Int("live-spares", full.LiveSpares, fmt.Sprintf("spares run as agents in the real-time leader phase (quick %d)", q.LiveSpares))
		onlyLive      = flag.Bool("only-live", false, "run only the real-time leader phase, e.g. to merge into a full run with -render")
		agentArgs     = flag.String("agent-args", "", "space-separated extra flags for every edgequorum agent, e.g. --memory-limit=48Mi (named in the report)")
		heapProfiles  = flag.Bool("heap-profiles", false, "sample allocations in every edgequorum agent and keep the leaders' heap profiles (a shipped agent samples none; the report says so)")
		noWebhook     = flag.Bool("no-webhook", false, "announce no webhook to the zones: leaders write the oldest formats and renew the zone Lease every 5 s even when quiet, as every run before 2026-12-02 did (named in the report)")
		onlyOurs      = flag.Bool("only-ours", false, "run edgequorum alone (no baseline, lossy-link or SuperEdge-defaults phase), e.g. to measure a change and merge it into a full run with -render, which keeps that run's baseline")
		detect        = flag.Bool("detect", false, fmt.Sprintf("detection run: at each size (default %s) only formation and the kill phase, both systems, -detect-kills reset and as many silent deaths each; writes detect.md and detect.json into -out", joinInts(det.Sizes)))
		detectKills   = flag.Int("detect-kills", det.DetectKills, "with -detect: deaths of each kind (reset, silent) per system and size")
		detectStalls  = flag.Int("detect-stalls", det.DetectStalls, "with -detect: edgequorum follower stalls per size (agent stopped 1-3 s; must not be judged dead)")
	)
	flag.Parse()

	var readmes []string
	if *readme != "" {
		readmes = strings.Split(*readme, ",")
		// Check the sections now, not after a two-hour run.
		for _, path := range readmes {
			if _, _, _, err := resultsSection(path); err != nil {
				return fmt.Errorf("-readme: %w", err)
			}
		}
	}
	// Flags left alone keep the chosen profile's value; Validate names a bad one.
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *render != "" {
		rep, err := merge(strings.Split(*render, ","))
		if err != nil {
			return err
		}
		if rep.Config.DetectOnly {
			if len(readmes) > 0 {
				return errors.New("-readme: a detection run has no summary for a README")
			}
			return writeDetectOutputs(rep, *out)
		}
		return writeOutputs(rep, *out, readmes)
	}

	cfg := suite.FullConfig()
	switch {
	case *detect:
		if err := detectFlags(set, *quick, readmes); err != nil {
			return err
		}
		cfg = suite.DetectConfig()
		cfg.DetectKills, cfg.DetectStalls = *detectKills, *detectStalls
	case set["detect-kills"], set["detect-stalls"]:
		return errors.New("-detect-kills and -detect-stalls apply only with -detect")
	case *quick:
		cfg = suite.QuickConfig()
	}
	if *sizes != "" {
		ns, err := parseSizes(*sizes)
		if err != nil {
			return fmt.Errorf("-sizes: %w", err)
		}
		cfg.Sizes = ns
	}
	if set["kills"] {
		cfg.Kills = *kills
	}
	if set["failovers"] {
		cfg.Failovers = *failovers
	}
	if set["defaults-kills"] {
		cfg.DefaultsKills = *defaultsKills
	}
	if *defaultsSizes != "" {
		ns, err := parseSizes(*defaultsSizes)
		if err != nil {
			return fmt.Errorf("-defaults-sizes: %w", err)
		}
		cfg.DefaultsSizes = ns
	}
	if *scale != "" {
		scales := map[int]suite.Scale{}
		for _, f := range strings.Split(*scale, ",") {
			n, ks, ok := strings.Cut(strings.TrimSpace(f), "=")
			ko, kb, ok2 := strings.Cut(ks, "/")
			size, err1 := strconv.Atoi(n)
			o, err2 := strconv.ParseFloat(ko, 64)
			b, err3 := strconv.ParseFloat(kb, 64)
			if !ok || !ok2 || errors.Join(err1, err2, err3) != nil || o < 1 || b < 1 {
				return fmt.Errorf("-scale %q: want N=ours/baseline with factors ≥ 1", f)
			}
			scales[size] = suite.Scale{Ours: o, Base: b}
		}
		cfg.Scale = func(n int) suite.Scale {
			if s, ok := scales[n]; ok {
				return s
			}
			return suite.DefaultScale(n)
		}
	}
	if set["steady"] {
		cfg.Steady = *steady
	}
	if set["cut"] {
		cfg.Cut = *cut
	}
	if err := lossFlags(&cfg, set, *loss, *lossSizes, *lossWindow, *lossKills, *onlyLossy); err != nil {
		return err
	}
	if err := liveFlags(&cfg, set, *liveSizes, *liveSpares, *onlyLive); err != nil {
		return err
	}
	cfg.Seed = *seed
	cfg.AgentArgs = strings.Fields(*agentArgs)
	cfg.HeapProfiles = *heapProfiles
	cfg.NoWebhook = *noWebhook
	cfg.OnlyDefaults = *onlyDefaults
	cfg.OnlyOurs = *onlyOurs
	if cfg.OnlyOurs {
		// Both pair edgequorum with the baseline; say so in the plan too.
		cfg.DefaultsKills, cfg.LossPercents = 0, nil
	}
	if err := flagErrors(cfg.ValidatePlan()); err != nil {
		return err
	}
	cfg.Progress = os.Stdout

	if *binDir == "" {
		dir, err := testcluster.FindBinDir()
		if err != nil {
			return fmt.Errorf("-bin: %w", err)
		}
		*binDir = dir
	}
	cfg.BinDir = *binDir
	if *work == "" {
		dir, err := os.MkdirTemp("", "edgequorum-bench-")
		if err != nil {
			return err
		}
		*work = dir
		if !*keep {
			defer os.RemoveAll(dir)
		}
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		return err
	}
	cfg.WorkDir = *work
	// client-go's complaints about an overloaded apiserver belong in a log
	// file, not between the progress lines.
	klogFile, err := os.Create(filepath.Join(*work, "client-go.log"))
	if err != nil {
		return err
	}
	defer klogFile.Close()
	if err := quietKlog(klogFile); err != nil {
		return err
	}
	if *data == "" {
		parent := ""
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		}
		dir, err := os.MkdirTemp(parent, "edgequorum-bench-data-")
		if err != nil {
			return err
		}
		*data = dir
		defer os.RemoveAll(dir)
	}
	cfg.DataDir = *data

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.DetectOnly {
		fmt.Printf("edgequorum detection benchmark: sizes %v, %d reset and %d silent deaths per system and size, alternating; logs in %s\n",
			cfg.Sizes, cfg.DetectKills, cfg.DetectKills, cfg.WorkDir)
	} else {
		fmt.Printf("edgequorum benchmark: sizes %v, %d kills (reset and silent alternating), %d failovers, steady %s, cut %s, SuperEdge-default kills %d, loss %v%% at %v (%s, %d kills), real-time leader at %v; logs in %s\n",
			cfg.Sizes, cfg.Kills, cfg.Failovers, cfg.Steady, cfg.Cut, cfg.DefaultsKills, cfg.LossPercents, cfg.LossSizes, cfg.LossWindow, cfg.LossKills, cfg.LiveSizes, cfg.WorkDir)
	}
	// The commit the binaries were built from: read before the run, which
	// takes an hour or more while the tree may move on.
	built := commit(filepath.Join(cfg.BinDir, "edgequorum-agent"))
	rep, err := suite.Run(ctx, cfg)
	if rep == nil {
		return err
	}
	rep.Commit = built
	write := func() error { return writeOutputs(rep, *out, readmes) }
	if cfg.DetectOnly {
		write = func() error { return writeDetectOutputs(rep, *out) }
	}
	if werr := write(); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Printf("done in %s; results in %s\n", rep.Took.Round(time.Second), *out)
	return err
}

// detectFlags refuses what does not go with -detect: another profile, a
// README (a detection run has no summary table for it), and -kills, which
// would do nothing there.
func detectFlags(set map[string]bool, quick bool, readmes []string) error {
	var errs []error
	if quick {
		errs = append(errs, errors.New("-detect and -quick are two profiles; pick one"))
	}
	if len(readmes) > 0 {
		errs = append(errs, errors.New("-readme: a detection run has no summary for a README"))
	}
	if set["kills"] {
		errs = append(errs, errors.New("-kills does not apply to -detect; -detect-kills sets its deaths of each kind"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("bad flags: %w", errors.Join(errs...))
	}
	return nil
}

// lossFlags applies the lossy-link flags that were set to cfg. -only-lossy
// without -loss-sizes runs the phase at every size of the run: the sizes
// were chosen for it.
func lossFlags(cfg *suite.Config, set map[string]bool, loss, sizes string, window time.Duration, kills int, only bool) error {
	switch loss {
	case "":
	case "none":
		cfg.LossPercents = nil
	default:
		ps, err := parseSizes(loss)
		if err != nil {
			return fmt.Errorf("-loss: %w", err)
		}
		cfg.LossPercents = ps
	}
	switch {
	case sizes != "":
		ns, err := parseSizes(sizes)
		if err != nil {
			return fmt.Errorf("-loss-sizes: %w", err)
		}
		cfg.LossSizes = ns
	case only:
		cfg.LossSizes = nil
	}
	if set["loss-window"] {
		cfg.LossWindow = window
	}
	if set["loss-kills"] {
		cfg.LossKills = kills
	}
	cfg.OnlyLossy = only
	return nil
}

// liveFlags applies the real-time leader phase's flags that were set to cfg,
// as lossFlags does for the lossy-link phase.
func liveFlags(cfg *suite.Config, set map[string]bool, sizes string, spares int, only bool) error {
	switch {
	case sizes == "none":
		cfg.LiveSizes = nil
	case sizes != "":
		ns, err := parseSizes(sizes)
		if err != nil {
			return fmt.Errorf("-live-sizes: %w", err)
		}
		cfg.LiveSizes = ns
	case only:
		cfg.LiveSizes = cfg.Sizes
	}
	if set["live-spares"] {
		cfg.LiveSpares = spares
	}
	cfg.OnlyLive = only
	return nil
}

// writeDetectOutputs writes a detection run's detect.md and detect.json.
func writeDetectOutputs(rep *suite.Report, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := suite.WriteDetectMarkdown(&md, rep); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode detect.json: %w", err)
	}
	for name, b := range map[string][]byte{"detect.md": md.Bytes(), "detect.json": raw} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeOutputs writes every result file and, when asked, the READMEs' sections.
func writeOutputs(rep *suite.Report, out string, readmes []string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var md, csv bytes.Buffer
	if err := suite.WriteMarkdown(&md, rep); err != nil {
		return err
	}
	if err := suite.WriteCSV(&csv, rep); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results.json: %w", err)
	}
	for name, b := range map[string][]byte{"results.md": md.Bytes(), "results.csv": csv.Bytes(), "results.json": raw} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := suite.WritePlots(out, rep); err != nil {
		return err
	}
	for _, path := range readmes {
		if err := updateReadme(path, out, rep); err != nil {
			return err
		}
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// merge reads results.json files and joins their sizes into one report (the
// first file's header, its date and duration too: each later run is named
// with its own date where its figures appear), so a long run can be done in
// parts.
func merge(paths []string) (*suite.Report, error) {
	var rep *suite.Report
	var first string // the first file's run, for a size whose baseline stays
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r suite.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("decode %s: %w", p, err)
		}
		if rep != nil && r.Config.DetectOnly != rep.Config.DetectOnly {
			return nil, fmt.Errorf("%s and %s: a detection run (-detect) merges only with detection runs", paths[0], p)
		}
		if rep == nil {
			rep = &r
			first = fmt.Sprintf("%s UTC, commit %s", r.Started.UTC().Format("2006-01-02 15:04"), r.Commit)
			continue
		}
		from := fmt.Sprintf("%s UTC, commit %s", r.Started.UTC().Format("2006-01-02 15:04"), r.Commit)
		// The binaries of the latest run that measured them.
		if len(r.Binaries) > 0 {
			rep.Binaries, rep.BinariesFrom = r.Binaries, cmp.Or(r.BinariesFrom, from)
		}
		for _, sr := range r.Sizes {
			i := slices.IndexFunc(rep.Sizes, func(x suite.SizeResult) bool { return x.N == sr.N })
			if i < 0 {
				if sr.From == "" && (sr.Ours.Ran || sr.Base.Ran) {
					sr.From = from
				}
				for j := range sr.Lossy {
					if sr.Lossy[j].From == "" {
						sr.Lossy[j].From = from
					}
				}
				if sr.Live != nil && sr.Live.From == "" {
					sr.Live.From = from
				}
				rep.Sizes = append(rep.Sizes, sr)
				rep.Config.Sizes = append(rep.Config.Sizes, sr.N)
				continue
			}
			// A later file's systems that ran replace the earlier ones, and
			// the size says which run they came from.
			if sr.Ours.Ran && !sr.Base.Ran && rep.Sizes[i].Base.Ran {
				// edgequorum alone (-only-ours): the baseline stays, and
				// says where it came from.
				rep.Sizes[i].BaseFrom = cmp.Or(rep.Sizes[i].BaseFrom, rep.Sizes[i].From, first)
			} else if sr.Base.Ran {
				rep.Sizes[i].BaseFrom = sr.BaseFrom
			}
			if sr.Ours.Ran || sr.Base.Ran {
				rep.Sizes[i].From = cmp.Or(sr.From, from)
			}
			if sr.Ours.Ran {
				rep.Sizes[i].Ours = sr.Ours
			}
			if sr.Base.Ran {
				rep.Sizes[i].Base = sr.Base
			}
			if sr.Defaults != nil && sr.Defaults.Ran {
				rep.Sizes[i].Defaults = sr.Defaults
			}
			// Loss levels are replaced one by one, so a run of one level
			// does not drop another's.
			for _, l := range sr.Lossy {
				l.From = cmp.Or(l.From, from)
				j := slices.IndexFunc(rep.Sizes[i].Lossy, func(x suite.LossLevel) bool { return x.Percent == l.Percent })
				if j < 0 {
					rep.Sizes[i].Lossy = append(rep.Sizes[i].Lossy, l)
					continue
				}
				rep.Sizes[i].Lossy[j] = l
			}
			slices.SortFunc(rep.Sizes[i].Lossy, func(a, b suite.LossLevel) int { return a.Percent - b.Percent })
			if sr.Live != nil && sr.Live.Ran {
				l := *sr.Live
				l.From = cmp.Or(l.From, from)
				rep.Sizes[i].Live = &l
			}
		}
		if rep.Signing == (suite.SigningCost{}) {
			rep.Signing = r.Signing
		}
		if r.Config.DefaultsKills > rep.Config.DefaultsKills {
			rep.Config.DefaultsKills = r.Config.DefaultsKills
		}
	}
	slices.SortFunc(rep.Sizes, func(a, b suite.SizeResult) int { return a.N - b.N })
	return rep, nil
}

const (
	readmeStart = "<!-- results:start -->"
	readmeEnd   = "<!-- results:end -->"
)

// updateReadme replaces the README's results section with the new summary
// table and the detection plot, linked relative to the README.
func updateReadme(path, out string, rep *suite.Report) error {
	s, i, j, err := resultsSection(path)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(path), out)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	var sec strings.Builder
	fmt.Fprintf(&sec, "%s\n\nMeasured %s on %s (%d cores), %s; full tables in [%s/results.md](%s/results.md), numbers in [%s/results.csv](%s/results.csv).\n\n",
		readmeStart, rep.Started.UTC().Format("2006-01-02"), rep.Machine.CPU, rep.Machine.Cores, rep.GoVersion, rel, rel, rel, rel)
	sec.WriteString(suite.SummaryTable(rep))
	fmt.Fprintf(&sec, "\n![detection time against zone size](%s/%s)\n\nAlso: [bytes/s](%s/%s), [apiserver writes/min](%s/%s).\n\n%s",
		rel, suite.PlotDetection, rel, suite.PlotBytes, rel, suite.PlotWrites, readmeEnd)
	s = s[:i] + sec.String() + s[j+len(readmeEnd):]
	return os.WriteFile(path, []byte(s), 0o644)
}

// quietKlog sends every client-go log line to w. Turning off logtostderr
// alone is not enough: klog still copies errors to stderr at its default
// stderrthreshold, which put "Unexpected error when reading response body"
// lines between the progress lines whenever a watch was cancelled.
func quietKlog(w io.Writer) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("klog -%s: %w", name, err)
		}
	}
	klog.SetOutput(w)
	return nil
}

// resultsSection reads a README and finds its results markers.
func resultsSection(path string) (text string, start, end int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, err
	}
	text = string(b)
	start, end = strings.Index(text, readmeStart), strings.Index(text, readmeEnd)
	if start < 0 || end < start {
		return "", 0, 0, fmt.Errorf("%s has no %s … %s section", path, readmeStart, readmeEnd)
	}
	return text, start, end, nil
}

// commit names the source revision, marked dirty when the tree has changes.
// commit names the commit agent (the binary the run measures) was built
// from, as its --version says: the tree's HEAD may have moved on since the
// build. Without a stamped revision it falls back to the tree's.
func commit(agent string) string {
	if out, err := exec.Command(agent, "--version").Output(); err == nil {
		if c, ok := stampedRevision(string(out)); ok {
			return c
		}
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (uncommitted changes)"
	}
	return c
}

// stampedRevision reads the revision from a --version line such as
// "edgequorum v0.4.0-dev (revision 0856accc6599-dirty, go1.26.8,
// linux/amd64)", as a short commit; false when the build was not stamped.
func stampedRevision(version string) (string, bool) {
	_, rest, ok := strings.Cut(version, "(revision ")
	if !ok {
		return "", false
	}
	rev, _, _ := strings.Cut(rest, ",")
	rev, dirty := strings.CutSuffix(strings.TrimSpace(rev), "-dirty")
	if rev == "" || rev == "unknown" {
		return "", false
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if dirty {
		rev += " (uncommitted changes)"
	}
	return rev, true
}

// flagNames maps the Config fields a flag sets to that flag.
var flagNames = map[string]string{"Sizes": "-sizes", "Kills": "-kills", "Failovers": "-failovers",
	"DefaultsKills": "-defaults-kills", "Steady": "-steady", "Cut": "-cut",
	"LossPercents": "-loss", "LossSizes": "-loss-sizes", "LossWindow": "-loss-window", "LossKills": "-loss-kills",
	"OnlyLossy": "-only-lossy", "LiveSizes": "-live-sizes", "LiveSpares": "-live-spares", "OnlyLive": "-only-live",
	"OnlyOurs": "-only-ours", "DetectOnly": "-detect", "DetectKills": "-detect-kills", "DetectStalls": "-detect-stalls"}

// flagErrors rewrites ValidatePlan's errors to name the flag an operator
// typed, e.g. "-kills is 0, must be at least 1".
func flagErrors(err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var fe *suite.FieldError
		if errors.As(e, &fe) && flagNames[fe.Field] != "" {
			e = fmt.Errorf("%s %s", flagNames[fe.Field], fe.Msg)
		}
		errs = append(errs, e)
	}
	return fmt.Errorf("bad flags: %w", errors.Join(errs...))
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// joinInts renders sizes the way -sizes takes them, so the help text shows
// the suite's real defaults instead of a copy that drifts.
func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
