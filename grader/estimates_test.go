package grader

import (
	"strings"
	"testing"

	"github.com/commlab/commlab/scenarios"
)

const estimatesYAML = `id: fit
chapter: ch13
title: t
environment: {kind: gpu}
workload: {gpu: [nccl-test]}
params:
  node: {choose: [node2]}
  rate: {choose: ["80"]}
  delay: {choose: ["4"]}
faults:
  - {kind: nic-rate, node: "${node}", params: {nic: rdma0, rate: "${rate}mbit"}}
task: t
diagnosis:
  class: nic-rate-limited
  location: {node: "${node}", nic: rdma0}
evidence:
  - {id: tbf, node: "${node}", command: '^tc\b.*\bqdisc\b', output: 'qdisc tbf \S+ root .*rate ${rate}Mbit'}
estimates:
  - {id: alpha, describe: a, unit: µs, truth: delay * 1000, under: 0.1, over: 0.5}
  - {id: rate, describe: r, unit: Mbit/s, truth: rate, under: 0.3, over: 0.1}
debrief: d
`

// TestGradeEstimates: each reported figure within its tolerance earns an equal share
// of the estimates' 35 %; the detail names a wrong figure by what was reported, never
// by the truth; passing needs every figure right.
func TestGradeEstimates(t *testing.T) {
	s, probs := scenarios.Parse("fit.yaml", []byte(estimatesYAML), scenarios.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	right := map[string]string{"node": "node2", "nic": "rdma0"}
	ev := []EvidenceRef{{"node2", 2}}
	for _, tt := range []struct {
		name       string
		est        map[string]float64
		wantPass   bool
		wantScore  float64
		wantDetail string
	}{
		{"both right", map[string]float64{"alpha": 4400, "rate": 76}, true, 1, "all 2 figures within"},
		{"at the edges", map[string]float64{"alpha": 3600, "rate": 88}, true, 1, "all 2 figures within"},
		{"alpha too small", map[string]float64{"alpha": 3500, "rate": 76}, false, 0.825, "outside it: alpha = 3500 µs"},
		{"rate too high", map[string]float64{"alpha": 4400, "rate": 89}, false, 0.825, "outside it: rate = 89 Mbit/s"},
		{"both wrong", map[string]float64{"alpha": 400, "rate": 200}, false, 0.65, "0 of 2"},
		{"one missing", map[string]float64{"alpha": 4400}, false, 0.825, "not reported: rate"},
		{"none", nil, false, 0.65, "no figures reported"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Diagnosis{Class: "nic-rate-limited", Location: right, Evidence: ev, Estimates: tt.est}
			res, err := Grade(Input{Variant: s.Draw(1), Diagnosis: d, Transcripts: transcripts()})
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
			if strings.Contains(details, "4000") || strings.Contains(details, " 80 ") {
				t.Errorf("the detail reveals a truth:\n%s", details)
			}
		})
	}
}
