package nccl

import (
	"strings"
	"testing"
)

// TestTuningLines: NCCL_DEBUG_SUBSYS=TUNING lines name the algorithm and protocol by
// index up to 2.23 and by name from 2.24 (enqueue.cc); both read the same way.
func TestTuningLines(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       AlgoChoice
	}{
		{"2.23 indices", `host1:123:456 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo 1 proto 2 time 52.390999`,
			AlgoChoice{Coll: "AllReduce", Bytes: 4194304, Algo: "Ring", Proto: "Simple"}},
		{"2.24+ names", `host1:123:456 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}`,
			AlgoChoice{Coll: "AllReduce", Bytes: 4194304, Algo: "Ring", Proto: "Simple"}},
		{"2.24+ NVLS_TREE, LL128", `host1:123:456 [0] NCCL INFO AllReduce: 65536 Bytes -> Algo NVLS_TREE proto LL128 channel{Lo..Hi}={0..15}`,
			AlgoChoice{Coll: "AllReduce", Bytes: 65536, Algo: "NVLSTree", Proto: "LL128"}},
		{"an index NCCL does not have stays as printed", `host1:123:456 [0] NCCL INFO AllGather: 8 Bytes -> Algo 9 proto 0 time 1.0`,
			AlgoChoice{Coll: "AllGather", Bytes: 8, Algo: "9", Proto: "LL"}},
	} {
		l, err := Parse(strings.NewReader(c.line + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(l.Algos) != 1 || l.Algos[0] != c.want {
			t.Errorf("%s: got %+v, want [%+v]", c.name, l.Algos, c.want)
		}
	}
}
