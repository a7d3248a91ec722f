package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestTrainOverlap runs the training loop on two ranks with a 300 ms backward pass:
// in 4 buckets, the first bucket's all_reduce starts while the pass is still running
// (75 ms into it, by construction); in 1 bucket, only after the pass ends. The trace
// shows the pass on a "rank N compute" thread of its own. Only bounds that a timer
// guarantees are checked, never speeds.
func TestTrainOverlap(t *testing.T) {
	stepRE := regexp.MustCompile(`(?m)^step +\d+/2 \| loss \S+ \| backward ([\d.]+) ms \| allreduce ([\d.]+) ms in (\d+) buckets \| exposed ([\d.]+) ms \| step ([\d.]+) ms$`)
	for _, tc := range []struct {
		buckets int
		overlap bool // the first bucket's all_reduce starts before the pass ends
	}{{4, true}, {1, false}} {
		t.Run(fmt.Sprint(tc.buckets), func(t *testing.T) {
			t.Parallel()
			o := smallOpts(AllReduce, "a:1,b:1")
			o.MinBytes, o.MaxBytes, o.Train, o.ComputeMS, o.Buckets = 8, 8, 2, 300, tc.buckets
			o.Trace = filepath.Join(t.TempDir(), "trace.json")
			out, errOut, err := launch(t, o)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errOut)
			}
			steps := stepRE.FindAllStringSubmatch(out, -1)
			if len(steps) != 2 {
				t.Fatalf("want 2 step lines, got:\n%s", out)
			}
			for _, m := range steps {
				back, _ := strconv.ParseFloat(m[1], 64)
				exposed, _ := strconv.ParseFloat(m[4], 64)
				step, _ := strconv.ParseFloat(m[5], 64)
				if back < 300 || m[3] != fmt.Sprint(tc.buckets) || math.Abs(step-back-exposed) > 0.15 {
					t.Errorf("step line %q: want backward >= 300 ms, %d buckets, step = backward + exposed", m[0], tc.buckets)
				}
			}
			b, err := os.ReadFile(o.Trace)
			if err != nil {
				t.Fatal(err)
			}
			var tr struct {
				TraceEvents []struct {
					Name string         `json:"name"`
					Ph   string         `json:"ph"`
					TID  int            `json:"tid"`
					TS   float64        `json:"ts"`
					Dur  float64        `json:"dur"`
					Args map[string]any `json:"args"`
				} `json:"traceEvents"`
			}
			if err := json.Unmarshal(b, &tr); err != nil {
				t.Fatal(err)
			}
			// Rank 1's first step: the pass (thread 1001) and the buckets (thread 1).
			var passStart, passEnd, firstAR float64 = -1, 0, -1
			var names []string
			for _, e := range tr.TraceEvents {
				if e.Ph == "M" && e.TID == 1001 {
					names = append(names, e.Args["name"].(string))
				}
				if e.Ph != "X" || e.Args["step"] != 1.0 {
					continue
				}
				switch {
				case e.TID == 1001 && e.Name == "backward":
					if passStart < 0 || e.TS < passStart {
						passStart = e.TS
					}
					passEnd = max(passEnd, e.TS+e.Dur)
				case e.TID == 1 && e.Name == "all_reduce" && e.Args["bucket"] == 0.0:
					firstAR = e.TS
				}
			}
			if fmt.Sprint(names) != "[rank 1 compute]" || passStart < 0 || firstAR < 0 {
				t.Fatalf("trace lacks rank 1's compute thread, its backward slices or its first bucket (thread names %q):\n%s", names, b)
			}
			if overlap := firstAR < passEnd; overlap != tc.overlap || passEnd-passStart < 300e3 {
				t.Errorf("pass %.0f to %.0f µs, first all_reduce at %.0f µs: overlap %v, want %v", passStart, passEnd, firstAR, overlap, tc.overlap)
			}
		})
	}
}
