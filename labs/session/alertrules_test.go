package session

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/scenarios"
)

// needPromtool finds promtool, or skips (fails where COMMLAB_REQUIRE_PROMTOOL is set, as in CI).
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := Promtool()
	if err != nil {
		if os.Getenv("COMMLAB_REQUIRE_PROMTOOL") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return p
}

// TestAlertRulesCh26 runs chapter 26's cases on the reference rules and on rules with
// one mistake each: the mistake fails exactly the case built to catch it.
func TestAlertRulesCh26(t *testing.T) {
	promtool := needPromtool(t)
	tests, err := scenarios.AlertTests("ch26-comm-alerts")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile("testdata/ch26-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	// Each mistake fails exactly the case built to catch it, so one run holds them all.
	mistakes := [][2]string{
		// no for: a 3-minute busbw dip pages
		{"nccl_tests_busbw_gbps < 0.8 * 180\n        for: 10m", "nccl_tests_busbw_gbps < 0.8 * 180\n        for: 0s"},
		// for shorter than the rate window: a 2-minute retransmit burst pages
		{"/ rate(node_netstat_Tcp_OutSegs[5m]) > 0.01\n        for: 10m", "/ rate(node_netstat_Tcp_OutSegs[5m]) > 0.01\n        for: 2m"},
		// any carrier change pages: a re-seated cable pages
		{"[15m]) > 4", "[15m]) > 0"},
		// the last-Xid gauge read as a count: yesterday's Xid pages
		{"changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0 and DCGM_FI_DEV_XID_ERRORS > 0", "DCGM_FI_DEV_XID_ERRORS > 0"},
		// summed over devices: the alert does not say where
		{"rate(node_ethtool_received_prio3_pause[5m]) > 1000", "sum(rate(node_ethtool_received_prio3_pause[5m])) > 1000"},
	}
	for _, tc := range []struct {
		name    string
		edits   [][2]string
		failed  []string
		problem string
	}{
		{name: "reference (annotations and extra labels are not graded)"},
		{name: "five mistakes", edits: mistakes, failed: []string{"busbw-dips", "link-bounce", "pfc-storm", "retrans-burst", "xid-stale"}},
		{name: "rate of a gauge: busbw never pages", edits: [][2]string{{"nccl_tests_busbw_gbps < 0.8 * 180", "rate(nccl_tests_busbw_gbps[5m]) < 0"}}, failed: []string{"busbw-drop"}},
		{name: "a bad expression", edits: [][2]string{{"> 0.01", "> > 0.01"}}, problem: "could not parse expression"},
		{name: "not rules", edits: [][2]string{{"groups:", "grups:"}}, problem: "field grups not found"},
		{name: "an anchor", edits: [][2]string{{"labels: {severity: page}", "labels: &l {severity: page}"}}, problem: "YAML anchors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := string(ref)
			for _, e := range tc.edits {
				if !strings.Contains(rules, e[0]) {
					t.Fatalf("the reference has no %q", e[0])
				}
				rules = strings.Replace(rules, e[0], e[1], 1)
			}
			run, err := TestAlertRules(context.Background(), promtool, []byte(rules), tests)
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Cases) != 11 {
				t.Errorf("cases %v, want 11", run.Cases)
			}
			if tc.problem != "" {
				if !strings.Contains(run.Problem, tc.problem) || !strings.HasPrefix(run.Problem, "~/alerts.yml: ") {
					t.Errorf("problem %q, want one about ~/alerts.yml saying %q", run.Problem, tc.problem)
				}
				return
			}
			if run.Problem != "" || !slices.Equal(run.Failed, tc.failed) {
				t.Errorf("failed %v (problem %q), want %v", run.Failed, run.Problem, tc.failed)
			}
		})
	}
}

func TestUnitVerdicts(t *testing.T) {
	// promtool 2.42 prints SUCCESS on stdout and FAILED with its details on stderr.
	out := "Unit Testing:  a.yaml\n  SUCCESS\n\nUnit Testing:  b.yaml\n\n  FAILED:\n    alertname: X, time: 10m, \n        exp:[\n  SUCCESS\nUnit Testing:  c.yaml\n"
	got := unitVerdicts(out)
	if len(got) != 2 || !got["a.yaml"] || got["b.yaml"] {
		t.Errorf("verdicts %v, want a.yaml passed, b.yaml failed, c.yaml none", got)
	}
}

func TestPlainAlerts(t *testing.T) {
	in := "groups:\n- name: g\n  interval: 30s\n  rules:\n  - alert: A\n    expr: up == 0\n    for: 5m\n    labels: {severity: page, team: net}\n    annotations: {summary: down}\n  - record: r\n    expr: sum(up)\n"
	out, err := plainAlerts([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"severity: page", "expr: up == 0", "for: 5m", "interval: 30s", "record: r"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lost %q", s, want)
		}
	}
	for _, gone := range []string{"team", "annotations", "summary"} {
		if strings.Contains(s, gone) {
			t.Errorf("%q kept %q", s, gone)
		}
	}
}

// TestAlertRulesLabNeedsPromtool: without promtool an alerting lab fails at once,
// saying what to install, before any environment comes up.
func TestAlertRulesLabNeedsPromtool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	src := strings.Replace(testScenario, "remediation: {measure: workload, min_ratio: 0.8}", "remediation: {measure: alert-rules, tests: ch26-comm-alerts}", 1)
	src = strings.Replace(src, "workload: {gpu: [nccl-test]}\n", "", 1)
	s, probs := scenarios.Parse("t.yaml", []byte(src), scenarios.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	h := &fakeHost{}
	l := Start(context.Background(), Config{Provider: h, Faults: h, DataDir: t.TempDir(), TTL: time.Minute, NoStream: true, Log: quiet}, 1, s.Draw(1))
	t.Cleanup(func() { l.Stop(); l.Wait() })
	ended(t, l)
	if st := l.Status(); st.State != Failed || !strings.Contains(st.Failure, "apt-get install prometheus") || len(h.events()) != 0 {
		t.Errorf("state %s (%q), events %v; want failed naming the package, nothing brought up", st.State, st.Failure, h.events())
	}
}
