package web_test

import (
	"testing"

	"github.com/commlab/commlab/internal/testenv"
)

// TestMain closes the package's Chromium and removes the commlab binary the labs
// ran (testenv.Commlab).
func TestMain(m *testing.M) { testenv.Main(m, closeChromium) }
