package grader

import (
	"strings"
	"testing"

	"github.com/commlab/commlab/labs/record"
	"github.com/commlab/commlab/scenarios"
)

const scenarioYAML = `id: throttled
chapter: ch08
title: t
environment: {kind: gpu}
workload: {gpu: [nccl-test]}
params:
  node: {choose: [node2]}
  rate: {choose: ["80"]}
faults:
  - {kind: nic-rate, node: "${node}", params: {nic: rdma0, rate: "${rate}mbit"}}
task: t
diagnosis:
  class: nic-rate-limited
  location: {node: "${node}", nic: rdma0}
evidence:
  - {id: tbf, node: "${node}", command: '^tc\b.*\bqdisc\b', output: 'qdisc tbf \S+ root .*rate ${rate}Mbit'}
remediation: {measure: workload, min_ratio: 0.8}
hints:
  - {text: h, cost: 0.1}
debrief: d
`

func variant(t *testing.T) *scenarios.Variant {
	t.Helper()
	s, probs := scenarios.Parse("t.yaml", []byte(scenarioYAML), scenarios.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return s.Draw(1)
}

var tbfOut = "qdisc tbf 8001: root refcnt 2 rate 80Mbit burst 10Kb lat 50ms\n Sent 1000 bytes 10 pkt (dropped 0, overlimits 3 requeues 0)"

func transcripts() []Transcript {
	return []Transcript{
		{Terminal: "node1", Node: "node1", Commands: []record.Command{
			{Seq: 1, Line: "tc -s qdisc show dev rdma0", Output: "qdisc noqueue 0: root refcnt 2"},
		}},
		{Terminal: "node2", Node: "node2", Commands: []record.Command{
			{Seq: 1, Line: "ip -s link", Output: "2: rdma0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500"},
			{Seq: 2, Line: "tc -s qdisc show dev rdma0", Output: tbfOut},
			{Seq: 3, Line: "echo 'qdisc tbf 8001: root rate 80Mbit'", Output: "qdisc tbf 8001: root rate 80Mbit"},
			{Seq: 4, Line: "tc qdisc show | grep tbf", Output: "qdisc tbf 8001: root refcnt 2 rate 80Mbit burst 10Kb"},
			{Seq: 5, Line: "tc -s qdisc show dev rdma0", Output: tbfOut, Tampered: true},
			{Seq: 6, Line: "tc qdisc show | sed s/noqueue/tbf/", Output: "qdisc tbf 8001: root rate 80Mbit"},
		}},
	}
}

func TestGrade(t *testing.T) {
	right := map[string]string{"node": "node2", "nic": "rdma0"}
	fixed := &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.19}
	tests := []struct {
		name       string
		d          Diagnosis
		hints      []int
		fix        *Measurement
		wantPass   bool
		wantScore  float64
		wantDetail string
	}{
		{"right with real evidence and a fix", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 2}}, nil}, nil, fixed, true, 1, "shows the fault"},
		{"grep filter still counts", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 4}}, nil}, nil, fixed, true, 1, "shows the fault"},
		{"evidence printed by echo", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 3}}, nil}, nil, fixed, true, 0.8, "does not show"},
		{"evidence rewritten by sed", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 6}}, nil}, nil, fixed, true, 0.8, "does not show"},
		{"forged markers", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 5}}, nil}, nil, fixed, true, 0.8, "forged"},
		{"evidence never run", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 99}}, nil}, nil, fixed, true, 0.8, "was not run"},
		{"evidence from the healthy node", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node1", 1}}, nil}, nil, fixed, true, 0.8, "does not show"},
		{"wrong location", Diagnosis{"nic-rate-limited", map[string]string{"node": "node1", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}, nil, fixed, false, 0.85, "wrong node"},
		{"wrong node and nic", Diagnosis{"nic-rate-limited", map[string]string{"node": "node1", "nic": "eth0"}, []EvidenceRef{{"node2", 2}}, nil}, nil, fixed, false, 0.7 - 0.0, "wrong location"},
		{"fix that does not fix", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 2}}, nil}, nil, &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.09}, true, 0.9, "only 45%"},
		{"no re-measure", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 2}}, nil}, nil, nil, true, 0.9, "no re-measurement"},
		{"hint cost", Diagnosis{"nic-rate-limited", right, []EvidenceRef{{"node2", 2}}, nil}, []int{0}, fixed, true, 0.9, "1 hint"},
		{"same category, wrong class", Diagnosis{"mtu-mismatch", right, []EvidenceRef{{"node2", 2}}, nil}, nil, fixed, false, 0.7, "right category"},
		{"other category", Diagnosis{"cpu-starvation", right, nil, nil}, nil, nil, false, 0.3, "wrong fault class"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Grade(Input{Variant: variant(t), Diagnosis: tt.d, Transcripts: transcripts(), HintsUsed: tt.hints, Remediation: tt.fix})
			if err != nil {
				t.Fatal(err)
			}
			details := ""
			for _, c := range res.Criteria {
				details += c.Name + ": " + c.Detail + "\n"
			}
			if res.Passed != tt.wantPass || abs(res.Score-tt.wantScore) > 1e-9 || !strings.Contains(details, tt.wantDetail) {
				t.Errorf("score %.3f passed %v, want %.3f %v with %q\n%s", res.Score, res.Passed, tt.wantScore, tt.wantPass, tt.wantDetail, details)
			}
		})
	}
}

