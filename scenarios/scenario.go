// Package scenarios defines labs as data: a YAML file per lab names its chapter, the
// environment and topology it needs, the workload, the faults to inject (with parameters
// drawn from seeded ranges so every learner gets a variant), the task, the expected
// diagnosis from the fault taxonomy, the evidence that counts, the remediation check,
// hints and the debrief. Loading reports every problem as file:line:column.
package scenarios

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/commlab/commlab/internal/boundedread"
	"github.com/commlab/commlab/internal/yamldecode"
)

// Scenario is one lab definition, as written in its file.
type Scenario struct {
	ID          string               `yaml:"id"`
	Chapter     string               `yaml:"chapter"`
	Title       string               `yaml:"title"`
	Environment Environment          `yaml:"environment"`
	Workload    *Workload            `yaml:"workload"`
	Params      map[string]ParamSpec `yaml:"params"`
	Faults      []FaultSpec          `yaml:"faults"`
	Task        string               `yaml:"task"`
	Diagnosis   Expected             `yaml:"diagnosis"`
	Evidence    []EvidenceSpec       `yaml:"evidence"`
	Estimates   []Estimate           `yaml:"estimates"`
	Remediation *Remediation         `yaml:"remediation"`
	Hints       []Hint               `yaml:"hints"`
	Debrief     string               `yaml:"debrief"`
	// Solution is a reference walk-through: what a learner who solves the lab types,
	// and which of those commands they cite. `commlab gpu check` runs it on a GPU
	// node; like the debrief it never reaches the browser.
	Solution []SolutionStep `yaml:"solution"`

	// File is the path the scenario was loaded from.
	File string `yaml:"-"`
}

// Environment says where the lab runs.
type Environment struct {
	Kind     string   `yaml:"kind"`     // "netns" (default) or "gpu"
	Topology string   `yaml:"topology"` // a topology name known to the environment; gpu: GPUTopology
	Needs    []string `yaml:"needs"`    // kernel or host features, e.g. netem, tbf
	// GPUs is how many GPUs a gpu lab's node must have (default 1).
	GPUs int `yaml:"gpus"`
	// Terminals lists the nodes the learner gets a shell in; empty means every node.
	Terminals []string `yaml:"terminals"`
}

// Workload is what runs during the lab so that the fault shows.
type Workload struct {
	// Bench is the argv after "commlab bench", e.g. [all_reduce, -b, 1M, -e, 64M]
	// (netns labs).
	Bench []string `yaml:"bench"`
	// GPU is the argv after "commlab gpu" on a GPU node (gpu labs): pcie or nccl-test
	// and their flags, e.g. [pcie, --sizes, 256M].
	GPU []string `yaml:"gpu"`
	// Metric is the figure the chart and the remediation check follow, in GB/s:
	// busbw (bench, nccl-test; the default) or, for pcie, one of PCIeMetrics.
	Metric string `yaml:"metric"`
	// Hosts are the nodes that run ranks, as node:ranks (e.g. node1:2); empty: every node, one rank.
	Hosts []string          `yaml:"hosts"`
	Env   map[string]string `yaml:"env"`
}

// ParamSpec draws one value of a scenario parameter from a seeded generator: either one
// of Choose, or a number in [Min, Max] on a grid of Step.
type ParamSpec struct {
	Choose []string `yaml:"choose"`
	Min    float64  `yaml:"min"`
	Max    float64  `yaml:"max"`
	Step   float64  `yaml:"step"`
}

// FaultSpec is a fault to inject; values may use ${param}.
type FaultSpec struct {
	Kind   string            `yaml:"kind"`
	Node   string            `yaml:"node"`
	Params map[string]string `yaml:"params"`
	TTL    string            `yaml:"ttl"`
}

// Expected is the right diagnosis; location values may use ${param}.
type Expected struct {
	Class    string            `yaml:"class"`
	Location map[string]string `yaml:"location"`
}

// EvidenceSpec is a tool output that shows the discriminating signal. Command and Output
// are regular expressions; ${param} inside them is replaced by the drawn value, quoted.
type EvidenceSpec struct {
	ID       string `yaml:"id"`
	Describe string `yaml:"describe"`
	Node     string `yaml:"node"`
	Command  string `yaml:"command"`
	Output   string `yaml:"output"`
	// Healthy, if set, asks that the check also be shown passing where nothing is wrong.
	Healthy *HealthyCheck `yaml:"healthy"`
}

