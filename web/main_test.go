package web_test

import (
	"testing"

	"github.com/commlab/commlab/internal/testenv"
)

// TestMain removes the commlab binary the labs ran (testenv.Commlab).
func TestMain(m *testing.M) { testenv.Main(m) }
