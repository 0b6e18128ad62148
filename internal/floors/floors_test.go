package floors

import (
	"fmt"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/minerva-llm/minerva"

// floors gives each package its floor by the longest matching path prefix
// (doc.go says why each stands where it does). A new package that matches
// none fails the test until it is given one.
var floors = map[string]int{
	"ir":        0,
	"tokenizer": 0,
	"chat":      0,
	"internal":  0,
	"quant":     1,
	"ir/eval":   2,
	"ir/fold":   2,
	"plan":      3,
	"frontend":  4,
	"synth":     4,
	"passes":    5,
	"codegen":   6,
	"runtime":   7,
	"cmd":       8,
}

// forbidden are imports the floors allow but the design does not: a
// package under from (exactly from, when exact) must not import one under
// to ("": anything of the module).
var forbidden = []struct {
	from, to string
	exact    bool
	why      string
}{
	{"runtime", "frontend", false, "the runtime reads no model file: its caller opens the model (frontend.Open) and hands it the graph and weights"},
	{"ir", "", true, "ir imports nothing of the module"},
	{"tokenizer", "", true, "tokenizer imports nothing of the module"},
}

// floorOf returns pkg's floor and the prefix that gave it.
func floorOf(pkg string) (int, string, bool) {
	best := ""
	for p := range floors {
		if under(pkg, p) && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return 0, "", false
	}
	return floors[best], best, true
}

// under reports whether pkg is prefix or a package below it.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// imports maps each package of the module (its path relative to the module)
// to the module packages its non-test files import, on every platform: a
// file is skipped only when its build constraint is "ignore".
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if e, err := constraint.Parse(c.Text); err == nil && e.String() == "ignore" {
					return nil
				}
			}
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// moduleRoot is the directory holding go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module "+module+"\n") {
		t.Fatalf("%s is not the module root (%v)", root, err)
	}
	return root
}

// violations lists every import of deps that points up a floor or crosses a
// forbidden line, and every package without a floor, one line each.
func violations(deps map[string][]string) []string {
	var pkgs []string
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var out []string
	for _, pkg := range pkgs {
		floor, prefix, ok := floorOf(pkg)
		if !ok {
			out = append(out, pkg+" has no floor: give it one in floors (internal/floors)")
			continue
		}
		seen := map[string]bool{}
		for _, dep := range deps[pkg] {
			if seen[dep] {
				continue
			}
			seen[dep] = true
			df, dprefix, ok := floorOf(dep)
			switch {
			case !ok:
				out = append(out, pkg+" imports "+dep+", which has no floor")
			case df > floor:
				out = append(out, fmt.Sprintf("%s (floor %d, %s) imports %s (floor %d, %s): an import points up a floor", pkg, floor, prefix, dep, df, dprefix))
			}
			for _, f := range forbidden {
				from := under(pkg, f.from)
				if f.exact {
					from = pkg == f.from
				}
				if from && (f.to == "" || under(dep, f.to)) {
					out = append(out, pkg+" imports "+dep+": "+f.why)
				}
			}
		}
	}
	return out
}

// No import of the module points up a floor, and none crosses a forbidden
// line.
func TestNoImportPointsUp(t *testing.T) {
	deps := imports(t, moduleRoot(t))
	if len(deps) < 20 {
		t.Fatalf("found only %d packages: %v", len(deps), deps)
	}
	// The walk sees what go list does.
	for _, want := range []struct{ pkg, dep string }{{"cmd/minervac", "frontend"}, {"frontend", "plan"}, {"ir/eval", "quant"}, {"quant", "ir"}} {
		found := false
		for _, d := range deps[want.pkg] {
			found = found || d == want.dep
		}
		if !found {
			t.Errorf("the walk missed %s → %s (it found %v)", want.pkg, want.dep, deps[want.pkg])
		}
	}
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// The check fails on the imports issue 22 found (internal/cpuvariant into
// runtime/cpu/kern, runtime and runtime/plan into the frontend), on quant
// reaching the interpreter, on ir importing anything of the module, and on a
// package without a floor.
func TestCheckCatchesUpwardImports(t *testing.T) {
	got := violations(map[string][]string{
		"internal/cpuvariant": {"runtime/cpu/kern"},
		"runtime":             {"frontend/arch", "frontend/gguf", "ir"},
		"runtime/plan":        {"frontend/gguf"},
		"quant":               {"ir", "ir/eval"},
		"ir":                  {"ir/rope"},
		"newthing":            nil,
		"cmd/minervac":        {"frontend", "runtime", "plan", "passes", "codegen/cuda"},
	})
	want := []string{
		"cmd/minervac", // none: the top floor imports anything
		"internal/cpuvariant (floor 0, internal) imports runtime/cpu/kern (floor 7, runtime): an import points up a floor",
		"ir imports ir/rope: ir imports nothing of the module",
		"newthing has no floor",
		"quant (floor 1, quant) imports ir/eval (floor 2, ir/eval): an import points up a floor",
		"runtime imports frontend/arch: the runtime reads no model file",
		"runtime imports frontend/gguf: the runtime reads no model file",
		"runtime/plan imports frontend/gguf: the runtime reads no model file",
	}
	if len(got) != len(want)-1 {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want)-1, strings.Join(got, "\n"))
	}
	for i, w := range want[1:] {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("violation %d = %q, want it to start %q", i, got[i], w)
		}
	}
}
