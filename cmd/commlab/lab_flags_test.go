package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabUpRefusesBadInput: every bad flag or file fails before anything is
// built, with an error naming what is wrong; nothing is left in the data dir.
func TestLabUpRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"/dev/zero"}, "/dev/zero: not a regular file"},
		{[]string{"2x1", "--pids", "-5"}, "--pids -5"},
		{[]string{"2x1", "--pids", "1"}, "pids 1: want 64"},
		{[]string{"2x1", "--cpus", "-1"}, "--cpus -1"},
		{[]string{"2x1", "--cpus", "1000"}, "cpus 1000: want more than 0 and at most"},
		{[]string{"2x1", "--ttl", "-1h"}, "--ttl -1h0m0s"},
		{[]string{"2x1", "--ttl", "1ns"}, "--ttl 1ns: want 1m0s"},
		{[]string{"2x1", "--ttl", "9000h"}, "--ttl 9000h0m0s"},
		{[]string{"2x1", "--memory", "1B"}, "memory 1 bytes: want 128 MiB"},
		{[]string{"2x1", "--memory", "999TiB"}, "memory 1098412116148224 bytes"},
		{[]string{"2x1", "--home-size", "1B"}, "home size 1 bytes: want 1 MiB"},
		{[]string{"2x1", "--home-size", "999TiB"}, "home size 1098412116148224 bytes"},
		{[]string{"2x1", "--memory", "-2GiB"}, `--memory "-2GiB"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			data := t.TempDir()
			done := make(chan struct{})
			var out string
			var err error
			go func() { out, err = labCLI(t, data, append([]string{"up"}, tt.args...)...); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("lab up did not return")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("lab up %v = %v\n%s; want an error with %q", tt.args, err, out, tt.want)
			}
			if left, _ := filepath.Glob(filepath.Join(data, "*", "*")); len(left) > 0 {
				t.Errorf("left in the data dir: %v", left)
			}
			_ = os.RemoveAll(data)
		})
	}
}
