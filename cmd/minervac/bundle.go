package main

import (
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/plan"
)

// mainPackage is the import path of this command: what a --runtime binary
// must have been built from.
const mainPackage = "github.com/minerva-llm/minerva/cmd/minervac"

type buildCmd struct {
	Model      string `arg:"" help:"Model file (.gguf) or model directory to carry." type:"path"`
	Output     string `short:"o" required:"" help:"The executable to write (run it as ./app --prompt …, ./app chat, ./app serve)." type:"path"`
	Runtime    string `help:"The minervac binary the app is a copy of (default: this one). One built for another GOOS/GOARCH with CGO_ENABLED=0 makes an app for that platform." type:"path"`
	Target     string `short:"t" help:"Target: goasm (the CPU), reference (the interpreter), cuda or metal." default:"goasm"`
	Ctx        int    `help:"Default KV cache size in positions (default: the model's context length, at most 4096)."`
	cacheFlags `embed:""`
}

// Run writes the app: the runtime program (without any plan it already
// carries), zero padding to plan.AppAlign, the compiled plan with its
// weights embedded, and the trailer (plan.AppTrailer). The file is written
// beside the output and renamed into place.
func (c *buildCmd) Run() error {
	if c.Ctx < 0 {
		return usageError{fmt.Sprintf("--ctx %d must be positive", c.Ctx)}
	}
	if err := checkTarget(c.Target); err != nil {
		return err
	}
	rtPath := c.Runtime
	if rtPath == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this executable to copy (give --runtime): %w", err)
		}
		rtPath = exe
	}
	rt, err := openRuntime(rtPath)
	if err != nil {
		return err
	}
	defer rt.fh.Close()

	m, err := loadModel(c.Model, c.types().arch())
	if err != nil {
		return err
	}
	defer m.src.Close()
	p, err := compileModel(m, c.Model, compileOptions{Target: c.Target, Ctx: c.Ctx, Cache: c.types()})
	if err != nil {
		return err
	}

	tmp, err := os.CreateTemp(filepath.Dir(c.Output), ".minervac-app-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	planLen, err := writeApp(tmp, rt, p, m)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.Output)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", c.Output, err)
	}
	fmt.Fprintf(os.Stderr, "minervac: wrote %s for %s/%s: the %d-byte runtime and a %d-byte %s plan of %s; run it: %s --prompt \"…\", %s chat, %s serve\n",
		c.Output, rt.goos, rt.goarch, rt.end, planLen, c.Target, c.Model, c.Output, c.Output, c.Output)
	return nil
}

// writeApp writes the app to out (an empty file) and returns the plan's
// length.
func writeApp(out *os.File, rt *runtimeBinary, p *plan.Plan, m *loaded) (int64, error) {
	if _, err := io.Copy(out, io.NewSectionReader(rt.fh, 0, rt.end)); err != nil {
		return 0, err
	}
	off := (rt.end + plan.AppAlign - 1) / plan.AppAlign * plan.AppAlign
	if _, err := out.Write(make([]byte, off-rt.end)); err != nil {
		return 0, err
	}
	if err := encodePlan(out, p, m, true); err != nil {
		return 0, err
	}
	end, err := out.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	// The metadata: what chat needs of the model file, which a plan does
	// not copy.
	mc := chatInfoOf(m.src)
	meta, err := json.Marshal(appMeta{ChatTemplate: mc.template, Specials: mc.specials})
	if err != nil {
		return 0, err
	}
	if _, err := out.Write(meta); err != nil {
		return 0, err
	}
	t := plan.AppTrailer{Offset: off, Length: end - off, MetaLength: int64(len(meta)), MetaCRC: plan.MetaChecksum(meta)}
	// The trailer records the plan header's hash: read the header back.
	head := make([]byte, min(t.Length, 1<<20+64))
	if _, err := out.ReadAt(head, off); err != nil {
		return 0, err
	}
	if t.HeaderSHA256, err = plan.HeaderSHA256(head); err != nil {
		return 0, err
	}
	_, err = out.Write(t.Marshal())
	return t.Length, err
}

// appMeta is the metadata an app carries beside its plan (plan.AppTrailer):
// the model file's chat template and the special-token texts a model
// directory's tokenizer_config.json names.
type appMeta struct {
	ChatTemplate string            `json:"chat_template,omitempty"`
	Specials     map[string]string `json:"specials,omitempty"`
}

// appChat is the chat template an app carries (src is its plan); ok is
// false for a plan file.
func appChat(src *frontend.Source) (mc modelChat, ok bool) {
	if src.App == nil {
		return mc, false
	}
	var meta appMeta
	if err := json.Unmarshal(src.App, &meta); err != nil {
		return mc, false // checksummed when opened: written by another build
	}
	return modelChat{template: meta.ChatTemplate, specials: meta.Specials, arch: src.Plan.Config.Arch}, true
}

// runtimeBinary is the minervac program an app is a copy of.
type runtimeBinary struct {
	fh           *os.File
	end          int64 // the program's own bytes: [0, end)
	goos, goarch string
}