// HealthyCheck is the other half of a check-writing lab's evidence: a check is only
// trusted once it also passes on healthy nodes. Besides the command that shows the fault,
// the learner cites the same check (a command matching the item's command pattern, run
// the same plain way) on at least Nodes other nodes, each printing Output (the plan's
// value). Without them the item earns half the evidence credit.
type HealthyCheck struct {
	Nodes  int    `yaml:"nodes"`
	Output string `yaml:"output"`
}

// Remediation re-measures after the learner's fix. A fault lab sets MinRatio: the
// workload's busbw must come back to at least MinRatio of the healthy baseline measured
// before the fault. A tuning lab sets Beat instead: the busbw must reach Beat times the
// lab's starting figure (the self-test's, with the untuned setting in place; the
// better of the baseline and the self-test when the lab injects nothing).
// Required makes reaching the bar a condition of passing, for a lab with two causes
// whose answer names one and whose fix removes the other (the capstone).
// KeepMbit, for a lab whose fault is a noisy neighbour (a congestion fault), asks that
// isolating the neighbour is not blocking it: each of the fault's flows must still
// deliver at least KeepMbit Mbit/s to the receiver, measured after the workload.
// An alerting lab measures the learner's Prometheus rules instead (MeasureAlertRules):
// promtool's rule unit tests named by Tests (AlertTests) run against ~/alerts.yml; its
// rules are always required.
type Remediation struct {
	Measure  string  `yaml:"measure"` // MeasureWorkload or MeasureAlertRules
	MinRatio float64 `yaml:"min_ratio"`
	Beat     float64 `yaml:"beat"`
	Required bool    `yaml:"required"`
	Tests    string  `yaml:"tests"`
	KeepMbit float64 `yaml:"keep_mbit"`
	Describe string  `yaml:"describe"`
}

// Remediation measures.
const (
	MeasureWorkload   = "workload"    // the lab's workload, run again
	MeasureAlertRules = "alert-rules" // the learner's alerting rules, unit-tested by promtool
)

// Bar is the busbw (GB/s) the re-measure must reach, from the healthy baseline and the
// starting (self-test) figure.
func (r Remediation) Bar(baseline, start float64) float64 {
	if r.Beat > 0 {
		return r.Beat * start
	}
	return r.MinRatio * baseline
}

// SolutionStep is one command of a reference walk-through, typed in Node's terminal;
// Cite marks a command whose output is evidence for the answer.
// When, if set, limits the step to hosts where it holds: "cgroup1" or "cgroup2"
// (the paths a learner reads differ).
type SolutionStep struct {
	Node string `yaml:"node"`
	Run  string `yaml:"run"`
	Cite bool   `yaml:"cite"`
	When string `yaml:"when"`
}

// Hint is a hint with its score cost (a fraction of the total, e.g. 0.1).
type Hint struct {
	Text string  `yaml:"text"`
	Cost float64 `yaml:"cost"`
}

// Options ties validation to the rest of commlab without importing it.
type Options struct {
	// Topology returns the nodes and the NIC names of a topology, false if unknown.
	Topology func(name string) (nodes, nics []string, ok bool)
	// CheckFault validates a fault kind and its parameters (values already expanded).
	CheckFault func(kind string, params map[string]string) error
	// ChapterExists reports whether a chapter id exists.
	ChapterExists func(id string) bool
	// CheckBench validates workload.bench, the argv of commlab bench.
	CheckBench func(argv []string) error
}

// Catalog is a set of loaded scenarios.
type Catalog struct {
	byID  map[string]*Scenario
	order []*Scenario
}

// Get returns the scenario with the given id.
func (c *Catalog) Get(id string) (*Scenario, bool) { s, ok := c.byID[id]; return s, ok }

// All returns every scenario, sorted by chapter then id.
func (c *Catalog) All() []*Scenario { return c.order }

