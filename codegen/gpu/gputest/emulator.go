package gputest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
)

// ClangXX returns clang++'s path, or skips t saying that need needs it.
func ClangXX(t testing.TB, need string) string {
	t.Helper()
	p, err := exec.LookPath("clang++")
	if err != nil {
		t.Skip("clang++ not on PATH: " + need + " needs it (apt-get install clang)")
	}
	return p
}

// Emulator runs a language's launches on the CPU: a generated main loads
// every buffer from a file (emuhost::load, testdata/emuhost.h), runs the
// step's launches in order and writes every buffer that is not a weight
// back (emuhost::save); it is compiled with the library by clang++ against
// the language's shim header, which Flags include.
type Emulator struct {
	Compiler string   // clang++
	Flags    []string // the flags before -o (the shim's -include among them)
	// Source is the library's file name, which the main includes
	// ("lib.cu").
	Source string
	// Launch formats the C++ statement of one launch from the grid's x, y
	// and z counts, the threads per block, the kernel's name and its
	// buffer arguments (each v<ID>.ptr(), joined by ", "); T, the step's
	// tokens, is an unsigned variable in scope (Metal kernels take it by
	// reference).
	Launch string
}

// Run is an Executor.
func (e *Emulator) Run(t *testing.T, g *ir.Graph, lib *gpu.Library, bufs map[int][]byte, T int) map[int][]byte {
	t.Helper()
	dir := t.TempDir()
	byID := ValuesByID(g)
	ids := make([]int, 0, len(bufs))
	for id := range bufs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	isWeight := func(id int) bool { v := byID[id]; return v != nil && v.Op == ir.OpWeight }
	files := map[string][]byte{e.Source: []byte(lib.Source)}
	var m strings.Builder
	fmt.Fprintf(&m, "#include %q\n\nint main() {\n    unsigned T = %d;\n", e.Source, T)
	for _, id := range ids {
		files[bufName(id)] = bufs[id]
		fmt.Fprintf(&m, "    emuhost::Buf %s = emuhost::load(%q);\n", varName(id), bufName(id))
	}
	for _, l := range lib.Step(T) {
		var args []string
		for _, a := range l.Args {
			args = append(args, varName(a.Value)+".ptr()")
		}
		m.WriteString("    " + fmt.Sprintf(e.Launch, l.Grid[0].Count(T), l.Grid[1].Count(T), l.Grid[2].Count(T), l.Threads, l.Kernel, strings.Join(args, ", ")) + "\n")
	}
	for _, id := range ids {
		if !isWeight(id) {
			fmt.Fprintf(&m, "    emuhost::save(%q, %s);\n", bufName(id), varName(id))
		}
	}
	m.WriteString("    return 0;\n}\n")
	files["main.cpp"] = []byte(m.String())
	e.BuildAndRun(t, dir, files)
	res := map[int][]byte{}
	for _, id := range ids {
		if isWeight(id) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, bufName(id)))
		if err != nil {
			t.Fatal(err)
		}
		res[id] = b
	}
	return res
}

// BuildAndRun writes files into dir (main.cpp, what it includes and its
// inputs), builds main.cpp and runs it there.
func (e *Emulator) BuildAndRun(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(slices.Clone(e.Flags), "-o", filepath.Join(dir, "emu"), "-x", "c++", filepath.Join(dir, "main.cpp"))
	if out, err := exec.Command(e.Compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang++ (emulation build): %v\n%s", err, out)
	}
	run := exec.Command(filepath.Join(dir, "emu"))
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("emulation run: %v\n%s", err, out)
	}
}

func bufName(id int) string { return varName(id) + ".bin" }

func varName(id int) string {
	switch id {
	case sched.Scratch:
		return "scratch"
	case sched.KVBase:
		return "kvbase"
	}
	return fmt.Sprintf("v%d", id)
}

// WriteTemp writes src to a file named name in a fresh temporary directory
// of t and returns its path.
func WriteTemp(t testing.TB, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
