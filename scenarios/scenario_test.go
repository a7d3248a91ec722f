package scenarios

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/commlab/commlab/internal/yamldecode"
)

var testOpts = Options{
	Topology: func(name string) ([]string, []string, bool) {
		switch name {
		case "2x1":
			return []string{"node1", "node2"}, []string{"eth0", "rdma0"}, true
		case GPUTopology:
			return []string{"node1"}, []string{"eth0"}, true
		}
		return nil, nil, false
	},
	CheckFault: func(kind string, params map[string]string) error {
		if kind != "nic-rate" {
			return fmt.Errorf("unknown fault kind %q", kind)
		}
		if params["rate"] == "0mbit" {
			return errors.New("rate must be > 0")
		}
		return nil
	},
	ChapterExists: func(id string) bool { return id == "ch08" },
}

func good(t *testing.T) string { return fixture(t, "good.yaml") }

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseGood(t *testing.T) {
	s, probs := Parse("good.yaml", []byte(good(t)), testOpts)
	if len(probs) > 0 {
		t.Fatalf("problems:\n%v", probs)
	}
	if s.ID != "rail-throttled" || s.Environment.Kind != "netns" || len(s.Faults) != 1 {
		t.Errorf("parsed %+v", s)
	}
}

// noFaults is good.yaml's faults block.
const noFaults = "faults:\n  - kind: nic-rate\n    node: ${node}\n    params:\n      nic: rdma0\n      rate: ${rate}mbit\n"