// A tuning lab's bar is relative to its starting (untuned) figure, not the baseline.
func TestGradeBeat(t *testing.T) {
	right := Diagnosis{"nic-rate-limited", map[string]string{"node": "node2", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}
	for _, tt := range []struct {
		name       string
		fix        Measurement
		wantFrac   bool
		wantDetail string
	}{
		{"4x the start", Measurement{Baseline: 0.2, Faulted: 0.05, After: 0.2}, true, "0.200 GB/s against the starting 0.050 GB/s: 4.00× (target 1.30×)"},
		{"under the target though above the baseline ratio", Measurement{Baseline: 0.2, Faulted: 0.15, After: 0.18}, false, "only 1.20×, target 1.30×"},
		{"no start", Measurement{Baseline: 0.2, Faulted: 0, After: 0.2}, false, "no starting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := variant(t)
			v.Scenario.Remediation.MinRatio, v.Scenario.Remediation.Beat = 0, 1.3
			res, err := Grade(Input{Variant: v, Diagnosis: right, Transcripts: transcripts(), Remediation: &tt.fix})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Criteria {
				if c.Name == "remediation" {
					if (c.Earned > 0) != tt.wantFrac || !strings.Contains(c.Detail, tt.wantDetail) {
						t.Errorf("remediation %+v, want scored %v with %q", c, tt.wantFrac, tt.wantDetail)
					}
					return
				}
			}
			t.Fatal("no remediation criterion")
		})
	}
}

// A lab that isolates a noisy neighbour (KeepMbit) credits the fix only when the
// workload is back and every flow of the neighbour still gets through: blocking it
// brings the workload back too.
func TestGradeKeepNeighbour(t *testing.T) {
	right := Diagnosis{"nic-rate-limited", map[string]string{"node": "node2", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}
	for _, tt := range []struct {
		name       string
		fix        Measurement
		wantFrac   bool
		wantDetail string
	}{
		{"rate-limited", Measurement{Baseline: 0.2, Faulted: 0.01, After: 0.19, Kept: []float64{9.6, 9.8}}, true, "still delivers 9.6 Mbit/s or more"},
		{"blocked", Measurement{Baseline: 0.2, Faulted: 0.01, After: 0.19, Kept: []float64{0, 0}}, false, "delivers only 0.0 Mbit/s"},
		{"one of two blocked", Measurement{Baseline: 0.2, Faulted: 0.01, After: 0.19, Kept: []float64{0.1, 9.8}}, false, "delivers only 0.1 Mbit/s"},
		{"not counted", Measurement{Baseline: 0.2, Faulted: 0.01, After: 0.19}, false, "delivers only 0.0 Mbit/s"},
		{"kept but not back", Measurement{Baseline: 0.2, Faulted: 0.01, After: 0.02, Kept: []float64{9.6, 9.8}}, false, "busbw only 10%"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := variant(t)
			v.Scenario.Remediation.KeepMbit = 2
			res, err := Grade(Input{Variant: v, Diagnosis: right, Transcripts: transcripts(), Remediation: &tt.fix})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Criteria {
				if c.Name == "remediation" {
					if (c.Earned > 0) != tt.wantFrac || !strings.Contains(c.Detail, tt.wantDetail) {
						t.Errorf("remediation %+v, want scored %v with %q", c, tt.wantFrac, tt.wantDetail)
					}
					return
				}
			}
			t.Fatal("no remediation criterion")
		})
	}
}

