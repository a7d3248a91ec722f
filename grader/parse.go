package grader

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/commlab/commlab/scenarios"
)

// ParseDiagnosis reads the terminal form of a diagnosis, used by `commlab lab run`:
//
//	class=nic-rate-limited node=node2 nic=rdma0 evidence=node2#3,node2#5 estimate.alpha=2350
//
// Location keys are those of the taxonomy (node, nic, gpu, port); estimate.ID gives a
// figure the lab asks for (scenarios.Estimate), in its unit. Errors say which word
// is wrong and what would be right.
func ParseDiagnosis(text string) (Diagnosis, error) {
	d := Diagnosis{Location: map[string]string{}}
	words := strings.Fields(text)
	if len(words) == 0 {
		return d, fmt.Errorf("empty diagnosis: write e.g. class=nic-rate-limited node=node2 nic=rdma0 evidence=node2#3")
	}
	for i, w := range words {
		key, val, ok := strings.Cut(w, "=")
		if !ok || val == "" {
			return d, fmt.Errorf("word %d %q: want key=value", i+1, w)
		}
		switch key {
		case "class":
			if _, ok := scenarios.ClassByID(val); !ok {
				return d, fmt.Errorf("word %d: unknown fault class %q (see `commlab lab classes`)", i+1, val)
			}
			d.Class = val
		case scenarios.WhereNode, scenarios.WhereNIC, scenarios.WhereGPU, scenarios.WherePort:
			if _, dup := d.Location[key]; dup {
				return d, fmt.Errorf("word %d: %s given twice", i+1, key)
			}
			d.Location[key] = val
		case "evidence":
			for _, ref := range strings.Split(val, ",") {
				term, seq, ok := strings.Cut(ref, "#")
				n, err := strconv.Atoi(seq)
				if !ok || term == "" || err != nil || n < 1 {
					return d, fmt.Errorf("word %d: evidence %q: want TERMINAL#N, e.g. node2#3 (the command number shown by `history`)", i+1, ref)
				}
				d.Evidence = append(d.Evidence, EvidenceRef{Terminal: term, Seq: n})
			}
		default:
			id, ok := strings.CutPrefix(key, "estimate.")
			x, err := strconv.ParseFloat(val, 64)
			switch {
			case !ok:
				return d, fmt.Errorf("word %d: unknown key %q (want class, node, nic, gpu, port, evidence or estimate.ID)", i+1, key)
			case err != nil:
				return d, fmt.Errorf("word %d: %s=%q: want a number, e.g. %s=2350", i+1, key, val, key)
			}
			if d.Estimates == nil {
				d.Estimates = map[string]float64{}
			}
			d.Estimates[id] = x
		}
	}
	if d.Class == "" {
		return d, fmt.Errorf("no class=: name the fault class")
	}
	return d, nil
}