// TestTuningLabWithoutFaults: a tuning lab (remediation.beat) may inject nothing, its
// poor setting being the job's own environment.
func TestTuningLabWithoutFaults(t *testing.T) {
	src := good(t)
	for old, new := range map[string]string{noFaults: "faults: []\n", "min_ratio: 0.8": "beat: 1.5"} {
		if !strings.Contains(src, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		src = strings.Replace(src, old, new, 1)
	}
	s, probs := Parse("tune.yaml", []byte(src), testOpts)
	if len(probs) > 0 {
		t.Fatalf("problems:\n%v", probs)
	}
	if len(s.Faults) != 0 || s.Remediation.Beat != 1.5 {
		t.Errorf("parsed %+v", s)
	}
}

// healthyOld is good.yaml's evidence output line, which healthyYAML extends.
const healthyOld = "output: 'qdisc tbf \\S+ root .*rate ${rate}Mbit'\n"

// healthyYAML is that line followed by a healthy block.
func healthyYAML(nodes, output string) string {
	return healthyOld + "    healthy:\n      nodes: " + nodes + "\n      output: " + output + "\n"
}

// TestHealthyEvidence: an evidence item's healthy half compiles with the variant's values
// quoted, like the item's own patterns.
func TestHealthyEvidence(t *testing.T) {
	src := strings.Replace(good(t), healthyOld, healthyYAML("1", "'^rate ${rate}$'"), 1)
	s, probs := Parse("h.yaml", []byte(src), testOpts)
	if len(probs) > 0 {
		t.Fatalf("problems:\n%v", probs)
	}
	v := &Variant{Scenario: s, Values: map[string]string{"node": "node2", "rate": "4.5"}}
	ps, err := v.Evidence()
	if err != nil {
		t.Fatal(err)
	}
	if s.Evidence[0].Healthy.Nodes != 1 || ps[0].Healthy == nil {
		t.Fatalf("healthy not parsed: %+v %+v", s.Evidence[0], ps[0])
	}
	for text, want := range map[string]bool{"rate 4.5": true, "rate 4x5": false, "x\nrate 4.5\ny": true} {
		if got := ps[0].Healthy.MatchString(text); got != want {
			t.Errorf("healthy pattern on %q: %v, want %v", text, got, want)
		}
	}
}

// TestProblems checks that each semantic error is reported at its file:line:column.
func TestProblems(t *testing.T) {
	tests := []struct {
		fixture, name, old, new string
		want                    string // "line:col: substring"
	}{
		{"good.yaml", "unknown field", "title: 一条", "titel: 一条", "3:1: unknown field"},
		{"good.yaml", "bad id", "id: rail-throttled", "id: Rail Throttled", "1:5: id"},
		{"good.yaml", "unknown chapter", "chapter: ch08", "chapter: ch99", "2:10: unknown chapter"},
		{"good.yaml", "unknown topology", "topology: 2x1", "topology: 9x9", "6:13: unknown topology"},
		{"good.yaml", "unknown kind", "kind: nic-rate", "kind: nic-speed", "17:9: fault nic-speed"},
		{"good.yaml", "node outside topology", "choose: [node1, node2]", "choose: [node1, node7]", "18:11: fault node \"node7\""},
		{"good.yaml", "nic outside topology", "nic: rdma0\n      rate", "nic: rdma9\n      rate", "20:12: NIC \"rdma9\""},
		{"good.yaml", "rate zero in some variant", "min: 40", "min: 0", "17:9: rate must be > 0"},
		{"good.yaml", "range without step", "step: 10", "step: 0", "13:8: param rate"},
		{"good.yaml", "unknown class", "class: nic-rate-limited", "class: slow-network", "25:10: unknown fault class"},
		{"good.yaml", "location missing nic", "    nic: rdma0\nevidence", "evidence", "27:9: add location.nic"},
		{"good.yaml", "undefined param", "root .*rate ${rate}Mbit", "root .*rate ${speed}Mbit", "30:7: ${speed} names no parameter"},
		{"good.yaml", "bad regexp", `'^tc\b.*\bqdisc\b'`, `'^tc(('`, "33:14: bad command pattern"},
		{"good.yaml", "healthy on no nodes", healthyOld, healthyYAML("0", "'qdisc noqueue'"), "36:14: healthy.nodes is how many other nodes"},
		{"good.yaml", "healthy on more nodes than there are", healthyOld, healthyYAML("2", "'qdisc noqueue'"), "36:14: healthy.nodes 2, but topology 2x1 has only 1 other nodes"},
		{"good.yaml", "healthy without output", healthyOld, healthyYAML("1", "''"), "36:12: healthy needs an output pattern"},
		{"good.yaml", "healthy bad regexp", healthyOld, healthyYAML("1", "'qdisc(('"), "37:15: bad healthy output pattern"},
		{"good.yaml", "healthy undefined param", healthyOld, healthyYAML("1", "'rate ${speed}Mbit'"), "37:15: ${speed} names no parameter"},
		{"good.yaml", "ratio out of range", "min_ratio: 0.8", "min_ratio: 80", "37:14: min_ratio"},
		{"good.yaml", "beat with min_ratio", "min_ratio: 0.8", "min_ratio: 0.8\n  beat: 1.3", "38:9: set min_ratio (a fault lab) or beat (a tuning lab), not both"},
		{"good.yaml", "beat not above 1", "min_ratio: 0.8", "beat: 0.9", "37:9: beat is a factor over the starting figure"},
		{"good.yaml", "unknown alert test set", "measure: workload\n  min_ratio: 0.8", "measure: alert-rules\n  tests: ch99", `37:10: alert test set "ch99": no such set (shipped: [ch26-comm-alerts])`},
		{"good.yaml", "alert rules with a ratio", "measure: workload", "measure: alert-rules\n  tests: ch26-comm-alerts", "36:10: an alert-rules check takes tests, not min_ratio or beat"},
		{"good.yaml", "tests without alert rules", "min_ratio: 0.8", "min_ratio: 0.8\n  tests: ch26-comm-alerts", "38:10: tests belong to measure: alert-rules"},
		{"good.yaml", "a neighbour's rate without a neighbour", "min_ratio: 0.8", "min_ratio: 0.8\n  keep_mbit: 2", "38:14: keep_mbit is the rate (Mbit/s, above 0) a congestion fault's flows must keep: it needs a congestion fault, got 2"},
		{"good.yaml", "fault lab without faults", noFaults, "faults: []\n", "16:9: a lab injects at least one fault"},
		{"good.yaml", "hint too costly", "cost: 0.1", "cost: 0.9", "39:9: a hint needs text"},
		{"good.yaml", "type error", "min_ratio: 0.8", "min_ratio: high", "37:14: "},
		{"good.yaml", "gpu workload in a netns lab", "workload:\n", "workload:\n  gpu: [pcie]\n", "8:8: workload.gpu runs on a GPU node"},
		{"gpu.yaml", "bench in a gpu lab", "workload:\n", "workload:\n  bench: [all_reduce]\n", "7:10: use workload.gpu"},
		{"gpu.yaml", "pcie without a metric", "  metric: pageable-h2d\n", "", "7:6: a pcie workload needs metric"},
		{"gpu.yaml", "unknown metric", "metric: pageable-h2d", "metric: fast", "8:11: a pcie workload needs metric"},
		{"gpu.yaml", "nccl-test reports busbw", "gpu: [pcie, --sizes, 256M]", "gpu: [nccl-test]", "8:11: nccl-test reports busbw"},
		{"gpu.yaml", "unknown gpu command", "gpu: [pcie, --sizes, 256M]", "gpu: [burn]", "7:8: must start with pcie or nccl-test"},
		{"gpu.yaml", "a topology of its own", "kind: gpu\n", "kind: gpu\n  topology: 2x1\n", "6:13: topology must be gpu-node"},
		{"gpu.yaml", "node outside the gpu node", "node: node1\n    params", "node: node2\n    params", "11:11: fault node \"node2\""},
		{"gpu.yaml", "solution step on no terminal", "  - node: node1\n    run: cat", "  - node: node3\n    run: cat", "26:11: node \"node3\" has no terminal"},
		{"gpu.yaml", "solution step without a command", "run: cat /sys/fs/cgroup/cpu.stat", "run: ' '", "26:9: a solution step runs one command line"},
		{"gpu.yaml", "solution step for an unknown host", "    cite: true\n", "    cite: true\n    when: cgroup3\n", "29:11: when \"cgroup3\": want cgroup1 or cgroup2"},
		{"gpu.yaml", "solution citing nothing", "cite: true", "cite: false", "26:3: a solution cites at least one command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fixture(t, tt.fixture)
			if !strings.Contains(src, tt.old) {
				t.Fatalf("fixture lacks %q", tt.old)
			}
			src = strings.Replace(src, tt.old, tt.new, 1)
			_, probs := Parse("s.yaml", []byte(src), testOpts)
			for _, p := range probs {
				var ye *yamldecode.Error
				if !errors.As(p, &ye) {
					t.Errorf("problem without position: %v", p)
					continue
				}
				if strings.HasPrefix(p.Error(), "s.yaml:"+tt.want[:strings.Index(tt.want, ": ")]) && strings.Contains(p.Error(), tt.want[strings.Index(tt.want, ": ")+2:]) {
					return
				}
			}
			t.Errorf("want s.yaml:%s, got:\n%v", tt.want, probs)
		})
	}
}