// A required fix is a condition of passing: the right answer without it fails, however
// high its score.
func TestGradeRequiredFix(t *testing.T) {
	right := Diagnosis{"nic-rate-limited", map[string]string{"node": "node2", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}
	for _, tt := range []struct {
		name      string
		required  bool
		fix       *Measurement
		wantPass  bool
		wantScore float64
	}{
		{"required and fixed", true, &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.19}, true, 1},
		{"required, fix short", true, &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.09}, false, 0.9},
		{"required, no re-measure", true, nil, false, 0.9},
		{"not required, fix short", false, &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.09}, true, 0.9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := variant(t)
			v.Scenario.Remediation.Required = tt.required
			res, err := Grade(Input{Variant: v, Diagnosis: right, Transcripts: transcripts(), Remediation: tt.fix})
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed != tt.wantPass || abs(res.Score-tt.wantScore) > 1e-9 {
				t.Errorf("score %.3f passed %v, want %.3f %v", res.Score, res.Passed, tt.wantScore, tt.wantPass)
			}
		})
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestParseDiagnosis(t *testing.T) {
	d, err := ParseDiagnosis("class=nic-rate-limited node=node2 nic=rdma0 evidence=node2#3,node1#1 estimate.alpha=2350.5")
	if err != nil {
		t.Fatal(err)
	}
	if d.Class != "nic-rate-limited" || d.Location["node"] != "node2" || d.Location["nic"] != "rdma0" || len(d.Evidence) != 2 || d.Evidence[1] != (EvidenceRef{"node1", 1}) || d.Estimates["alpha"] != 2350.5 {
		t.Errorf("parsed %+v", d)
	}
	for _, tt := range []struct{ in, want string }{
		{"", "empty diagnosis"},
		{"node=node1", "no class="},
		{"class=slow", "unknown fault class"},
		{"class=nic-down node", "want key=value"},
		{"class=nic-down colour=red", `unknown key "colour"`},
		{"class=nic-down node=a node=b", "node given twice"},
		{"class=nic-down evidence=node1", "want TERMINAL#N"},
		{"class=nic-down evidence=node1#0", "want TERMINAL#N"},
		{"class=nic-down estimate.alpha=2ms", "want a number"},
	} {
		if _, err := ParseDiagnosis(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDiagnosis(%q) = %v, want error with %q", tt.in, err, tt.want)
		}
	}
}

func FuzzParseDiagnosis(f *testing.F) {
	f.Add("class=nic-rate-limited node=node2 nic=rdma0 evidence=node2#3,node1#1")
	f.Add("class= evidence=#")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDiagnosis(s)
		if err != nil {
			return
		}
		if _, ok := scenarios.ClassByID(d.Class); !ok {
			t.Fatalf("accepted unknown class %q", d.Class)
		}
		for _, e := range d.Evidence {
			if e.Seq < 1 || e.Terminal == "" {
				t.Fatalf("accepted bad evidence %+v", e)
			}
		}
	})
}

