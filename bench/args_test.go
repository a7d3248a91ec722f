package bench

import (
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	o, p, err := ParseArgs([]string{"all_reduce", "-b", "1M", "-e", "8M", "-f", "2", "-n", "4", "--hosts", "node1:2,node2:1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Coll != "all_reduce" || o.MinBytes != 1<<20 || o.MaxBytes != 8<<20 || o.StepFactor != 2 || o.Iters != 4 || o.NRanks() != 3 || p.Hosts != "node1:2,node2:1" {
		t.Errorf("parsed %+v %+v", o, p)
	}
	if o, _, _ := ParseArgs([]string{"broadcast", "-b", "64M"}); o.MaxBytes != 64<<20 {
		t.Errorf("-b alone: max bytes %d, want it raised to the minimum", o.MaxBytes)
	}
	for _, tt := range []struct {
		argv []string
		want string
	}{
		{nil, "name a collective"},
		{[]string{"all_to_everyone"}, "all_to_everyone"},
		{[]string{"all_reduce", "-b", "8M", "-e", "1M"}, "-e"},
		{[]string{"all_reduce", "-b", "lots"}, "-b"},
		{[]string{"all_reduce", "--hosts", "node1:x"}, "node1:x"},
		{[]string{"all_reduce", "--frobnicate"}, "frobnicate"},
		{[]string{"all_reduce", "reduce"}, "one collective"},
		{[]string{"all_reduce", "--train", "-3"}, "--train -3"},
		{[]string{"all_reduce", "--train", "20000"}, "--train 20000"},
		{[]string{"all_reduce", "--buckets", "4"}, "add --train N"},
		{[]string{"all_reduce", "--train", "5", "--buckets", "65"}, "--buckets 65"},
		{[]string{"all_reduce", "--train", "5", "--compute-ms", "-1"}, "--compute-ms -1"},
	} {
		if _, _, err := ParseArgs(tt.argv); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error mentioning %q", tt.argv, err, tt.want)
		}
	}
}