func TestParseGPU(t *testing.T) {
	s, probs := Parse("gpu.yaml", []byte(fixture(t, "gpu.yaml")), testOpts)
	if len(probs) > 0 {
		t.Fatalf("problems:\n%v", probs)
	}
	if e := s.Environment; e.Kind != "gpu" || e.Topology != GPUTopology || e.GPUs != 1 {
		t.Errorf("environment %+v, want kind gpu, topology %s, 1 GPU", e, GPUTopology)
	}
}

func TestDrawIsSeeded(t *testing.T) {
	s, probs := Parse("good.yaml", []byte(good(t)), testOpts)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	a, b := s.Draw(42), s.Draw(42)
	if fmt.Sprint(a.Values) != fmt.Sprint(b.Values) {
		t.Errorf("same seed, different variants: %v vs %v", a.Values, b.Values)
	}
	key := []byte("installation one")
	distinct := map[string]bool{}
	for learner := int64(1); learner <= 20; learner++ {
		distinct[fmt.Sprint(s.Draw(SeedFor(key, learner, s.ID, 1)).Values)] = true
	}
	if len(distinct) < 5 {
		t.Errorf("20 learners drew only %d distinct variants", len(distinct))
	}
	if SeedFor(key, 1, s.ID, 1) == SeedFor(key, 1, s.ID, 2) || SeedFor(key, 1, s.ID, 1) == SeedFor(key, 2, s.ID, 1) {
		t.Error("seeds must differ by learner and by attempt")
	}
	// Without the installation's key nobody can compute a seed: the old keyless
	// derivation, and another installation's key, give other seeds.
	keyless := sha256.Sum256([]byte(fmt.Sprintf("commlab-variant\x00%d\x00%s\x00%d", 1, s.ID, 1)))
	if SeedFor(key, 1, s.ID, 1) == binary.LittleEndian.Uint64(keyless[:8]) || SeedFor(key, 1, s.ID, 1) == SeedFor([]byte("installation two"), 1, s.ID, 1) {
		t.Error("the seed does not depend on the installation's secret")
	}
	v := s.Draw(7)
	faults, err := v.Faults()
	if err != nil {
		t.Fatal(err)
	}
	if faults[0].Node != v.Values["node"] || faults[0].Params["rate"] != v.Values["rate"]+"mbit" {
		t.Errorf("faults not expanded: %+v with %v", faults, v.Values)
	}
	ev, err := v.Evidence()
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("qdisc tbf 8001: root refcnt 2 rate %sMbit burst 10Kb lat 50ms", v.Values["rate"])
	if !ev[0].Output.MatchString("Sent 0 bytes\n" + line + "\n") {
		t.Errorf("evidence %v does not match %q", ev[0].Output, line)
	}
	if ev[0].Output.MatchString(strings.Replace(line, v.Values["rate"]+"Mbit", "999Mbit", 1)) {
		t.Error("evidence matched another rate")
	}
	if loc := v.Location(); loc["node"] != v.Values["node"] || loc["nic"] != "rdma0" {
		t.Errorf("location %v", loc)
	}
}

