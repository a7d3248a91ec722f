// Package grader scores a learner's diagnosis of a lab against the injected truth: the
// fault class from the taxonomy, its location, the evidence (commands the learner ran and
// what they printed, read from the learner's own recordings on the server), and the
// remediation (the workload measured again after the fix). The answer never leaves the
// server; only the breakdown does, after grading.
package grader

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/commlab/commlab/labs/record"
	"github.com/commlab/commlab/scenarios"
)

// Diagnosis is what the learner submits.
type Diagnosis struct {
	Class    string            `json:"class"`
	Location map[string]string `json:"location"`
	Evidence []EvidenceRef     `json:"evidence"`
	// Estimates are the figures the lab asks for (scenarios.Estimate), by id, in the
	// estimate's unit.
	Estimates map[string]float64 `json:"estimates,omitempty"`
}

// EvidenceRef points at a command in one of the learner's terminals: the terminal (node)
// name and the command's sequence number there.
type EvidenceRef struct {
	Terminal string `json:"terminal"`
	Seq      int    `json:"seq"`
}

// Transcript is the commands of one terminal, parsed from its recording on the server.
type Transcript struct {
	Terminal string
	Node     string
	Commands []record.Command
}

// Measurement is the workload's bus bandwidth (GB/s) at three moments of the lab.
type Measurement struct {
	Baseline float64 // healthy, before the fault
	Faulted  float64 // with the fault in place (the self-test: must be below the bar)
	After    float64 // after the learner's fix
	// Kept is, where the lab asks a neighbour to be isolated rather than blocked
	// (Remediation.KeepMbit), what each of the neighbour's flows still delivers after
	// the fix, in Mbit/s.
	Kept []float64
}

// RulesRun is the learner's alerting rules run through the lab's promtool rule unit
// tests: each case is one recorded situation (a fault that must page, a flapping or
// healthy series that must not).
type RulesRun struct {
	Cases  []string // every case, by name
	Failed []string // the cases the rules failed
	// Problem says why nothing could be tested (no rules file, rules promtool rejects).
	Problem string
}

// Input is everything a grading needs.
type Input struct {
	Variant     *scenarios.Variant
	Diagnosis   Diagnosis
	Transcripts []Transcript
	HintsUsed   []int
	// Checks counts the answers checked before this one, each costing CheckCost.
	Checks int
	// Remediation is the re-measurement, nil when the lab has no remediation check or the
	// learner did not ask for it.
	Remediation *Measurement
	// Rules is the alerting-rules test of a lab that measures rules (nil: not run).
	Rules *RulesRun
}

// Criterion is one line of the score breakdown.
type Criterion struct {
	Name   string  `json:"name"` // class, location, evidence, remediation, hints
	Weight float64 `json:"weight"`
	Earned float64 `json:"earned"`
	Detail string  `json:"detail"` // in English, for logs and the command line
	// Key and Args say Detail in any UI language: web.T(lang, Key) is a format for Args.
	Key  string `json:"key"`
	Args []any  `json:"args,omitempty"`
}

// CheckCost is what each answer check before the final submission costs.
const CheckCost = 0.05

// Result is a graded diagnosis.
type Result struct {
	Score    float64     `json:"score"`
	Passed   bool        `json:"passed"`
	Criteria []Criterion `json:"criteria"`
}

// PassMark is the score needed to pass a lab. Passing also needs the right class and
// the full location: a fault found on the wrong node is not found; where the lab
// makes its fix required, the fix measured again; and where it asks for figures, every
// figure within its tolerance.
const PassMark = 0.7

// Weights of the criteria; without a remediation check its weight goes to the others.
var (
	weightsWithFix = map[string]float64{"class": 0.4, "location": 0.3, "evidence": 0.2, "remediation": 0.1}
	weightsNoFix   = map[string]float64{"class": 0.45, "location": 0.3, "evidence": 0.25}
	// An alerting lab is mostly about its rules, and passes only with rules that pass
	// every recorded case.
	weightsRules = map[string]float64{"class": 0.3, "location": 0.2, "evidence": 0.2, "remediation": 0.3}
)

