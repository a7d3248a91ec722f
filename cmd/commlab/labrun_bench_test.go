package main

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"

	"github.com/commlab/commlab/internal/testenv"
)

// BenchmarkLabRun measures, for chapter 1's lab, the time from starting a lab to its
// task being shown (environment up, fault injected, shells open) and the grading
// latency (recordings parsed, diagnosis scored), one lab per iteration, with teardown.
func BenchmarkLabRun(b *testing.B) {
	testenv.RequireRoot(b, "lab sandboxes")
	ct, probs := loadContent("")
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	sc, _ := ct.scenarios.Get("ch01-tour")
	data := b.TempDir()
	log := slog.New(slog.DiscardHandler)
	inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable() // only for ranks; this lab's grading runs none
	if err != nil {
		b.Fatal(err)
	}
	cfg := session.Config{Provider: backend.Local{DataDir: data, Exe: exe, Log: log}, Faults: backend.Faults{In: inj},
		DataDir: data, TTL: 5 * time.Minute, Log: log, NoStream: true}
	var ready, grade time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		v := sc.Draw(uint64(i))
		l := session.Start(context.Background(), cfg, 1, v)
		for l.Status().State == session.Starting {
			time.Sleep(5 * time.Millisecond)
		}
		if st := l.Status(); st.State != session.Ready {
			b.Fatalf("lab: %+v", st)
		}
		ready += time.Since(t0)
		t1 := time.Now()
		res, err := l.Grade(context.Background(), grader.Diagnosis{Class: "nic-rate-limited", Location: v.Location()})
		if err != nil || res.Score == 0 {
			b.Fatalf("grade: %+v %v", res, err)
		}
		grade += time.Since(t1)
		l.Wait()
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-task")
	b.ReportMetric(float64(grade.Microseconds())/float64(b.N)/1000, "ms-to-grade")
}
