package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/labs/session"
)

// BenchmarkTerminalEcho measures keystroke-to-echo latency through the websocket
// terminal (browser protocol, server, PTY, bash and back) with 1 and 100 terminals
// open and typing at once, and the time from "start lab" to a terminal that echoes.
// Targets: p99 echo < 20 ms at 100 terminals; terminal ready < 2 s.
func BenchmarkTerminalEcho(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("terminals=%d", n), func(b *testing.B) {
			benchEcho(b, n)
		})
	}
}

func benchEcho(b *testing.B, terminals int) {
	// The terminal path alone: no background workloads competing for the two cores.
	hs, mgr, _ := labServer(b, func(c *session.Config) { c.NoStream = true })
	users := (terminals + 1) / 2 // the lab has two nodes, so two terminals a learner
	type conn struct {
		ws   *websocket.Conn
		recv chan []byte
	}
	var (
		conns  []*conn
		ready  []time.Duration
		mu     sync.Mutex
		wg     sync.WaitGroup
		errs   = make(chan error, users)
		header = http.Header{}
	)
	for u := 0; u < users; u++ {
		wg.Add(1)
		go func(u int) {
			defer wg.Done()
			c := newSessionClient(b, hs.URL, fmt.Sprintf("bench%d@example.com", u))
			tok := csrfOf(b, c, hs.URL+"/labs/ch01-tour")
			start := time.Now()
			resp, err := c.PostForm(hs.URL+"/labs/ch01-tour/start", url.Values{"csrf_token": {tok}})
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			labID := strings.TrimPrefix(resp.Request.URL.Path, "/lab/")
			var l *session.Lab
			for _, x := range mgr.All() {
				if x.ID == labID {
					l = x
				}
			}
			for l != nil && l.Status().State == session.Starting {
				time.Sleep(20 * time.Millisecond)
			}
			for i, node := range []string{"node1", "node2"} {
				if 2*u+i >= terminals {
					break
				}
				ws, err := dialTerminal(hs.URL, c, labID, node, header)
				if err != nil {
					errs <- err
					return
				}
				cn := &conn{ws: ws, recv: make(chan []byte, 1024)}
				go func() {
					for {
						_, p, err := ws.ReadMessage()
						if err != nil {
							close(cn.recv)
							return
						}
						cn.recv <- p
					}
				}()
				if err := echo(cn.ws, cn.recv, "r"); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if i == 0 {
					ready = append(ready, time.Since(start))
				}
				conns = append(conns, cn)
				mu.Unlock()
			}
		}(u)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	// Every terminal types one key per round; each measures its own echo.
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rmu sync.Mutex
		var rwg sync.WaitGroup
		for _, cn := range conns {
			rwg.Add(1)
			go func(cn *conn) {
				defer rwg.Done()
				t0 := time.Now()
				if err := echo(cn.ws, cn.recv, "x"); err != nil {
					b.Error(err)
					return
				}
				rmu.Lock()
				lat = append(lat, time.Since(t0))
				rmu.Unlock()
			}(cn)
		}
		rwg.Wait()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	sort.Slice(ready, func(i, j int) bool { return ready[i] < ready[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-echo-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-echo-ms")
	}
	if len(ready) > 0 {
		b.ReportMetric(float64(ready[len(ready)/2].Milliseconds()), "p50-ready-ms")
		b.ReportMetric(float64(ready[len(ready)-1].Milliseconds()), "max-ready-ms")
	}
	for _, cn := range conns {
		cn.ws.Close()
	}
	for _, l := range mgr.All() {
		l.Stop()
	}
}

// echo types s and waits until it comes back.
func echo(ws *websocket.Conn, recv <-chan []byte, s string) error {
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(s)); err != nil {
		return err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p, ok := <-recv:
			if !ok {
				return fmt.Errorf("terminal closed")
			}
			if strings.Contains(string(p), s) {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no echo of %q in 10 s", s)
		}
	}
}

func dialTerminal(base string, c *http.Client, labID, node string, h http.Header) (*websocket.Conn, error) {
	u, _ := url.Parse(base)
	h = h.Clone()
	var cookies []string
	for _, ck := range c.Jar.Cookies(u) {
		cookies = append(cookies, ck.Name+"="+ck.Value)
	}
	h.Set("Cookie", strings.Join(cookies, "; "))
	h.Set("Origin", base)
	ws, _, err := websocket.DefaultDialer.DialContext(context.Background(), "ws"+strings.TrimPrefix(base, "http")+"/lab/"+labID+"/term/"+node+"/ws", h)
	return ws, err
}
