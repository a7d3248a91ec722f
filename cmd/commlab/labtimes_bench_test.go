package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"
)

// BenchmarkLabTimes starts every namespace lab of the catalog once and prints, per lab,
// the time from the start to the learner's shells (the prompt), to scoring confirmed
// (baseline, fault and self-test done, while the learner already works), and of a
// grading of the right but unfixed answer (the re-measure included), then the p95 of
// each. A table for `make bench` (scripts/bench-labs.sh runs it, with a timeout of its
// own: it takes minutes); no figure here is asserted.
func BenchmarkLabTimes(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("labs need root")
	}
	if os.Getenv("COMMLAB_LAB_TIMES") == "" {
		b.Skip("set COMMLAB_LAB_TIMES=1 (scripts/bench-labs.sh does)")
	}
	ct, probs := loadContent("")
	if len(probs) > 0 {
		b.Fatal(probs)
	}
	exe := os.Getenv("COMMLAB_EXE")
	if exe == "" {
		exe = filepath.Join(b.TempDir(), "commlab")
		if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
			b.Fatalf("build commlab: %v\n%s", err, out)
		}
	}
	data := b.TempDir()
	log := slog.New(slog.DiscardHandler)
	inj, err := backend.OpenInjector(injector.Options{DataDir: data, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	cfg := session.Config{Provider: backend.Local{DataDir: data, Exe: exe, Log: log}, Faults: backend.Faults{In: inj},
		DataDir: data, TTL: 10 * time.Minute, Log: log, NoStream: true}
	var prompts, confirms, grades []time.Duration
	for i := 0; i < b.N; i++ {
		fmt.Printf("%-30s %10s %12s %10s  %s\n", "lab", "to prompt", "to confirmed", "grading", "note")
		for _, sc := range ct.scenarios.All() {
			if sc.Environment.Kind == "gpu" {
				continue
			}
			v := sc.Draw(uint64(i))
			t0 := time.Now()
			l := session.Start(context.Background(), cfg, 1, v)
			var prompt, confirmed time.Duration
			for confirmed == 0 && l.Running() {
				st := l.Status()
				if prompt == 0 && len(st.Nodes) > 0 {
					prompt = time.Since(t0)
				}
				if st.Confirmed {
					confirmed = time.Since(t0)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if confirmed == 0 {
				fmt.Printf("%-30s %10s %12s %10s  %s\n", sc.ID, ms(prompt), "-", "-", "not scored: "+l.Status().Failure)
				l.Stop()
				l.Wait()
				continue
			}
			t1 := time.Now()
			_, err := l.Grade(context.Background(), grader.Diagnosis{Class: sc.Diagnosis.Class, Location: v.Location()})
			grade := time.Since(t1)
			note := ""
			if err != nil {
				note = "grade: " + err.Error()
			}
			fmt.Printf("%-30s %10s %12s %10s  %s\n", sc.ID, ms(prompt), ms(confirmed), ms(grade), note)
			l.Wait()
			prompts, confirms, grades = append(prompts, prompt), append(confirms, confirmed), append(grades, grade)
		}
	}
	fmt.Printf("%-30s %10s %12s %10s\n", "p95", ms(p95(prompts)), ms(p95(confirms)), ms(p95(grades)))
	b.ReportMetric(float64(p95(prompts).Milliseconds()), "p95-ms-to-prompt")
	b.ReportMetric(float64(p95(grades).Milliseconds()), "p95-ms-to-grade")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func p95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*95+99)/100-1]
}
