package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/course"
)

func newContentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "content",
		Short: "Work with the course content",
	}
	var dir, scenarioDir string
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the course and the lab scenarios; print each problem as file:line: message",
		Long: `check loads the course and the scenarios exactly as serve does and reports every
problem it finds: missing or unlisted chapter files, duplicate ids, bad front matter,
broken internal links and anchors, missing images, unknown lab ids, malformed quizzes,
and in scenarios unknown topologies, fault kinds or classes, parameters out of range in
any variant, evidence patterns that do not compile. It exits non-zero on any problem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ct, probs := loadContentFrom(dir, scenarioDir)
			if len(probs) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), strings.Join(probs, "\n"))
				return fmt.Errorf("%d problem(s) in the course content", len(probs))
			}
			c := ct.course
			written := 0
			for _, ch := range c.Chapters() {
				if ch.Written() {
					written++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d modules, %d chapters (%d written), %d lab scenarios\n", len(c.Modules), len(c.Chapters()), written, len(ct.scenarios.All()))
			return nil
		},
	}
	check.Flags().StringVar(&dir, "content", "", "content directory to check instead of the embedded course (e.g. course/content)")
	check.Flags().StringVar(&scenarioDir, "scenarios", "", "scenario directory to check instead of the embedded catalog (e.g. scenarios/catalog)")
	cmd.AddCommand(check)
	return cmd
}

// contentFS returns the course content to use and the path to show in messages.
func contentFS(dir string) (fs.FS, string) {
	if dir == "" {
		return course.Embedded(), "course/content"
	}
	// A root, unlike os.DirFS, refuses links that lead out of dir.
	if r, err := os.OpenRoot(dir); err == nil {
		return r.FS(), dir
	}
	return os.DirFS(dir), dir // reads fail with dir's own error
}

// located returns the problems as file:line lines, with paths relative to the working directory.
func located(probs course.Problems, prefix string) []string {
	lines := make([]string, len(probs))
	for i, p := range probs {
		p.File = path.Join(prefix, p.File)
		lines[i] = p.String()
	}
	return lines
}