func TestSimpleCommand(t *testing.T) {
	for _, tt := range []struct {
		line string
		want bool
	}{
		{"tc -s qdisc show dev rdma0", true},
		{"tc qdisc show | grep tbf", true},
		{"grep -E 'NET/IB|NET/Socket' train.log", true},
		{`grep "error 12" train.log | tail -n 3`, true},
		{"ip -s link show dev rdma0 | head -20", true},
		{"echo 'qdisc tbf c2: root rate 80Mbit'", true}, // a single command: the patterns reject echo
		{"tc qdisc show | sed s/noqueue/tbf/", false},
		{"tc qdisc show; echo fake", false},
		{"tc qdisc show && echo fake", false},
		{"tc qdisc show || true", false},
		{"cat <(echo fake)", false},
		{"tc qdisc show > /tmp/x", false},
		{`grep "$(printf fake)" train.log`, false},
		{"grep `printf fake` train.log", false},
		{"grep 'unterminated train.log", false},
		{"tc qdisc show |", false},
		{"tc qdisc show | awk '{print}'", false},
	} {
		if got := simpleCommand(tt.line); got != tt.want {
			t.Errorf("simpleCommand(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

// Each answer checked before the final one costs CheckCost, and says so.
func TestCheckCost(t *testing.T) {
	d := Diagnosis{"nic-rate-limited", map[string]string{"node": "node2", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}
	fixed := &Measurement{Baseline: 0.2, Faulted: 0.08, After: 0.19}
	for _, checks := range []int{0, 1, 3} {
		res, err := Grade(Input{Variant: variant(t), Diagnosis: d, Transcripts: transcripts(), Remediation: fixed, Checks: checks})
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 - CheckCost*float64(checks); abs(res.Score-want) > 1e-9 {
			t.Errorf("%d checks: score %.3f, want %.3f", checks, res.Score, want)
		}
		last := res.Criteria[len(res.Criteria)-1]
		if (checks > 0) != (last.Name == "checks") {
			t.Errorf("%d checks: last criterion %q", checks, last.Name)
		}
	}
}

// TestGradeAlertRules: a lab that measures alerting rules weighs them at 30 % and passes
// only when every recorded case passes.
func TestGradeAlertRules(t *testing.T) {
	src := strings.Replace(scenarioYAML, "remediation: {measure: workload, min_ratio: 0.8}", "remediation: {measure: alert-rules, tests: ch26-comm-alerts}", 1)
	src = strings.Replace(src, "workload: {gpu: [nccl-test]}\n", "", 1)
	s, probs := scenarios.Parse("t.yaml", []byte(src), scenarios.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	v := s.Draw(1)
	right := Diagnosis{"nic-rate-limited", map[string]string{"node": "node2", "nic": "rdma0"}, []EvidenceRef{{"node2", 2}}, nil}
	cases := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		name       string
		rules      *RulesRun
		wantPass   bool
		wantScore  float64
		wantDetail string
	}{
		{"all cases pass", &RulesRun{Cases: cases}, true, 1, "pass all 4"},
		{"one case fails", &RulesRun{Cases: cases, Failed: []string{"c"}}, false, 0.7, "fail 1 of 4 recorded cases: c"},
		{"rules promtool rejects", &RulesRun{Cases: cases, Problem: "~/alerts.yml: bad"}, false, 0.7, "could not be tested: ~/alerts.yml: bad"},
		{"not tested", nil, false, 0.7, "no alerting rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Grade(Input{Variant: v, Diagnosis: right, Transcripts: transcripts(), Rules: tc.rules})
			if err != nil {
				t.Fatal(err)
			}
			var detail string
			for _, c := range r.Criteria {
				if c.Name == "remediation" {
					detail = c.Detail
				}
			}
			if r.Passed != tc.wantPass || r.Score != tc.wantScore || !strings.Contains(detail, tc.wantDetail) {
				t.Errorf("passed %v score %v detail %q, want %v %v %q", r.Passed, r.Score, detail, tc.wantPass, tc.wantScore, tc.wantDetail)
			}
		})
	}
}

// A check-writing lab's evidence: the check that catches the fault must also be cited
// passing on enough other nodes; otherwise it earns half the evidence credit.
func TestGradeHealthy(t *testing.T) {
	src := strings.NewReplacer(
		"rate: {choose: [\"80\"]}", "mtu: {choose: [\"1280\"]}",
		"params: {nic: rdma0, rate: \"${rate}mbit\"}", "params: {nic: rdma0, mtu: \"${mtu}\"}",
		"nic-rate-limited", "mtu-mismatch",
		"- {id: tbf, node: \"${node}\", command: '^tc\\b.*\\bqdisc\\b', output: 'qdisc tbf \\S+ root .*rate ${rate}Mbit'}",
		"- {id: sysfs, node: \"${node}\", command: '^cat /sys/class/net/rdma0/mtu$', output: '^${mtu}$', healthy: {nodes: 2, output: '^1500$'}}\n"+
			"  - {id: plain, node: \"${node}\", command: '^ip link', output: 'mtu ${mtu} '}",
	).Replace(scenarioYAML)
	s, probs := scenarios.Parse("h.yaml", []byte(src), scenarios.Options{})
	if len(probs) > 0 || len(s.Evidence) != 2 {
		t.Fatalf("%v\n%s", probs, src)
	}
	s.Remediation = nil
	cat := "cat /sys/class/net/rdma0/mtu"
	node := func(n string, cmds ...record.Command) Transcript {
		for i := range cmds {
			cmds[i].Seq = i + 1
		}
		return Transcript{Terminal: n, Node: n, Commands: cmds}
	}
	ts := []Transcript{
		node("node2", record.Command{Line: cat, Output: "1280"}, record.Command{Line: cat, Output: "1280"},
			record.Command{Line: "ip link show dev rdma0", Output: "rdma0: <UP> mtu 1280 qdisc"}),
		node("node1", record.Command{Line: cat, Output: "1500"}, record.Command{Line: "cat /sys/class/net/eth0/mtu", Output: "1500"},
			record.Command{Line: "echo 1500 | cat", Output: "1500"}),
		node("node3", record.Command{Line: cat, Output: "1500"}, record.Command{Line: cat, Output: "1500", Tampered: true}),
		node("node4", record.Command{Line: cat, Output: "1500"}),
	}
	for _, tt := range []struct {
		name   string
		cite   []EvidenceRef
		earned float64 // share of the evidence weight
		detail string
	}{
		{"the bad node only", []EvidenceRef{{"node2", 1}}, 0.5, "passing on 0 other nodes, not the 2"},
		{"the bad node and one healthy node", []EvidenceRef{{"node2", 1}, {"node1", 1}}, 0.5, "passing on 1 other nodes, not the 2"},
		{"the bad node and two healthy nodes", []EvidenceRef{{"node1", 1}, {"node2", 1}, {"node3", 1}}, 1, "the same check passes on 2 other nodes"},
		{"the bad node and three healthy nodes", []EvidenceRef{{"node2", 1}, {"node1", 1}, {"node3", 1}, {"node4", 1}}, 1, "passes on 3 other nodes"},
		{"the bad node twice is one node", []EvidenceRef{{"node2", 1}, {"node2", 2}, {"node1", 1}}, 0.5, "passing on 1 other nodes"},
		{"one healthy node twice is one node", []EvidenceRef{{"node2", 1}, {"node1", 1}, {"node1", 1}}, 0.5, "passing on 1 other nodes"},
		{"another check on the healthy node", []EvidenceRef{{"node2", 1}, {"node1", 2}, {"node4", 1}}, 0.5, "passing on 1 other nodes"},
		{"echoed or forged healthy output", []EvidenceRef{{"node2", 1}, {"node1", 3}, {"node3", 2}}, 0.5, "passing on 0 other nodes"},
		{"healthy nodes without the catch", []EvidenceRef{{"node1", 1}, {"node3", 1}, {"node4", 1}}, 0, "does not show"},
		{"an item without a healthy half", []EvidenceRef{{"node2", 3}}, 1, "shows the fault"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Grade(Input{Variant: s.Draw(1), Diagnosis: Diagnosis{"mtu-mismatch", map[string]string{"node": "node2", "nic": "rdma0"}, tt.cite, nil}, Transcripts: ts})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Criteria {
				if c.Name == "evidence" {
					if abs(c.Earned-tt.earned*c.Weight) > 1e-9 || !strings.Contains(c.Detail, tt.detail) {
						t.Errorf("evidence %+v, want %.1f of the weight with %q", c, tt.earned, tt.detail)
					}
					return
				}
			}
			t.Fatal("no evidence criterion")
		})
	}
}
