package session

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/commlab/commlab/grader"
)

// AlertRulesFile is the learner's rules file, in their home, for a lab that measures
// alerting rules.
const AlertRulesFile = "alerts.yml"

// yamlAnchor finds a YAML anchor (&name) where a node can start.
var yamlAnchor = regexp.MustCompile(`(?m)(^|[\s\[{,:-])&[^\s\[\]{},]+`)

// MaxAlertRules caps how much of the learner's rules file is read.
const MaxAlertRules = 64 << 10

// LearnerFiles is an Env whose learner's home the server can read: the file is opened
// without following a link, must be a regular file, and is read up to max bytes (more
// is an error). A missing file is fs.ErrNotExist.
type LearnerFiles interface {
	LearnerFile(name string, max int64) ([]byte, error)
}

// ErrNoPromtool says this host cannot grade alerting rules.
var ErrNoPromtool = errors.New("this lab grades alerting rules with promtool (Prometheus 2.x), which is not installed on this server (Debian/Ubuntu: apt-get install prometheus)")

// Promtool finds promtool on PATH.
func Promtool() (string, error) {
	p, err := exec.LookPath("promtool")
	if err != nil {
		return "", ErrNoPromtool
	}
	return p, nil
}

// TestAlertRules runs rules (the learner's file) through promtool's rule unit tests in
// tests, one case per *.yaml file, each naming the rules alerts.yml. The rules must
// pass `promtool check rules` as written; then their annotations and every label but
// severity are dropped, since promtool compares an alert's labels and annotations
// exactly and the cases grade when an alert fires, not its wording. A Problem in the
// result is the learner's to fix; an error is the host's.
func TestAlertRules(ctx context.Context, promtool string, rules []byte, tests fs.FS) (grader.RulesRun, error) {
	cases, err := fs.Glob(tests, "*.yaml")
	if err != nil || len(cases) == 0 {
		return grader.RulesRun{}, fmt.Errorf("alert rule tests: no cases (%v)", err)
	}
	run := grader.RulesRun{}
	for _, c := range cases {
		run.Cases = append(run.Cases, strings.TrimSuffix(c, ".yaml"))
	}
	dir, err := os.MkdirTemp("", "commlab-alerts-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	promtoolIn := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out // one pipe: the cases' lines stay in order
		err := cmd.Run()
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("promtool %s: %w", args[0], ctx.Err())
		}
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return out.String(), fmt.Errorf("promtool: %w", err)
		}
		return out.String(), nil
	}

	if yamlAnchor.Match(rules) {
		// Aliases of anchors can expand a small file into a huge document (both here and
		// in promtool); a rules file has no need of them.
		run.Problem = "~/" + AlertRulesFile + ": YAML anchors (&name) and aliases are not accepted here"
		return run, nil
	}
	if err := os.WriteFile(filepath.Join(dir, AlertRulesFile), rules, 0o600); err != nil {
		return run, err
	}
	out, err := promtoolIn("check", "rules", AlertRulesFile)
	if err != nil {
		return run, err
	}
	if !strings.Contains(out, "SUCCESS") {
		run.Problem = "~/" + AlertRulesFile + ": " + firstLines(strings.ReplaceAll(out, "Checking "+AlertRulesFile+"\n", ""), 6)
		return run, nil
	}
	plain, err := plainAlerts(rules)
	if err != nil {
		run.Problem = "~/" + AlertRulesFile + ": " + err.Error()
		return run, nil
	}
	if err := os.WriteFile(filepath.Join(dir, AlertRulesFile), plain, 0o600); err != nil {
		return run, err
	}
	for _, c := range cases {
		data, err := fs.ReadFile(tests, c)
		if err != nil {
			return run, err
		}
		if err := os.WriteFile(filepath.Join(dir, c), data, 0o600); err != nil {
			return run, err
		}
	}
	out, err = promtoolIn(append([]string{"test", "rules"}, cases...)...)
	if err != nil {
		return run, err
	}
	verdicts := unitVerdicts(out)
	for _, c := range cases {
		if v, ok := verdicts[c]; !ok || !v {
			run.Failed = append(run.Failed, strings.TrimSuffix(c, ".yaml"))
		}
	}
	return run, nil
}

// unitVerdicts reads `promtool test rules` output: "Unit Testing:  <file>" and then
// SUCCESS or FAILED for each file (Prometheus 2.x).
func unitVerdicts(out string) map[string]bool {
	v := map[string]bool{}
	file := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Unit Testing:"):
			file = strings.TrimSpace(strings.TrimPrefix(line, "Unit Testing:"))
		case file == "":
		case line == "SUCCESS":
			v[file] = true
			file = ""
		case strings.HasPrefix(line, "FAILED"):
			v[file] = false
			file = ""
		}
	}
	return v
}

// plainAlerts drops the annotations and every label but severity from each rule.
func plainAlerts(rules []byte) ([]byte, error) {
	var doc struct {
		Groups []map[string]any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rules, &doc); err != nil {
		return nil, err
	}
	for _, g := range doc.Groups {
		rs, _ := g["rules"].([]any)
		for _, r := range rs {
			rule, ok := r.(map[string]any)
			if !ok {
				continue
			}
			delete(rule, "annotations")
			if labels, ok := rule["labels"].(map[string]any); ok {
				for k := range labels {
					if k != "severity" {
						delete(labels, k)
					}
				}
			}
		}
	}
	return yaml.Marshal(doc)
}

// firstLines keeps n lines of s, trimmed.
func firstLines(s string, n int) string {
	lines := slices.DeleteFunc(strings.Split(strings.TrimSpace(s), "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, " / ")
}

// gradeAlertRules reads the learner's rules from env and tests them with the lab's cases.
func gradeAlertRules(ctx context.Context, env Env, tests fs.FS) (*grader.RulesRun, error) {
	lf, ok := env.(LearnerFiles)
	if !ok {
		return nil, fmt.Errorf("this lab environment cannot read the learner's ~/%s", AlertRulesFile)
	}
	promtool, err := Promtool()
	if err != nil {
		return nil, err
	}
	rules, err := lf.LearnerFile(AlertRulesFile, MaxAlertRules)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &grader.RulesRun{Problem: "~/" + AlertRulesFile + " does not exist"}, nil
	case err != nil:
		return &grader.RulesRun{Problem: err.Error()}, nil
	}
	run, err := TestAlertRules(ctx, promtool, rules, tests)
	return &run, err
}