func TestLoadCatalog(t *testing.T) {
	src := good(t)
	fsys := fstest.MapFS{
		"defs/a.yaml": {Data: []byte(src)},
		"defs/b.yaml": {Data: []byte(src)}, // same id
		"defs/c.yaml": {Data: []byte("id: [")},
	}
	cat, probs := Load(fsys, "defs", testOpts)
	if len(cat.All()) != 1 {
		t.Errorf("catalog has %d scenarios, want 1", len(cat.All()))
	}
	joined := probs.Error()
	for _, want := range []string{`defs/b.yaml:1: scenario id "rail-throttled" is also used by defs/a.yaml`, "defs/c.yaml:1:"} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
}

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("id: x\nparams: {a: {min: 0, max: 1e9, step: 1e-9}}\n"))
	f.Add([]byte("faults: [{kind: nic-rate, node: '${a}'}]\nparams: {a: {choose: []}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, probs := Parse("f.yaml", data, testOpts)
		for _, p := range probs {
			if !strings.HasPrefix(p.Error(), "f.yaml") {
				t.Fatalf("problem does not name the file: %v", p)
			}
		}
		if s != nil && len(probs) == 0 {
			v := s.Draw(1)
			if _, err := v.Faults(); err != nil {
				t.Fatalf("valid scenario, invalid faults: %v", err)
			}
			if _, err := v.Evidence(); err != nil {
				t.Fatalf("valid scenario, invalid evidence: %v", err)
			}
		}
	})
}
