package chapters

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	clhost "github.com/commlab/commlab/internal/host"
)

// TestLabCh19Tune plays chapter 19's tuning lab: nothing is injected; the job template
// caps the ring at one channel (NCCL_MAX_NCHANNELS=1), so one of four data NICs
// carries the job. The learner reads the cap in train.log and tunes in ~/job.env. A
// lower bound alone (the emulation keeps the cap) and the popular socket-count lines
// earn no remediation; lifting the cap to one channel per NIC beats the start by the
// lab's 1.5×. The sandbox, and ~/job.env with it, is gone after the lab.
func TestLabCh19Tune(t *testing.T) {
	PlaySeeds(t, "ch19-tune-channels", []uint64{19}, func(lr *Learner) Verdicts {
		sandbox := lr.Lab.Status().Sandbox
		t := lr.T
		t.Cleanup(func() { // before StartLab's: the teardown must leave nothing
			lr.Lab.Stop()
			lr.Lab.Wait()
			for _, p := range []string{
				filepath.Join(clhost.LabsRunDir, clhost.Prefix+sandbox),
				filepath.Join("/run/netns", clhost.Prefix+sandbox+"-node1"),
				filepath.Join("/run/netns", clhost.Prefix+sandbox+"-node2"),
			} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("left behind after the lab: %s (%v)", p, err)
				}
			}
		})

		capped := lr.PollEvidence("node1", "grep -h 'set by environment' train.log | tail -n 8", 60, 2*time.Second)
		ring := lr.PollEvidence("node1", "grep -h 'Channel 00/01 :' train.log | tail -n 1", 30, 2*time.Second)
		bw := lr.Run("node1", "grep -h 'Avg bus' train.log")
		devs := lr.Run("node1", "grep -h 'NET/Socket : Using' train.log | tail -n 2")
		env := lr.Run("node1", "env | grep NCCL")

		// A lower bound alone: the emulation keeps the cap, one channel.
		lr.Run("node1", `printf 'NCCL_MIN_NCHANNELS=4\n' > ~/job.env`)
		lr.fixFails("NCCL_MIN_NCHANNELS=4 alone", capped)
		return Verdicts{
			Right:     Answer{"algo-proto-forced", Loc{"node": "node1"}},
			Counts:    []Ref{capped, ring},
			CountsNot: []Ref{bw, devs, env},
			WrongAt:   []Loc{{"node": "node2"}},
			WrongClass: []Answer{{Class: "wrong-interface"}, {Class: "transport-forced"},
				{Class: "nic-rate-limited", Loc: Loc{"node": "node1", "nic": "rdma0"}}},
			// The popular trap: 4 threads × 4 sockets per connection on a NIC-bound ring.
			BadFix: func() {
				lr.Run("node1", `printf 'NCCL_SOCKET_NTHREADS=4\nNCCL_NSOCKS_PERTHREAD=4\n' > ~/job.env`)
			},
			Fix: func() {
				lr.Run("node1", `printf '# one channel per data NIC\nNCCL_MAX_NCHANNELS=4\nNCCL_MIN_NCHANNELS=4\n' > ~/job.env`)
				lr.Expect("node1", "cat ~/job.env", "NCCL_MAX_NCHANNELS=4")
			},
		}
	})
}