// openRuntime opens a --runtime binary and checks that it is minervac (its
// Go build information names this command), for an operating system an
// app can be built for.
func openRuntime(path string) (*runtimeBinary, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--runtime: %w", err)
	}
	rt := &runtimeBinary{fh: fh}
	fail := func(format string, args ...any) (*runtimeBinary, error) {
		fh.Close()
		return nil, fmt.Errorf("--runtime %s: "+format, append([]any{path}, args...)...)
	}
	bi, err := buildinfo.Read(fh)
	if err != nil {
		return fail("not a Go program (%v)", err)
	}
	if bi.Path != mainPackage {
		return fail("a Go program built from %s, not minervac (%s)", bi.Path, mainPackage)
	}
	cgo := ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS":
			rt.goos = s.Value
		case "GOARCH":
			rt.goarch = s.Value
		case "CGO_ENABLED":
			cgo = s.Value
		}
	}
	if !slices.Contains([]string{"linux", "darwin", "freebsd"}, rt.goos) {
		return fail("built for %s/%s: an app maps its plan from the executable, which needs ELF or Mach-O (linux, darwin, freebsd)", rt.goos, rt.goarch)
	}
	if cgo == "1" && (rt.goos != goruntime.GOOS || rt.goarch != goruntime.GOARCH) {
		fmt.Fprintf(os.Stderr, "minervac: warning: --runtime %s was built with cgo for %s/%s: it needs that system's C libraries (build it with CGO_ENABLED=0 for a static binary)\n", path, rt.goos, rt.goarch)
	}
	end, ok, err := programEnd(fh)
	switch {
	case err != nil:
		return fail("%v", err)
	case !ok:
		return fail("neither ELF nor Mach-O")
	}
	rt.end = end
	return rt, nil
}

// programEnd is where the program in fh ends: the furthest byte its
// headers, segments and sections describe (ELF or Mach-O). Anything after
// it is appended data, such as an app's plan. ok is false for other
// formats.
func programEnd(fh io.ReaderAt) (end int64, ok bool, err error) {
	if f, err := elf.NewFile(fh); err == nil {
		var hdr [64]byte
		if _, err := fh.ReadAt(hdr[:], 0); err != nil {
			return 0, false, err
		}
		// The section header table, usually last in the file.
		if f.Class == elf.ELFCLASS64 {
			end = int64(f.ByteOrder.Uint64(hdr[0x28:])) + int64(f.ByteOrder.Uint16(hdr[0x3a:]))*int64(f.ByteOrder.Uint16(hdr[0x3c:]))
		} else {
			end = int64(f.ByteOrder.Uint32(hdr[0x20:])) + int64(f.ByteOrder.Uint16(hdr[0x2e:]))*int64(f.ByteOrder.Uint16(hdr[0x30:]))
		}
		for _, s := range f.Sections {
			if s.Type != elf.SHT_NOBITS {
				end = max(end, int64(s.Offset+s.FileSize))
			}
		}
		for _, p := range f.Progs {
			end = max(end, int64(p.Off+p.Filesz))
		}
		return end, true, nil
	}
	if f, err := macho.NewFile(fh); err == nil {
		for _, l := range f.Loads {
			if s, ok := l.(*macho.Segment); ok {
				end = max(end, int64(s.Offset+s.Filesz))
			}
		}
		return end, true, nil
	}
	return 0, false, nil
}

// appCommands are the commands an app runs with its own plan as the model
// (inserted as their first argument); others run as in minervac.
var appCommands = []string{"run", "chat", "serve", "bench", "bench-serve", "tokenize", "inspect", "template"}

// thisApp reports whether this executable is an app (carries a plan:
// minervac build) and returns its path. A program followed by bytes that do
// not end in a valid trailer is an app whose payload was cut or damaged:
// that is an error, not a plain minervac.
func thisApp() (string, bool, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", false, nil
	}
	fh, err := os.Open(exe)
	if err != nil {
		return "", false, nil
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", false, nil
	}
	_, err = plan.ReadAppTrailer(fh, st.Size())
	switch {
	case err == nil:
		return exe, true, nil
	case !errors.Is(err, plan.ErrNoApp):
		return "", false, fmt.Errorf("%s: %w", exe, err)
	}
	if end, ok, err := programEnd(fh); err == nil && ok && end < st.Size() {
		return "", false, fmt.Errorf("%s: the app payload is truncated or corrupt: %d bytes follow the program but no valid trailer ends the file (rebuild it with minervac build)", exe, st.Size()-end)
	}
	return "", false, nil
}

// appArgs turns an app's command line into minervac's: `./app --prompt …`
// and a bare `./app` are `run APP …`, `./app chat …` is `chat APP …` (each
// of appCommands), and anything else (--help, --version, compile …) is
// left as it is.
func appArgs(exe string, args []string) []string {
	switch {
	case len(args) == 0:
		return []string{"run", exe}
	case slices.Contains(appCommands, args[0]):
		return append([]string{args[0], exe}, args[1:]...)
	case slices.Contains([]string{"-h", "--help", "--version"}, args[0]):
		return args
	case len(args[0]) > 0 && args[0][0] == '-':
		return append([]string{"run", exe}, args...)
	}
	return args
}