// Grade scores a diagnosis.
func Grade(in Input) (Result, error) {
	v := in.Variant
	s := v.Scenario
	weights := weightsNoFix
	rules := s.Remediation != nil && s.Remediation.Measure == scenarios.MeasureAlertRules
	switch {
	case rules:
		weights = weightsRules
	case s.Remediation != nil:
		weights = weightsWithFix
	}
	if len(s.Estimates) > 0 {
		weights = withEstimates(weights)
	}
	var res Result
	add := func(name string, fraction float64, key string, args ...any) {
		w := weights[name]
		res.Criteria = append(res.Criteria, Criterion{Name: name, Weight: w, Earned: w * fraction,
			Detail: fmt.Sprintf(details[key], args...), Key: key, Args: args})
	}

	// Class.
	want := s.Diagnosis.Class
	got := strings.TrimSpace(in.Diagnosis.Class)
	if got == want {
		add("class", 1, "grade.class.right")
	} else if gc, ok := scenarios.ClassByID(got); ok {
		wc, _ := scenarios.ClassByID(want)
		if gc.Category == wc.Category {
			add("class", 0.25, "grade.class.category")
		} else {
			add("class", 0, "grade.class.wrong")
		}
	} else {
		add("class", 0, "grade.class.unknown", got)
	}

	// Location: each field the class is located by counts equally.
	loc := v.Location()
	fields := 0
	right := 0
	var wrong []string
	for _, k := range slices.Sorted(maps.Keys(loc)) {
		fields++
		if strings.EqualFold(strings.TrimSpace(in.Diagnosis.Location[k]), loc[k]) {
			right++
		} else {
			wrong = append(wrong, k)
		}
	}
	switch {
	case fields == 0 || right == fields:
		add("location", 1, "grade.location.right")
	case right == 0:
		add("location", 0, "grade.location.wrong")
	default:
		add("location", float64(right)/float64(fields), "grade.location.partial", strings.Join(wrong, ", "))
	}

	// Evidence: at least one referenced command must show the signal.
	patterns, err := v.Evidence()
	if err != nil {
		return Result{}, err
	}
	frac, key, args := evidence(patterns, in.Diagnosis.Evidence, in.Transcripts)
	add("evidence", frac, key, args...)

	if len(s.Estimates) > 0 {
		frac, key, args, err := estimates(v, in.Diagnosis.Estimates)
		if err != nil {
			return Result{}, err
		}
		add("estimates", frac, key, args...)
	}

	// Remediation: measured again by the lab, never taken from the learner.
	if r := s.Remediation; rules {
		run := in.Rules
		switch {
		case run == nil:
			add("remediation", 0, "grade.rules.none")
		case run.Problem != "":
			add("remediation", 0, "grade.rules.problem", run.Problem)
		case len(run.Cases) == 0:
			add("remediation", 0, "grade.rules.none")
		case len(run.Failed) == 0:
			add("remediation", 1, "grade.rules.pass", len(run.Cases))
		default: // rules that page on a flap, or miss a fault, are not half right
			add("remediation", 0, "grade.rules.fail", len(run.Failed), len(run.Cases), strings.Join(run.Failed, ", "))
		}
	} else if r != nil {
		m := in.Remediation
		switch {
		case m == nil:
			add("remediation", 0, "grade.fix.none")
		case m.Baseline <= 0:
			add("remediation", 0, "grade.fix.nobaseline")
		case r.Beat > 0 && m.Faulted <= 0:
			add("remediation", 0, "grade.fix.nostart")
		case r.Beat > 0:
			frac, key := 0.0, "grade.fix.beatshort"
			if m.After >= r.Bar(m.Baseline, m.Faulted) {
				frac, key = 1, "grade.fix.beat"
			}
			add("remediation", frac, key, m.After, m.Faulted, m.After/m.Faulted, r.Beat)
		case m.After >= r.MinRatio*m.Baseline && r.KeepMbit > 0:
			// Blocking the neighbour also brings the workload back; isolating keeps it running.
			kept := 0.0
			if len(m.Kept) > 0 {
				kept = slices.Min(m.Kept)
			}
			if kept >= r.KeepMbit {
				add("remediation", 1, "grade.fix.isolated", 100*m.After/m.Baseline, m.After, m.Baseline, kept)
			} else {
				add("remediation", 0, "grade.fix.blocked", 100*m.After/m.Baseline, kept, r.KeepMbit)
			}
		case m.After >= r.MinRatio*m.Baseline:
			add("remediation", 1, "grade.fix.back", 100*m.After/m.Baseline, m.After, m.Baseline)
		default:
			add("remediation", 0, "grade.fix.short", 100*m.After/m.Baseline, m.After, m.Baseline, 100*r.MinRatio)
		}
	}

	// Hints cost what they said they would.
	cost := 0.0
	for _, h := range in.HintsUsed {
		if h >= 0 && h < len(s.Hints) {
			cost += s.Hints[h].Cost
		}
	}
	if cost > 0 {
		n := len(in.HintsUsed)
		res.Criteria = append(res.Criteria, Criterion{Name: "hints", Earned: -cost,
			Detail: fmt.Sprintf(details["grade.hints"], n), Key: "grade.hints", Args: []any{n}})
	}
	if in.Checks > 0 {
		res.Criteria = append(res.Criteria, Criterion{Name: "checks", Earned: -CheckCost * float64(in.Checks),
			Detail: fmt.Sprintf(details["grade.checks"], in.Checks), Key: "grade.checks", Args: []any{in.Checks}})
	}
	for _, c := range res.Criteria {
		res.Score += c.Earned
	}
	res.Score = math.Max(0, math.Round(res.Score*1000)/1000)
	res.Passed = res.Score >= PassMark && full(res, "class") && full(res, "location") &&
		(s.Remediation == nil || !(s.Remediation.Required || rules) || full(res, "remediation")) &&
		(len(s.Estimates) == 0 || full(res, "estimates"))
	return res, nil
}

