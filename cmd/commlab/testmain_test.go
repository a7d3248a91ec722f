package main

import (
	"os"
	"strings"
	"testing"

	"github.com/commlab/commlab/internal/testenv"
)

// TestMain lets this test binary stand in for commlab when a test's lab re-executes
// it (os.Executable): ranks run "commlab bench rank", the injector its helpers. go
// test passes only -test.* flags; any other first argument is a commlab command.
// Without this, each re-execution would run the whole test suite again, and every
// lab it started would start more.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		main()
		os.Exit(0)
	}
	testenv.Main(m)
}
