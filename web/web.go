// Package web holds commlab's browser UI: HTML templates, static assets and the UI
// strings in Simplified Chinese and English. Everything is embedded in the binary.
package web

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Static returns the files served under /static/.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // guaranteed by the embed pattern
	}
	return sub
}

// Pages parses every page template. Each page template defines "content" and is
// executed through the shared "layout"; funcs are added to the built-in ones.
func Pages(funcs template.FuncMap) (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(builtinFuncs).Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		pages[n[len("templates/"):len(n)-len(".html")]] = t
	}
	return pages, nil
}

var builtinFuncs = template.FuncMap{
	"T":      T,
	"static": StaticURL,
	"add":    func(a, b int) int { return a + b },
	"pct":    func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
}
