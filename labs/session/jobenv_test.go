package session

import (
	"slices"
	"strings"
	"testing"
)

func TestParseJobEnv(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
		errs     []string // each must appear in the error; nil: no error
	}{
		{name: "empty", in: "", want: []string{}},
		{name: "comments and blanks", in: "# tuning\n\n  NCCL_NSOCKS_PERTHREAD=4\nNCCL_SOCKET_NTHREADS=4\n",
			want: []string{"NCCL_NSOCKS_PERTHREAD=4", "NCCL_SOCKET_NTHREADS=4"}},
		{name: "later line wins, export tolerated", in: "NCCL_ALGO=Tree\nexport NCCL_ALGO=Ring\n",
			want: []string{"NCCL_ALGO=Ring"}},
		{name: "value keeps =", in: "NCCL_IB_HCA==rdma0:1\n", want: []string{"NCCL_IB_HCA==rdma0:1"}},
		{name: "LD_PRELOAD refused", in: "NCCL_ALGO=Ring\nLD_PRELOAD=/tmp/x.so\n",
			errs: []string{"job.env:2: LD_PRELOAD cannot be set here"}},
		{name: "debug file refused", in: "NCCL_DEBUG_FILE=/etc/passwd\n", errs: []string{"job.env:1: NCCL_DEBUG_FILE cannot"}},
		{name: "no expansion", in: "NCCL_SOCKET_IFNAME=$(id)\n", errs: []string{"job.env:1: NCCL_SOCKET_IFNAME: the value \"$(id)\" is taken literally"}},
		{name: "quotes refused", in: "NCCL_ALGO=\"Ring\"\n", errs: []string{"job.env:1: NCCL_ALGO"}},
		{name: "not a pair", in: "NCCL_ALGO\n", errs: []string{"job.env:1: want KEY=VALUE"}},
		{name: "empty value", in: "NCCL_ALGO=\n", errs: []string{"job.env:1: NCCL_ALGO: empty value"}},
		{name: "every bad line reported", in: "PATH=/tmp\nNCCL_ALGO=Ring\nFOO\n",
			errs: []string{"job.env:1: PATH", "job.env:3: want KEY=VALUE"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseJobEnv("job.env", []byte(c.in))
			if c.errs == nil {
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				if !slices.Equal(got, c.want) {
					t.Fatalf("got %q, want %q", got, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %q", got)
			}
			for _, e := range c.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q lacks %q", err, e)
				}
			}
		})
	}
}