// Problems is a list of scenario problems, one file:line:column message per line.
type Problems []error

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads every *.yaml file in dir of fsys and validates each scenario.
func Load(fsys fs.FS, dir string, opts Options) (*Catalog, Problems) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, Problems{err}
	}
	sort.Strings(files)
	cat := &Catalog{byID: map[string]*Scenario{}}
	var probs Problems
	for _, f := range files {
		data, err := boundedread.FS(fsys, f, boundedread.Config)
		if err != nil {
			probs = append(probs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		s, ps := Parse(f, data, opts)
		probs = append(probs, ps...)
		if s == nil {
			continue
		}
		if prev, dup := cat.byID[s.ID]; dup {
			probs = append(probs, &yamldecode.Error{File: f, Line: 1, Msg: fmt.Sprintf("scenario id %q is also used by %s", s.ID, prev.File)})
			continue
		}
		cat.byID[s.ID] = s
		cat.order = append(cat.order, s)
	}
	sort.SliceStable(cat.order, func(i, j int) bool {
		a, b := cat.order[i], cat.order[j]
		return a.Chapter < b.Chapter || a.Chapter == b.Chapter && a.ID < b.ID
	})
	return cat, probs
}

// Parse decodes and validates one scenario file. It returns nil when the file cannot be
// decoded; otherwise the scenario and any semantic problems.
func Parse(file string, data []byte, opts Options) (*Scenario, Problems) {
	var s Scenario
	if err := yamldecode.Decode(file, data, 0, &s); err != nil {
		return nil, Problems{err}
	}
	s.File = file
	v := &validator{file: file, opts: opts, s: &s}
	v.tree, _ = parser.ParseBytes(data, 0)
	v.validate()
	return &s, v.probs
}

type validator struct {
	file  string
	opts  Options
	s     *Scenario
	tree  *ast.File
	probs Problems
	// reported keeps variant checks from repeating one problem for every variant.
	reported map[string]bool
}

// once reports a problem found while checking variants, only for the first variant that shows it.
func (v *validator) once(yamlPath, format string, args ...any) {
	if v.reported == nil {
		v.reported = map[string]bool{}
	}
	if v.reported[yamlPath] {
		return
	}
	v.reported[yamlPath] = true
	v.at(yamlPath, format, args...)
}

// at reports a problem at the YAML node for a path such as "$.faults[0].kind".
func (v *validator) at(yamlPath, format string, args ...any) {
	e := &yamldecode.Error{File: v.file, Line: 1, Msg: fmt.Sprintf(format, args...)}
	if p, err := yaml.PathString(yamlPath); err == nil && v.tree != nil {
		if n, err := p.FilterFile(v.tree); err == nil && n != nil {
			if tok := n.GetToken(); tok != nil && tok.Position != nil {
				e.Line, e.Column = tok.Position.Line, tok.Position.Column
			}
		}
	}
	v.probs = append(v.probs, e)
}

var (
	idRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)
	paramRe = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}`)
)

func (v *validator) validate() {
	s := v.s
	if !idRe.MatchString(s.ID) {
		v.at("$.id", "id %q: use 2-63 lower-case letters, digits and '-'", s.ID)
	}
	if s.Chapter == "" {
		v.at("$.chapter", "chapter is required")
	} else if v.opts.ChapterExists != nil && !v.opts.ChapterExists(s.Chapter) {
		v.at("$.chapter", "unknown chapter %q", s.Chapter)
	}
	if strings.TrimSpace(s.Title) == "" {
		v.at("$.title", "title is required")
	}
	if strings.TrimSpace(s.Task) == "" {
		v.at("$.task", "task (the text the learner reads) is required")
	}
	if strings.TrimSpace(s.Debrief) == "" {
		v.at("$.debrief", "debrief is required")
	}

	var nodes, nics []string
	switch s.Environment.Kind {
	case "", "netns":
		s.Environment.Kind = "netns"
		ok := false
		if v.opts.Topology != nil {
			nodes, nics, ok = v.opts.Topology(s.Environment.Topology)
		}
		if !ok {
			v.at("$.environment.topology", "unknown topology %q", s.Environment.Topology)
		}
	case "gpu":
		if s.Environment.Topology == "" {
			s.Environment.Topology = GPUTopology
		}
		if s.Environment.Topology != GPUTopology {
			v.at("$.environment.topology", "a gpu lab runs on the host's one node: topology must be %s or empty, got %q", GPUTopology, s.Environment.Topology)
		}
		if s.Environment.GPUs == 0 {
			s.Environment.GPUs = 1
		}
		if s.Environment.GPUs < 0 {
			v.at("$.environment.gpus", "gpus %d: want 1 or more", s.Environment.GPUs)
		}
		if v.opts.Topology != nil {
			nodes, nics, _ = v.opts.Topology(GPUTopology)
		}
	default:
		v.at("$.environment.kind", "environment kind must be netns or gpu, got %q", s.Environment.Kind)
	}
	for i, t := range s.Environment.Terminals {
		if nodes != nil && !contains(nodes, t) {
			v.at(fmt.Sprintf("$.environment.terminals[%d]", i), "terminal node %q is not in topology %s (nodes: %s)", t, s.Environment.Topology, strings.Join(nodes, ", "))
		}
	}

	// Parameters: every value each one can take, to check every variant below.
	for _, name := range sortedKeys(s.Params) {
		p := s.Params[name]
		at := "$.params." + name
		switch {
		case len(p.Choose) > 0 && (p.Min != 0 || p.Max != 0 || p.Step != 0):
			v.at(at, "param %s: give either choose or min/max/step, not both", name)
		case len(p.Choose) == 0 && (p.Step <= 0 || p.Max < p.Min):
			v.at(at, "param %s: needs choose, or min <= max with step > 0", name)
		case len(p.Choose) == 0 && (p.Max-p.Min)/p.Step > 10000:
			v.at(at, "param %s: more than 10000 values", name)
		}
	}
	// A tuning lab (remediation.beat) may inject nothing: its poor setting is the job's own.
	if len(s.Faults) == 0 && (s.Remediation == nil || s.Remediation.Beat == 0) {
		v.at("$.faults", "a lab injects at least one fault (only a tuning lab, remediation.beat, may inject none)")
	}
	for i, f := range s.Faults {
		v.checkRefs(fmt.Sprintf("$.faults[%d]", i), append(mapValues(f.Params), f.Node)...)
	}
	variants := v.allVariants()
	for _, val := range variants {
		v.checkVariant(val, nodes, nics)
	}
	v.checkEstimates(variants)
	if _, ok := ClassByID(s.Diagnosis.Class); !ok {
		v.at("$.diagnosis.class", "unknown fault class %q (see the taxonomy)", s.Diagnosis.Class)
	} else {
		cls, _ := ClassByID(s.Diagnosis.Class)
		for _, w := range cls.Where {
			if _, ok := s.Diagnosis.Location[w]; !ok {
				v.at("$.diagnosis.location", "class %s is located by %s: add location.%s", cls.ID, strings.Join(cls.Where, " and "), w)
			}
		}
	}
	if len(s.Evidence) == 0 {
		v.at("$.evidence", "name at least one tool output that shows the fault")
	}
	seen := map[string]bool{}
	for i, e := range s.Evidence {
		at := fmt.Sprintf("$.evidence[%d]", i)
		if e.ID == "" || seen[e.ID] {
			v.at(at, "evidence needs a unique id")
		}
		seen[e.ID] = true
		if e.Command == "" || e.Output == "" {
			v.at(at, "evidence %s needs both command and output patterns", e.ID)
		}
		for _, field := range []struct{ name, re string }{{"command", e.Command}, {"output", e.Output}} {
			if _, err := regexp.Compile(paramRe.ReplaceAllString(field.re, "x")); err != nil {
				v.at(at+"."+field.name, "evidence %s: bad %s pattern: %v", e.ID, field.name, err)
			}
		}
		v.checkRefs(at, e.Command, e.Output, e.Node)
		if h := e.Healthy; h != nil {
			v.checkHealthy(at+".healthy", e.ID, h, len(nodes))
		}
	}
	if r := s.Remediation; r != nil && r.Measure == MeasureAlertRules {
		if r.Beat != 0 || r.MinRatio != 0 {
			v.at("$.remediation", "an alert-rules check takes tests, not min_ratio or beat")
		}
		if _, err := AlertTests(r.Tests); err != nil {
			v.at("$.remediation.tests", "%v", err)
		}
	} else if r != nil {
		if r.Measure != MeasureWorkload {
			v.at("$.remediation.measure", "remediation measure must be workload (the lab's workload, run again) or alert-rules (the learner's ~/alerts.yml, tested by promtool), got %q", r.Measure)
		}
		if r.Tests != "" {
			v.at("$.remediation.tests", "tests belong to measure: alert-rules")
		}
		switch {
		case r.Beat != 0 && r.MinRatio != 0:
			v.at("$.remediation.beat", "set min_ratio (a fault lab) or beat (a tuning lab), not both")
		case r.Beat != 0 && r.Beat <= 1:
			v.at("$.remediation.beat", "beat is a factor over the starting figure, above 1, got %v", r.Beat)
		case r.Beat == 0 && (r.MinRatio <= 0 || r.MinRatio > 1):
			v.at("$.remediation.min_ratio", "min_ratio is a fraction of the baseline in (0, 1], got %v", r.MinRatio)
		}
		if s.Workload == nil {
			v.at("$.remediation", "a remediation check re-runs the workload: add one")
		}
		if r.KeepMbit < 0 || r.KeepMbit > 0 && !slices.ContainsFunc(s.Faults, func(f FaultSpec) bool { return f.Kind == "congestion" }) {
			v.at("$.remediation.keep_mbit", "keep_mbit is the rate (Mbit/s, above 0) a congestion fault's flows must keep: it needs a congestion fault, got %v", r.KeepMbit)
		}
	}
	total := 0.0
	for i, h := range s.Hints {
		if h.Cost < 0 || h.Cost > 0.5 || strings.TrimSpace(h.Text) == "" {
			v.at(fmt.Sprintf("$.hints[%d]", i), "a hint needs text and a cost between 0 and 0.5")
		}
		total += h.Cost
	}
	if total > 0.6 {
		v.at("$.hints", "hints cost %.2f in all; keep it at most 0.6 so a lab can still be passed", total)
	}
	if w := s.Workload; w != nil {
		v.checkWorkload(w, s.Environment.Kind)
	}
	cited := 0
	for i, st := range s.Solution {
		at := fmt.Sprintf("$.solution[%d]", i)
		if strings.TrimSpace(st.Run) == "" || strings.Contains(st.Run, "\n") {
			v.at(at, "a solution step runs one command line: run is empty or has a newline")
		}
		if term := s.Environment.Terminals; nodes != nil && (!contains(nodes, st.Node) || len(term) > 0 && !contains(term, st.Node)) {
			v.at(at+".node", "node %q has no terminal in this lab", st.Node)
		}
		if st.When != "" && st.When != "cgroup1" && st.When != "cgroup2" {
			v.at(at+".when", "when %q: want cgroup1 or cgroup2", st.When)
		}
		if st.Cite {
			cited++
		}
	}
	if len(s.Solution) > 0 && cited == 0 {
		v.at("$.solution", "a solution cites at least one command as evidence (cite: true)")
	}
	v.checkRefs("$.diagnosis.location", mapValues(s.Diagnosis.Location)...)
	v.checkRefs("$.task", s.Task, s.Debrief)
}

// checkHealthy validates an evidence item's healthy-node half; topologyNodes is 0 when
// the topology is unknown.
func (v *validator) checkHealthy(at, id string, h *HealthyCheck, topologyNodes int) {
	switch {
	case h.Nodes < 1:
		v.at(at+".nodes", "evidence %s: healthy.nodes is how many other nodes the check must be cited passing on, 1 or more, got %d", id, h.Nodes)
	case topologyNodes > 0 && h.Nodes > topologyNodes-1:
		v.at(at+".nodes", "evidence %s: healthy.nodes %d, but topology %s has only %d other nodes", id, h.Nodes, v.s.Environment.Topology, topologyNodes-1)
	}
	if h.Output == "" {
		v.at(at, "evidence %s: healthy needs an output pattern (what the check prints on a healthy node)", id)
	} else if _, err := regexp.Compile(paramRe.ReplaceAllString(h.Output, "x")); err != nil {
		v.at(at+".output", "evidence %s: bad healthy output pattern: %v", id, err)
	}
	v.checkRefs(at+".output", h.Output)
}

// GPUTopology is the topology of every gpu lab: the host's GPUs in one node (node1).
const GPUTopology = "gpu-node"

// PCIeMetrics are the figures a pcie workload can report: memory kind and direction.
var PCIeMetrics = []string{"pinned-h2d", "pinned-d2h", "pinned-bidir", "pageable-h2d"}

func (v *validator) checkWorkload(w *Workload, kind string) {
	if kind != "gpu" {
		if len(w.Bench) == 0 {
			v.at("$.workload", "workload.bench is the argv of commlab bench, e.g. [all_reduce, -b, 1M, -e, 64M]")
		}
		if len(w.GPU) > 0 {
			v.at("$.workload.gpu", "workload.gpu runs on a GPU node: set environment.kind: gpu, or use workload.bench")
		}
		if w.Metric != "" && w.Metric != "busbw" {
			v.at("$.workload.metric", "a bench workload reports busbw, got metric %q", w.Metric)
		}
		if len(w.Bench) > 0 && v.opts.CheckBench != nil {
			if err := v.opts.CheckBench(w.Bench); err != nil {
				v.at("$.workload.bench", "%v", err)
			}
		}
		return
	}
	if len(w.Bench) > 0 {
		v.at("$.workload.bench", "a gpu lab runs commlab gpu, not the namespace bench: use workload.gpu, e.g. [nccl-test, --op, all_reduce]")
	}
	switch {
	case len(w.GPU) == 0:
		v.at("$.workload", "workload.gpu is the argv after commlab gpu: [pcie, ...] or [nccl-test, ...]")
	case w.GPU[0] == "nccl-test":
		if w.Metric == "" {
			w.Metric = "busbw"
		}
		if w.Metric != "busbw" {
			v.at("$.workload.metric", "nccl-test reports busbw, got metric %q", w.Metric)
		}
	case w.GPU[0] == "pcie":
		if !slices.Contains(PCIeMetrics, w.Metric) {
			at := "$.workload.metric"
			if w.Metric == "" {
				at = "$.workload"
			}
			v.at(at, "a pcie workload needs metric: one of %s, got %q", strings.Join(PCIeMetrics, ", "), w.Metric)
		}
	default:
		v.at("$.workload.gpu", "workload.gpu must start with pcie or nccl-test, got %q", w.GPU[0])
	}
	if len(w.Hosts) > 0 {
		v.at("$.workload.hosts", "a gpu lab has one node; hosts is for bench workloads")
	}
}

// checkRefs reports ${name} references to parameters that do not exist.
func (v *validator) checkRefs(at string, texts ...string) {
	for _, t := range texts {
		for _, m := range paramRe.FindAllStringSubmatch(t, -1) {
			if _, ok := v.s.Params[m[1]]; !ok {
				v.at(at, "${%s} names no parameter (params: %s)", m[1], strings.Join(sortedKeys(v.s.Params), ", "))
			}
		}
	}
}

// allVariants lists every combination of parameter values, capped so validation stays fast;
// past the cap it samples seeds.
func (v *validator) allVariants() []map[string]string {
	const limit = 256
	combos := []map[string]string{{}}
	for _, name := range sortedKeys(v.s.Params) {
		vals := v.s.Params[name].values()
		if len(vals) == 0 {
			return nil
		}
		var next []map[string]string
		for _, c := range combos {
			for _, val := range vals {
				m := make(map[string]string, len(c)+1)
				for k, x := range c {
					m[k] = x
				}
				m[name] = val
				next = append(next, m)
				if len(next) > limit {
					break
				}
			}
		}
		combos = next
		if len(combos) > limit {
			combos = combos[:limit]
		}
	}
	return combos
}

func (v *validator) checkVariant(vals map[string]string, nodes, nics []string) {
	for i, f := range v.s.Faults {
		at := fmt.Sprintf("$.faults[%d]", i)
		node := expand(f.Node, vals)
		if f.Kind == "" {
			v.once(at, "fault needs a kind")
			continue
		}
		if nodes != nil && !contains(nodes, node) {
			v.once(at+".node", "fault node %q (with %s) is not in topology %s", node, describe(vals), v.s.Environment.Topology)
		}
		params := map[string]string{}
		for k, x := range f.Params {
			params[k] = expand(x, vals)
		}
		if nic, ok := params["nic"]; ok && nics != nil && !contains(nics, nic) {
			v.once(at+".params.nic", "NIC %q (with %s) is not in topology %s (NICs: %s)", nic, describe(vals), v.s.Environment.Topology, strings.Join(nics, ", "))
		}
		if v.opts.CheckFault != nil {
			if err := v.opts.CheckFault(f.Kind, params); err != nil {
				v.once(at, "fault %s (with %s): %v", f.Kind, describe(vals), err)
			}
		}
	}
	if nodes != nil {
		if n, ok := v.s.Diagnosis.Location[WhereNode]; ok && !contains(nodes, expand(n, vals)) {
			v.once("$.diagnosis.location.node", "expected node %q (with %s) is not in the topology", expand(n, vals), describe(vals))
		}
	}
}

func (p ParamSpec) values() []string {
	if len(p.Choose) > 0 {
		return p.Choose
	}
	if p.Step <= 0 || p.Max < p.Min || (p.Max-p.Min)/p.Step > 10000 {
		return nil
	}
	var out []string
	for x := p.Min; x <= p.Max+p.Step/1e6; x += p.Step {
		out = append(out, formatNumber(x))
	}
	return out
}

func formatNumber(x float64) string {
	s := fmt.Sprintf("%.6f", x)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func expand(s string, vals map[string]string) string {
	return paramRe.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vals[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func describe(vals map[string]string) string {
	parts := make([]string, 0, len(vals))
	for _, k := range sortedKeys(vals) {
		parts = append(parts, k+"="+vals[k])
	}
	if len(parts) == 0 {
		return "no parameters"
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