// EstimatesWeight is the share of the score a lab's estimates earn; the other criteria
// share the rest in their usual proportions.
const EstimatesWeight = 0.35

func withEstimates(w map[string]float64) map[string]float64 {
	out := map[string]float64{"estimates": EstimatesWeight}
	for k, x := range w {
		out[k] = x * (1 - EstimatesWeight)
	}
	return out
}

// estimates scores the reported figures: each right one (within its tolerance of the
// truth) earns an equal share. The detail names the wrong ones, never the truth: an
// answer check shows it before the debrief.
func estimates(v *scenarios.Variant, got map[string]float64) (float64, string, []any, error) {
	var wrong, missing []string
	all := v.Scenario.Estimates
	for _, e := range all {
		lo, hi, err := v.EstimateRange(e)
		if err != nil {
			return 0, "", nil, err
		}
		x, ok := got[e.ID]
		switch {
		case !ok:
			missing = append(missing, e.ID)
		case x < lo || x > hi || math.IsNaN(x):
			wrong = append(wrong, fmt.Sprintf("%s = %g %s", e.ID, x, e.Unit))
		}
	}
	right := len(all) - len(wrong) - len(missing)
	frac := float64(right) / float64(len(all))
	switch {
	case right == len(all):
		return 1, "grade.estimates.right", []any{len(all)}, nil
	case len(missing) == len(all):
		return 0, "grade.estimates.none", nil, nil
	case len(wrong) == 0:
		return frac, "grade.estimates.missing", []any{right, len(all), strings.Join(missing, ", ")}, nil
	}
	return frac, "grade.estimates.wrong", []any{right, len(all), strings.Join(wrong, "; ")}, nil
}

func full(r Result, name string) bool {
	for _, c := range r.Criteria {
		if c.Name == name {
			return c.Earned >= c.Weight-1e-9
		}
	}
	return false
}

// evidence checks each reference against the server's transcripts. An item that asks
// for healthy nodes too earns full credit only with them; without, half.
func evidence(patterns []scenarios.EvidencePattern, refs []EvidenceRef, ts []Transcript) (float64, string, []any) {
	if len(refs) == 0 {
		return 0, "grade.evidence.none", nil
	}
	var notRun, forged, notShown []string
	var half []any // the first fault shown without enough healthy nodes
	for _, ref := range refs {
		id := fmt.Sprintf("%s#%d", ref.Terminal, ref.Seq)
		cmd, node, ok := find(ts, ref)
		switch {
		case !ok:
			notRun = append(notRun, id)
			continue
		case cmd.Tampered:
			forged = append(forged, id)
			continue
		}
		shown := false
		for _, p := range patterns {
			if p.Node != "" && p.Node != node || !shows(p.Command, p.Output, cmd) {
				continue
			}
			if p.Healthy == nil {
				return 1, "grade.evidence.shows", []any{id, cmd.Line}
			}
			shown = true
			passed := healthyNodes(p, node, refs, ts)
			if passed >= p.Spec.Healthy.Nodes {
				return 1, "grade.evidence.healthy", []any{id, cmd.Line, passed}
			}
			if half == nil {
				half = []any{id, cmd.Line, passed, p.Spec.Healthy.Nodes}
			}
		}
		if !shown {
			notShown = append(notShown, id)
		}
	}
	switch {
	case half != nil:
		return 0.5, "grade.evidence.nohealthy", half
	case len(forged) > 0:
		return 0, "grade.evidence.forged", []any{strings.Join(forged, ", ")}
	case len(notShown) > 0:
		return 0, "grade.evidence.notshown", []any{strings.Join(notShown, ", ")}
	}
	return 0, "grade.evidence.notrun", []any{strings.Join(notRun, ", ")}
}

// shows reports whether a plain run of a command matching command printed output.
func shows(command, output *regexp.Regexp, c record.Command) bool {
	return !c.Tampered && command.MatchString(c.Line) && simpleCommand(c.Line) && output.MatchString(c.Output)
}

// healthyNodes counts the nodes other than faulty on which a cited command of p's check
// printed the healthy output.
func healthyNodes(p scenarios.EvidencePattern, faulty string, refs []EvidenceRef, ts []Transcript) int {
	passed := map[string]bool{}
	for _, ref := range refs {
		if cmd, node, ok := find(ts, ref); ok && node != faulty && shows(p.Command, p.Healthy, cmd) {
			passed[node] = true
		}
	}
	return len(passed)
}

