package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// Split is nccl-tests' division of the job into communicators: every rank of one
// color joins one communicator (MPI_Comm_split by color, keyed by world rank), and
// all of them run the collective at once. nccl-tests reads NCCL_TESTS_SPLIT_MASK
// (since v2.13.4: color = rank & mask, the mask in hex) and, when that is unset,
// NCCL_TESTS_SPLIT (since v2.14.0: "AND n", "OR n", "MOD n", "DIV n" or "&", "|",
// "%", "/" before n, n decimal, 0x hex or 0b binary), both in src/common.cu. nccl-tests takes the
// MPI process rank; commlab runs one rank per process, so it is the rank.
type Split struct {
	Var string // the variable it came from, for messages; "" when none
	op  func(int, int) int
	n   int
}

// splitOps are NCCL_TESTS_SPLIT's operations, by word and by symbol.
var splitOps = []struct {
	word, sym string
	op        func(rank, n int) int
}{
	{"AND", "&", func(r, n int) int { return r & n }},
	{"OR", "|", func(r, n int) int { return r | n }},
	{"MOD", "%", func(r, n int) int { return r % n }},
	{"DIV", "/", func(r, n int) int { return r / n }},
}

// ParseSplit reads the split from the environment. Where nccl-tests would quietly
// fall back to color 0 (an unparsable value) or crash (MOD 0, DIV 0), it says why.
func ParseSplit(getenv func(string) string) (Split, error) {
	if v := getenv("NCCL_TESTS_SPLIT_MASK"); v != "" {
		m, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(v), "0x"), "0X"), 16, 31)
		if err != nil {
			return Split{}, fmt.Errorf("NCCL_TESTS_SPLIT_MASK=%q: want a hexadecimal mask such as 0x1", v)
		}
		return Split{Var: "NCCL_TESTS_SPLIT_MASK=" + v, op: splitOps[0].op, n: int(m)}, nil
	}
	v := getenv("NCCL_TESTS_SPLIT")
	if v == "" {
		return Split{}, nil
	}
	bad := fmt.Errorf("NCCL_TESTS_SPLIT=%q: want AND, OR, MOD or DIV (or &, |, %%, /) and a number, e.g. \"AND 0x1\" or \"DIV 2\"", v)
	for _, o := range splitOps {
		for _, p := range []string{o.word, o.sym} {
			if len(v) < len(p) || !strings.EqualFold(v[:len(p)], p) {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v[len(p):]), 0, 32)
			if err != nil || n < 0 {
				return Split{}, bad
			}
			if n == 0 && (o.word == "MOD" || o.word == "DIV") {
				return Split{}, fmt.Errorf("NCCL_TESTS_SPLIT=%q: %s by 0", v, o.word)
			}
			return Split{Var: "NCCL_TESTS_SPLIT=" + v, op: o.op, n: int(n)}, nil
		}
	}
	return Split{}, bad
}

// Color is the communicator a world rank joins: 0 for every rank without a split.
func (s Split) Color(rank int) int {
	if s.op == nil {
		return 0
	}
	return s.op(rank, s.n)
}
