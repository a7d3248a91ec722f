package scenarios

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

// Variant is a scenario with every parameter drawn: what one learner's lab injects and
// what the grader expects. It never leaves the server.
type Variant struct {
	Scenario *Scenario
	Seed     uint64
	Values   map[string]string
}

// SeedFor derives the seed of a learner's attempt at a scenario, so two learners (or two
// exam candidates) side by side get different variants and a retry gets a new one. key is
// the installation's secret: without it a learner who knows their user id could compute
// their own variant, i.e. the answer.
func SeedFor(key []byte, learner int64, scenarioID string, attempt int) uint64 {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "commlab-variant\x00%d\x00%s\x00%d", learner, scenarioID, attempt)
	return binary.LittleEndian.Uint64(m.Sum(nil)[:8])
}

// Draw picks every parameter of s with a generator seeded by seed. The same seed always
// gives the same variant.
func (s *Scenario) Draw(seed uint64) *Variant {
	rng := rand.New(rand.NewPCG(seed, 0x636f6d6d6c6162)) // "commlab"
	vals := map[string]string{}
	for _, name := range sortedKeys(s.Params) {
		opts := s.Params[name].values()
		if len(opts) > 0 {
			vals[name] = opts[rng.IntN(len(opts))]
		}
	}
	return &Variant{Scenario: s, Seed: seed, Values: vals}
}

// Expand replaces ${param} in text with this variant's values.
func (v *Variant) Expand(text string) string { return expand(text, v.Values) }

// Fault is a fault of a variant, ready for the injector.
type Fault struct {
	Kind   string
	Node   string
	Params map[string]string
	TTL    time.Duration // 0: the lab's TTL
}

// Faults returns the variant's faults with parameters expanded.
func (v *Variant) Faults() ([]Fault, error) {
	var out []Fault
	for i, f := range v.Scenario.Faults {
		ff := Fault{Kind: f.Kind, Node: v.Expand(f.Node), Params: map[string]string{}}
		for k, x := range f.Params {
			ff.Params[k] = v.Expand(x)
		}
		if f.TTL != "" {
			d, err := time.ParseDuration(f.TTL)
			if err != nil {
				return nil, fmt.Errorf("%s: faults[%d].ttl: %w", v.Scenario.File, i, err)
			}
			ff.TTL = d
		}
		out = append(out, ff)
	}
	return out, nil
}

// Location is the expected location with parameters expanded.
func (v *Variant) Location() map[string]string {
	out := map[string]string{}
	for k, x := range v.Scenario.Diagnosis.Location {
		out[k] = v.Expand(x)
	}
	return out
}

// EvidencePattern is an evidence spec compiled for this variant.
type EvidencePattern struct {
	Spec    EvidenceSpec
	Node    string
	Command *regexp.Regexp
	Output  *regexp.Regexp
	// Healthy is what the same check prints on a healthy node, nil when the item asks
	// for no healthy nodes (Spec.Healthy).
	Healthy *regexp.Regexp
}

// Evidence compiles the evidence patterns; parameter values are quoted so a value such
// as "1.5" matches only itself.
func (v *Variant) Evidence() ([]EvidencePattern, error) {
	quote := func(re string) string {
		return paramRe.ReplaceAllStringFunc(re, func(m string) string {
			if val, ok := v.Values[m[2:len(m)-1]]; ok {
				return regexp.QuoteMeta(val)
			}
			return m
		})
	}
	var out []EvidencePattern
	for _, e := range v.Scenario.Evidence {
		cmd, err := regexp.Compile(quote(e.Command))
		if err != nil {
			return nil, fmt.Errorf("evidence %s command: %w", e.ID, err)
		}
		o, err := regexp.Compile("(?m)" + quote(e.Output))
		if err != nil {
			return nil, fmt.Errorf("evidence %s output: %w", e.ID, err)
		}
		p := EvidencePattern{Spec: e, Node: v.Expand(e.Node), Command: cmd, Output: o}
		if e.Healthy != nil {
			if p.Healthy, err = regexp.Compile("(?m)" + quote(e.Healthy.Output)); err != nil {
				return nil, fmt.Errorf("evidence %s healthy output: %w", e.ID, err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Task returns the task text for this variant.
func (v *Variant) Task() string { return strings.TrimSpace(v.Expand(v.Scenario.Task)) }

// Debrief returns the debrief text for this variant (shown only after grading).
func (v *Variant) Debrief() string { return strings.TrimSpace(v.Expand(v.Scenario.Debrief)) }
