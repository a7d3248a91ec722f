package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
)

// --train N runs N steps of a small data-parallel training loop before the sweep,
// as a job under PyTorch DDP does: each rank computes its gradient on its own data,
// the gradients (and the loss) are summed by all_reduce over the same transports and
// channels as the benchmark, and every rank applies the same update. Rank 0 prints
// the loss of each step. Bytes damaged on a link reach the gradients as they reach a
// real job's: a flipped mantissa bit goes unnoticed, a flipped exponent bit sends the
// loss to inf or nan, and nothing reports an error.

// trainParams is the model size: 128 Ki float parameters, 512 KiB of gradients a step.
const trainParams = 1 << 17

// trainLR is the learning rate of the plain SGD update.
const trainLR = 0.2

// target is rank r's data for parameter i: a value shared by all ranks plus a small
// per-rank part, so the loss falls towards a floor (the ranks' disagreement) as
// training converges.
func target(seed uint64, r, i int) float32 {
	shared := float32(genValue(seed, 0, i)) / 64      // in [-1, 1]
	own := float32(genValue(seed, r+1, i)) / 64 * 0.1 // in [-0.1, 0.1]
	return shared + own
}

// trainer is one rank's model and data.
type trainer struct{ w, t []float32 }

func newTrainer(seed uint64, rank int) *trainer {
	tr := &trainer{w: make([]float32, trainParams), t: make([]float32, trainParams)}
	for i := range tr.t {
		tr.t[i] = target(seed, rank, i)
	}
	return tr
}

// gradient writes this rank's gradient into buf, one float per parameter, and its
// loss (mean squared distance to its targets) after them. The gradient of the
// squared distance is 2(w-t); the 2 is folded into the learning rate.
func (tr *trainer) gradient(buf []byte) {
	var loss float32
	for i, wi := range tr.w {
		d := wi - tr.t[i]
		loss += d * d
		le.PutUint32(buf[4*i:], math.Float32bits(d))
	}
	le.PutUint32(buf[4*trainParams:], math.Float32bits(loss/trainParams))
}

// update applies the sum of nranks gradients in buf, as every rank does after the
// all_reduce, and returns the global loss of the step.
func (tr *trainer) update(buf []byte, nranks int) float32 {
	nr := float32(nranks)
	for i := range tr.w {
		tr.w[i] -= trainLR * math.Float32frombits(le.Uint32(buf[4*i:])) / nr
	}
	return math.Float32frombits(le.Uint32(buf[4*trainParams:])) / nr
}

func finite(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// maxBuckets bounds --buckets: each bucket is at least a few KiB of the 512 KiB.
const maxBuckets = 64

// train runs the loop. Like a job without a finiteness check it carries on through
// inf and nan; it returns how many steps ended with a loss that is not finite.
//
// With --compute-ms the step has a backward pass: the emulated GPU is busy for that
// long (the rank sleeps, as a CPU waits for a GPU kernel; no CPU is used), and the
// gradient is cut into --buckets equal buckets, each ready after its share of the
// pass. As under DDP, a bucket's all_reduce starts as soon as it is ready, in order,
// on a communication goroutine (NCCL's stream), so communication hides behind the
// rest of the pass; what is left after the pass ends is the exposed communication.
func (b *benchRun) train(ctx context.Context, steps int) (int, error) {
	c := b.comm
	tr := newTrainer(b.seed, c.Rank)
	buf := make([]byte, (trainParams+1)*4) // the last element carries the loss
	nb := max(b.o.Buckets, 1)
	compute := time.Duration(b.o.ComputeMS) * time.Millisecond
	bad := 0
	for step := 1; step <= steps; step++ {
		tr.gradient(buf)
		start := time.Now()
		st, err := b.backward(ctx, step, buf, nb, compute)
		if err != nil {
			return bad, fmt.Errorf("training step %d: %w", step, err)
		}
		took := time.Since(start)
		loss := tr.update(buf, c.NRanks)
		if !finite(loss) {
			bad++
		}
		if c.WorldRank != 0 {
			continue
		}
		if compute == 0 {
			fmt.Fprintf(b.out, "step %4d/%d | loss %s | allreduce %.2f ms\n", step, steps, lossString(loss), ms(took))
			continue
		}
		fmt.Fprintf(b.out, "step %4d/%d | loss %s | backward %.1f ms | allreduce %.1f ms in %d buckets | exposed %.1f ms | step %.1f ms\n",
			step, steps, lossString(loss), ms(st.backward), ms(st.comm), nb, ms(took-st.backward), ms(took))
	}
	return bad, nil
}

// stepTimes is where one step's time went: the backward pass, and the time the
// buckets' all_reduce calls ran (summed; they overlap the pass, not each other).
type stepTimes struct{ backward, comm time.Duration }

// backward runs one step's backward pass and the buckets' all_reduce calls, and
// returns when the last bucket is reduced.
func (b *benchRun) backward(ctx context.Context, step int, buf []byte, nb int, compute time.Duration) (stepTimes, error) {
	c := b.comm
	elems := len(buf) / 4
	ready := make(chan int, nb)
	done := make(chan error, 1)
	var st stepTimes
	go func() {
		for i := range ready {
			lo, hi := elems*i/nb, elems*(i+1)/nb
			part := buf[4*lo : 4*hi]
			start := time.Now()
			k := call{coll: AllReduce, t: Float32, op: Sum, root: -1, count: hi - lo, send: part, recv: part, algo: c.env.Algo}
			if err := c.run(ctx, k); err != nil {
				done <- err
				return
			}
			st.comm += time.Since(start)
			b.rec.Add(string(AllReduce), "train", start, map[string]any{"bytes": len(part), "step": step, "bucket": i})
		}
		done <- nil
	}()
	start := time.Now()
	for i := range nb {
		if compute > 0 {
			t0 := time.Now()
			t := time.NewTimer(compute*time.Duration(i+1)/time.Duration(nb) - time.Since(start))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				close(ready)
				<-done
				return st, ctx.Err()
			case err := <-done: // a bucket failed: stop the pass
				t.Stop()
				close(ready)
				return st, err
			}
			b.rec.AddOn("compute", "backward", "train", t0, map[string]any{"step": step, "bucket": i})
		}
		ready <- i
	}
	close(ready)
	st.backward = time.Since(start)
	err := <-done
	return st, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lossString prints a loss as Python prints a float: nan and inf spelled so.
func lossString(v float32) string {
	switch {
	case math.IsNaN(float64(v)):
		return "nan"
	case math.IsInf(float64(v), 1):
		return "inf"
	case math.IsInf(float64(v), -1):
		return "-inf"
	}
	return strconv.FormatFloat(float64(v), 'g', 6, 32)
}
