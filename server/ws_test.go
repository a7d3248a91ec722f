package server

import (
	"context"
	"testing"
	"time"
)

// TestInputPacer: after a burst, input waits for the rate instead of flowing on.
func TestInputPacer(t *testing.T) {
	p := newInputPacer()
	if err := p.wait(context.Background(), termInputBurst); err != nil {
		t.Fatal(err)
	}
	if p.l.AllowN(time.Now(), termInputRate/2) {
		t.Errorf("%d more bytes allowed right after a burst of %d; want them paced at %d B/s", termInputRate/2, termInputBurst, termInputRate)
	}
	// A frame larger than the burst is paced in pieces, not refused.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newInputPacer().wait(ctx, 3*termInputBurst); err == nil {
		t.Error("wait with a cancelled context returned nil")
	}
}
