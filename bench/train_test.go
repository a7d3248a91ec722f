package bench

import (
	"math"
	"testing"
)

// allReduce sums the ranks' buffers element by element into every buffer, as the
// collective does.
func allReduce(bufs [][]byte) {
	for i := 0; i+4 <= len(bufs[0]); i += 4 {
		var s float32
		for _, b := range bufs {
			s += math.Float32frombits(le.Uint32(b[i:]))
		}
		for _, b := range bufs {
			le.PutUint32(b[i:], math.Float32bits(s))
		}
	}
}

// TestTrainingLoss: clean, the loss falls step by step towards the ranks'
// disagreement; one flipped exponent bit in one step's summed gradient (what the
// corrupt fault does on a link) makes every later loss inf or nan, while a flipped
// low mantissa bit goes unnoticed.
func TestTrainingLoss(t *testing.T) {
	const ranks, steps, damaged = 4, 12, 4
	for _, tc := range []struct {
		name   string
		bit    uint32 // 0: no damage
		finite bool   // every loss after the damage is finite
	}{
		{"clean", 0, true},
		{"mantissa bit 0", 1 << 0, true},
		{"exponent bit 30", 1 << 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trs := make([]*trainer, ranks)
			bufs := make([][]byte, ranks)
			for r := range trs {
				trs[r], bufs[r] = newTrainer(7, r), make([]byte, (trainParams+1)*4)
			}
			var losses []float32
			for step := 1; step <= steps; step++ {
				for r, tr := range trs {
					tr.gradient(bufs[r])
				}
				allReduce(bufs)
				if step == damaged && tc.bit != 0 {
					const elem = 1234
					for _, b := range bufs { // the damaged sum reaches every rank, as a ring's all-gather passes it on
						le.PutUint32(b[4*elem:], le.Uint32(b[4*elem:])^tc.bit)
					}
				}
				loss := trs[0].update(bufs[0], ranks)
				for r := 1; r < ranks; r++ {
					trs[r].update(bufs[r], ranks)
				}
				losses = append(losses, loss)
			}
			for i, l := range losses[:damaged] {
				if !finite(l) || (i > 0 && l >= losses[i-1]) {
					t.Fatalf("before the damage the loss must fall: %v", losses)
				}
			}
			after := losses[damaged:]
			allFinite := true
			for _, l := range after {
				allFinite = allFinite && finite(l)
			}
			if allFinite != tc.finite {
				t.Errorf("losses after step %d = %v: all finite %v, want %v", damaged, after, allFinite, tc.finite)
			}
			if tc.finite && after[len(after)-1] > losses[0]/10 {
				t.Errorf("the loss did not converge: %v", losses)
			}
		})
	}
}

func TestLossString(t *testing.T) {
	for _, tc := range []struct {
		v    float32
		want string
	}{
		{0.25, "0.25"}, {1.5e32, "1.5e+32"}, {0.0174339, "0.0174339"},
		{float32(math.NaN()), "nan"},
		{float32(math.Inf(1)), "inf"},
		{float32(math.Inf(-1)), "-inf"},
	} {
		if got := lossString(tc.v); got != tc.want {
			t.Errorf("lossString(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