// details are the English texts of the criteria's keys (the web catalogue has them in
// every UI language).
var details = map[string]string{
	"grade.class.right":        "right fault class",
	"grade.class.category":     "right category, wrong fault class",
	"grade.class.wrong":        "wrong fault class",
	"grade.class.unknown":      "%q is not a fault class",
	"grade.location.right":     "right location",
	"grade.location.wrong":     "wrong location",
	"grade.location.partial":   "wrong %s",
	"grade.evidence.none":      "no evidence picked",
	"grade.evidence.shows":     "%s (%s) shows the fault",
	"grade.evidence.healthy":   "%s (%s) shows the fault, and the same check passes on %d other nodes",
	"grade.evidence.nohealthy": "%s (%s) shows the fault, but the same check is cited passing on %d other nodes, not the %d it needs to be trusted",
	"grade.evidence.notrun":    "%s was not run in this lab",
	"grade.evidence.forged":    "%s printed forged shell markers",
	"grade.evidence.notshown":  "%s does not show the fault (it must be a plain command, at most piped into grep/head/tail, run on the node that has it)",
	"grade.fix.none":           "no re-measurement after a fix",
	"grade.fix.nobaseline":     "no healthy baseline was measured",
	"grade.fix.back":           "busbw back to %.0f%% of baseline (%.3f of %.3f GB/s)",
	"grade.fix.nostart":        "no starting (untuned) figure was measured",
	"grade.fix.beat":           "busbw %.3f GB/s against the starting %.3f GB/s: %.2f× (target %.2f×)",
	"grade.fix.beatshort":      "busbw %.3f GB/s against the starting %.3f GB/s: only %.2f×, target %.2f×",
	"grade.fix.short":          "busbw only %.0f%% of baseline (%.3f of %.3f GB/s), needs %.0f%%",
	"grade.fix.isolated":       "busbw back to %.0f%% of baseline (%.3f of %.3f GB/s), and every flow of the neighbour still delivers %.1f Mbit/s or more",
	"grade.fix.blocked":        "busbw back to %.0f%% of baseline, but a flow of the neighbour delivers only %.1f Mbit/s: isolating it keeps at least %.0f Mbit/s each, blocking it is not a fix",
	"grade.rules.none":         "no alerting rules were tested",
	"grade.rules.problem":      "the alerting rules could not be tested: %s",
	"grade.rules.pass":         "the alerting rules pass all %d recorded cases",
	"grade.rules.fail":         "the alerting rules fail %d of %d recorded cases: %s",
	"grade.estimates.right":    "all %d figures within their tolerance",
	"grade.estimates.none":     "no figures reported",
	"grade.estimates.missing":  "%d of %d figures within their tolerance; not reported: %s",
	"grade.estimates.wrong":    "%d of %d figures within their tolerance; outside it: %s",
	"grade.hints":              "%d hint(s) used",
	"grade.checks":             "%d answer check(s) used",
}

// DetailKeys lists every key a criterion can carry (the web catalogue must have them).
func DetailKeys() []string { return slices.Sorted(maps.Keys(details)) }

func find(ts []Transcript, ref EvidenceRef) (record.Command, string, bool) {
	for _, t := range ts {
		if t.Terminal != ref.Terminal {
			continue
		}
		for _, c := range t.Commands {
			if c.Seq == ref.Seq {
				return c, t.Node, true
			}
		}
	}
	return record.Command{}, "", false
}

// simpleCommand accepts a tool run as it is, or piped into a filter that only selects
// lines; anything that could print text of its own making (echo, printf, sed, redirects,
// command substitution, several commands) is not evidence. Quotes are honoured, so
// grep -E 'a|b' is one command.
func simpleCommand(line string) bool {
	var stages [][]string
	var word strings.Builder
	var words []string
	inWord := false
	flushWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				word.WriteByte(c)
			}
			continue
		case quote == '"':
			switch c {
			case '"':
				quote = 0
			case '$', '`', '\\':
				return false // expansions inside double quotes can make text up
			default:
				word.WriteByte(c)
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote, inWord = c, true
		case ' ', '\t':
			flushWord()
		case '|':
			if i+1 < len(line) && line[i+1] == '|' {
				return false
			}
			flushWord()
			stages = append(stages, words)
			words = nil
		case ';', '&', '<', '>', '$', '`', '\\', '\n', '(', ')':
			return false
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return false
	}
	flushWord()
	stages = append(stages, words)
	for i, st := range stages {
		if len(st) == 0 {
			return false
		}
		if i == 0 {
			continue
		}
		switch st[0] {
		case "grep", "egrep", "fgrep", "head", "tail", "less", "more", "cat", "column":
		default:
			return false
		}
	}
	return true
}
