package scenarios

import (
	"fmt"
	"math"
	"strconv"

	"github.com/expr-lang/expr"
)

// Estimate is a figure the learner reports beside the diagnosis, such as a fitted α.
// Truth is an expression over the lab's parameters, each a number (e.g.
// "delay * 1000" for a delay drawn in ms, reported in µs); an answer is right in
// [truth × (1 − Under), truth × (1 + Over)]. Describe names the figure (the form shows
// it before grading: never its value); Unit is what the learner types it in.
type Estimate struct {
	ID       string  `yaml:"id"`
	Describe string  `yaml:"describe"`
	Unit     string  `yaml:"unit"`
	Truth    string  `yaml:"truth"`
	Under    float64 `yaml:"under"`
	Over     float64 `yaml:"over"`
}

// Range is the interval of right answers for the parameters vals.
func (e Estimate) Range(vals map[string]string) (lo, hi float64, err error) {
	env := map[string]any{}
	for k, s := range vals {
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			env[k] = x
		}
	}
	prog, err := expr.Compile(e.Truth, expr.Env(env))
	var out any
	if err == nil {
		out, err = expr.Run(prog, env)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("estimate %s: truth %q: %w", e.ID, e.Truth, err)
	}
	var t float64
	switch x := out.(type) {
	case float64:
		t = x
	case int:
		t = float64(x)
	default:
		return 0, 0, fmt.Errorf("estimate %s: truth %q gives %v, not a number", e.ID, e.Truth, out)
	}
	if math.IsNaN(t) || math.IsInf(t, 0) || t <= 0 {
		return 0, 0, fmt.Errorf("estimate %s: truth %q gives %v; want a positive number", e.ID, e.Truth, t)
	}
	return t * (1 - e.Under), t * (1 + e.Over), nil
}

// EstimateRange is the interval of right answers to estimate e in this variant.
func (v *Variant) EstimateRange(e Estimate) (lo, hi float64, err error) { return e.Range(v.Values) }

// checkEstimates validates the estimates' fields, and their truth in every variant.
func (v *validator) checkEstimates(variants []map[string]string) {
	seen := map[string]bool{}
	for i, e := range v.s.Estimates {
		at := fmt.Sprintf("$.estimates[%d]", i)
		switch {
		case !idRe.MatchString(e.ID) || seen[e.ID]:
			v.at(at+".id", "estimate id %q: a unique id of 2-63 lower-case letters, digits and '-'", e.ID)
		case e.Describe == "" || e.Unit == "" || e.Truth == "":
			v.at(at, "estimate %s needs describe, unit and truth", e.ID)
		case e.Under < 0 || e.Under >= 1 || e.Over <= 0:
			v.at(at, "estimate %s: under is a fraction in [0, 1) and over one above 0, got under %v, over %v", e.ID, e.Under, e.Over)
		}
		seen[e.ID] = true
		if paramRe.MatchString(e.Describe) {
			v.at(at+".describe", "estimate %s: describe is shown before grading, so it may not use ${param}", e.ID)
		}
		if e.Truth == "" {
			continue
		}
		for _, vals := range variants {
			if _, _, err := e.Range(vals); err != nil {
				v.once(at+".truth", "%v (with %s)", err, describe(vals))
			}
		}
	}
}
