package scenarios

import (
	"math"
	"strings"
	"testing"
)

// estimatesYAML is an estimates block for good.yaml (params node, rate 40-120).
func estimatesYAML(lines ...string) string {
	return "estimates:\n" + strings.Join(lines, "\n") + "\nhints:"
}

const rateEstimate = "  - {id: link-rate, describe: 瓶颈链路的速率, unit: Mbit/s, truth: 'rate * 1.0', under: 0.2, over: 0.1}"

// TestEstimates: an estimate's range follows its truth expression over the drawn
// parameters, and each mistake in one is reported at its file:line.
func TestEstimates(t *testing.T) {
	s, probs := Parse("e.yaml", []byte(strings.Replace(good(t), "hints:", estimatesYAML(rateEstimate), 1)), testOpts)
	if len(probs) > 0 {
		t.Fatalf("problems:\n%v", probs)
	}
	lo, hi, err := (&Variant{Scenario: s, Values: map[string]string{"node": "node1", "rate": "50"}}).EstimateRange(s.Estimates[0])
	if err != nil || math.Abs(lo-40) > 1e-9 || math.Abs(hi-55) > 1e-9 {
		t.Errorf("range at rate 50: [%v, %v], %v; want [40, 55]", lo, hi, err)
	}
	for _, tc := range []struct {
		name, block, want string
	}{
		{"unknown param", "  - {id: ab, describe: x, unit: µs, truth: 'delay * 1000', under: 0.2, over: 0.2}", "39:44: estimate ab: truth \"delay * 1000\": unknown name delay"},
		{"not a number", "  - {id: ab, describe: x, unit: µs, truth: '\"fast\"', under: 0.2, over: 0.2}", "not a number"},
		{"zero in a variant", "  - {id: ab, describe: x, unit: µs, truth: 'rate - 40', under: 0.2, over: 0.2}", "want a positive number"},
		{"no over", "  - {id: ab, describe: x, unit: µs, truth: rate}", "39:5: estimate ab: under is a fraction"},
		{"no unit", "  - {id: ab, describe: x, truth: rate, over: 1}", "estimate ab needs describe, unit and truth"},
		{"duplicate id", rateEstimate + "\n" + rateEstimate, "40:10: estimate id \"link-rate\""},
		{"describe reveals", "  - {id: ab, describe: '约 ${rate}', unit: x, truth: rate, over: 1}", "may not use ${param}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, probs := Parse("e.yaml", []byte(strings.Replace(good(t), "hints:", estimatesYAML(tc.block), 1)), testOpts)
			if !strings.Contains(probs.Error(), tc.want) {
				t.Errorf("problems %q do not say %q", probs.Error(), tc.want)
			}
		})
	}
}
