package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/labs/session"
)

// TestWebsocketReadLimits: an oversized frame on the chart or a terminal socket
// closes that socket with 1009 (message too big) instead of being buffered, and
// the lab's terminals keep working.
func TestWebsocketReadLimits(t *testing.T) {
	hs, mgr, _ := labServer(t, func(c *session.Config) { c.NoStream = true })
	c := newSessionClient(t, hs.URL, "wsflood@example.com")
	tok := csrfOf(t, c, hs.URL+"/labs/ch01-tour")
	resp, err := c.PostForm(hs.URL+"/labs/ch01-tour/start", url.Values{"csrf_token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	labID := strings.TrimPrefix(resp.Request.URL.Path, "/lab/")
	for _, l := range mgr.All() {
		for l.ID == labID && l.Status().State == session.Starting {
			time.Sleep(20 * time.Millisecond)
		}
	}
	dial := func(path string) *websocket.Conn {
		t.Helper()
		u, _ := url.Parse(hs.URL)
		var cookies []string
		for _, ck := range c.Jar.Cookies(u) {
			cookies = append(cookies, ck.Name+"="+ck.Value)
		}
		h := http.Header{"Cookie": {strings.Join(cookies, "; ")}, "Origin": {hs.URL}}
		ws, _, err := websocket.DefaultDialer.DialContext(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/lab/"+labID+path, h)
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	for _, tc := range []struct {
		path string
		size int
	}{
		{"/metrics/ws", 4 << 10},
		{"/term/node1/ws", 4 << 20},
	} {
		t.Run(tc.path, func(t *testing.T) {
			ws := dial(tc.path)
			_ = ws.WriteMessage(websocket.BinaryMessage, make([]byte, tc.size))
			_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
			for {
				_, _, err := ws.ReadMessage()
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					if ce.Code != websocket.CloseMessageTooBig {
						t.Errorf("closed with %d, want %d (message too big)", ce.Code, websocket.CloseMessageTooBig)
					}
					return
				}
				if err != nil {
					t.Fatalf("a %d-byte frame: %v, want a close frame 1009", tc.size, err)
				}
			}
		})
	}
	ws := dial("/term/node1/ws")
	recv := make(chan []byte, 1024)
	go func() {
		defer close(recv)
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				return
			}
			recv <- p
		}
	}()
	if err := echo(ws, recv, "still-here"); err != nil {
		t.Errorf("a terminal after the floods: %v", err)
	}
}
