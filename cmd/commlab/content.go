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
	var dir string
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the manifest, chapters, quizzes and links; print each problem as file:line: message",
		Long: `check loads the course exactly as serve does and reports every problem it finds:
missing or unlisted chapter files, duplicate ids, bad front matter, broken internal
links and anchors, missing images, unknown lab ids and malformed quizzes. It exits
non-zero when there is any problem.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fsys, prefix := contentFS(dir)
			c, probs := course.Load(fsys, courseOptions())
			if len(probs) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), located(probs, prefix))
				return fmt.Errorf("%d problem(s) in the course content", len(probs))
			}
			written := 0
			for _, ch := range c.Chapters() {
				if ch.Written() {
					written++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d modules, %d chapters (%d written)\n", len(c.Modules), len(c.Chapters()), written)
			return nil
		},
	}
	check.Flags().StringVar(&dir, "content", "", "content directory to check instead of the embedded course (e.g. course/content)")
	cmd.AddCommand(check)
	return cmd
}

// contentFS returns the course content to use and the path to show in messages.
func contentFS(dir string) (fs.FS, string) {
	if dir == "" {
		return course.Embedded(), "course/content"
	}
	return os.DirFS(dir), dir
}

// located returns the problems as file:line lines, with paths relative to the working directory.
func located(probs course.Problems, prefix string) string {
	lines := make([]string, len(probs))
	for i, p := range probs {
		p.File = path.Join(prefix, p.File)
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// courseOptions ties the course to the lab scenarios it may reference.
func courseOptions() course.Options {
	return course.Options{}
}
