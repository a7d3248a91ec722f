package server

import (
	"context"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"
)

// Limits of every websocket the server opens. A frame over its socket's read
// limit closes the socket (1009), so one client cannot make the server buffer
// an arbitrary frame.
const (
	// wsTerminalReadLimit bounds one frame from a terminal: a keystroke, a paste
	// (xterm.js sends a paste as one frame) or a resize message.
	wsTerminalReadLimit = 256 << 10
	// wsChartReadLimit bounds one frame on the chart socket, which reads only to
	// notice the browser leaving.
	wsChartReadLimit = 512
	// Terminal input beyond a burst flows at this many bytes per second: far
	// above typing and pasting a script, far below flooding the learner's shell.
	termInputRate  = 64 << 10
	termInputBurst = wsTerminalReadLimit
	wsWriteTimeout = 10 * time.Second
)

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 32 << 10} // default CheckOrigin: same host only

// readUntilClosed reads (and drops) what the client sends on a socket that only
// writes, so that control frames are answered; the channel closes when the client
// leaves or the socket fails.
func readUntilClosed(ws *websocket.Conn) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	return gone
}

// upgradeWS upgrades the request with a read limit; on error the upgrader has
// answered already.
func upgradeWS(c *gin.Context, readLimit int64) (*websocket.Conn, error) {
	ws, err := upgrader.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(readLimit)
	return ws, nil
}

// inputPacer paces one terminal's input: wait blocks (so the socket backs up,
// nothing is dropped) until n more bytes may go to the shell.
type inputPacer struct{ l *rate.Limiter }

func newInputPacer() inputPacer {
	return inputPacer{rate.NewLimiter(termInputRate, termInputBurst)}
}

func (p inputPacer) wait(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, termInputBurst)
		if err := p.l.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
