package bench

import (
	"strings"
	"testing"
)

func TestParseSplit(t *testing.T) {
	for _, tc := range []struct {
		mask, split string
		colors      []int  // of ranks 0..3
		err         string // part of the error; "" for none
	}{
		{colors: []int{0, 0, 0, 0}},
		{mask: "0x1", colors: []int{0, 1, 0, 1}},
		{mask: "2", colors: []int{0, 0, 2, 2}},
		{mask: "0x2", split: "MOD 2", colors: []int{0, 0, 2, 2}}, // the mask wins, as in nccl-tests
		{split: "AND 0x1", colors: []int{0, 1, 0, 1}},
		{split: "&1", colors: []int{0, 1, 0, 1}},
		{split: "or 1", colors: []int{1, 1, 3, 3}},
		{split: "MOD 2", colors: []int{0, 1, 0, 1}},
		{split: "%2", colors: []int{0, 1, 0, 1}},
		{split: "DIV 2", colors: []int{0, 0, 1, 1}},
		{split: "/ 2", colors: []int{0, 0, 1, 1}},
		{split: "AND 0b10", colors: []int{0, 0, 2, 2}},
		{mask: "0xg", err: "hexadecimal"},
		{split: "XOR 1", err: "want AND, OR, MOD or DIV"},
		{split: "AND", err: "want AND"},
		{split: "DIV 0", err: "DIV by 0"},
	} {
		env := map[string]string{"NCCL_TESTS_SPLIT_MASK": tc.mask, "NCCL_TESTS_SPLIT": tc.split}
		s, err := ParseSplit(func(k string) string { return env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("mask %q split %q: error %v, want one saying %q", tc.mask, tc.split, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("mask %q split %q: %v", tc.mask, tc.split, err)
			continue
		}
		for r, want := range tc.colors {
			if got := s.Color(r); got != want {
				t.Errorf("mask %q split %q: rank %d color %d, want %d", tc.mask, tc.split, r, got, want)
			}
		}
	}
}

// TestCommSplit: each rank keeps the ranks of its color in world order, numbered
// from 0, and each split communicator gets an id of its own.
func TestCommSplit(t *testing.T) {
	world := []rankInfo{{Rank: 0, Color: 0}, {Rank: 1, Color: 1}, {Rank: 2, Color: 0}, {Rank: 3, Color: 1}}
	ids := map[uint64]int{}
	for _, me := range world {
		c := &Comm{WorldRank: me.Rank, NRanks: 4, world: world, id: 42}
		c.split(me.Color)
		var members []int
		for _, r := range c.info {
			members = append(members, r.Rank)
		}
		want := map[int][]int{0: {0, 2}, 1: {1, 3}}[me.Color]
		if c.NRanks != 2 || c.Rank != me.Rank/2 || len(members) != 2 || members[0] != want[0] || members[1] != want[1] {
			t.Errorf("world rank %d: rank %d of %d, members %v; want rank %d of 2, members %v", me.Rank, c.Rank, c.NRanks, members, me.Rank/2, want)
		}
		ids[c.id] |= 1 << me.Color
	}
	if len(ids) != 2 || ids[42] != 0 {
		t.Errorf("ids by color %v: want two, neither the world's", ids)
	}
	c := &Comm{WorldRank: 1, world: world[:2], id: 42}
	c.world[0].Color, c.world[1].Color = 0, 0
	c.split(0)
	if c.id != 42 || c.NRanks != 2 || c.Rank != 1 {
		t.Errorf("no split: id %d rank %d of %d, want the world's id 42, rank 1 of 2", c.id, c.Rank, c.NRanks)
	}
}
