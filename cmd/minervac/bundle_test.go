package main

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/plan"
)

// buildApp runs `minervac build MODEL -o DIR/app args…` and returns the
// app's path.
func buildApp(t *testing.T, model string, args ...string) string {
	t.Helper()
	app := filepath.Join(t.TempDir(), "app")
	_, stderr, code := minervac(t, append([]string{"build", model, "-o", app}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "wrote "+app+" for ")
	return app
}

// minervac build makes one executable of stories260K: `./app --prompt …`
// prints the golden text byte for byte (what `minervac run` prints), as
// does `./app run`; the plan sits at a 64 KiB boundary of the file, the
// trailer at its end; `./app serve` answers a completion with the same
// text; inspect reads the app as a plan with embedded weights.
func TestBuildAppRunsGoldenText(t *testing.T) {
	c := goldenCase(t, "stories260K__once_upon_a_time")
	want, err := hex.DecodeString(c.GenTextHex)
	require.NoError(t, err)
	app := buildApp(t, c.ModelPath)

	for _, args := range [][]string{
		{"--prompt", *c.PromptText, "-n", "64"},
		{"run", "--prompt", *c.PromptText, "-n", "64"},
	} {
		stdout, stderr, code := runProgram(t, app, nil, "", args...)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, string(want)+"\n", stdout, "app %v", args)
	}

	fh, err := os.Open(app)
	require.NoError(t, err)
	st, err := fh.Stat()
	require.NoError(t, err)
	tr, err := plan.ReadAppTrailer(fh, st.Size())
	fh.Close()
	require.NoError(t, err)
	require.Zero(t, tr.Offset%plan.AppAlign)
	require.Equal(t, st.Size(), tr.Offset+tr.Length+tr.MetaLength+plan.AppTrailerSize)

	stdout, stderr, code := minervac(t, "inspect", app)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "weights: embedded (")

	url, _, _ := startServeBin(t, app)
	require.Equal(t, string(want), greedyCompletion(t, url, *c.PromptText, 64))
}

// An app of a model directory carries its chat template (a plan does not):
// `./app chat` answers as `minervac chat DIR` does, turn for turn.
func TestBuildAppChat(t *testing.T) {
	dir := shared.Path(t, "models/hf/stories260K")
	app := buildApp(t, dir, "--runtime", minervacBin)
	in := "Hello!\nTell me a story.\n"
	want, stderr, code := minervacIn(t, in, "chat", dir, "-n", "12", "--temp", "0", "--json")
	require.Equal(t, 0, code, stderr)
	got, stderr, code := runProgram(t, app, nil, in, "chat", "-n", "12", "--temp", "0", "--json")
	require.Equal(t, 0, code, stderr)
	// Everything but the timings.
	untimed := func(out string) []turnResult {
		rs := turns(t, out)
		for i := range rs {
			rs[i].PromptMS, rs[i].GenMS = 0, 0
		}
		return rs
	}
	require.Len(t, untimed(got), 2)
	require.Equal(t, untimed(want), untimed(got))
}

// A damaged app says so in one line and exits 1: cut short (the trailer is
// gone), a flipped byte in the weights (the plan's section checksum), in
// the plan header (the trailer's hash), in the metadata, or in the trailer.
func TestAppPayloadDamaged(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	app := buildApp(t, model)
	data, err := os.ReadFile(app)
	require.NoError(t, err)
	fh, err := os.Open(app)
	require.NoError(t, err)
	tr, err := plan.ReadAppTrailer(fh, int64(len(data)))
	fh.Close()
	require.NoError(t, err)
	flip := func(at int64) []byte {
		b := append([]byte(nil), data...)
		b[at] ^= 0x40
		return b
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"truncated", data[:len(data)-4096], "the app payload is truncated or corrupt: "},
		{"weights", flip(tr.Offset + tr.Length - 100), `checksum mismatch in section "weights"`},
		{"plan header", flip(tr.Offset + 40), "the plan header does not match the app trailer's hash"},
		{"metadata", flip(tr.Offset + tr.Length), "checksum mismatch in the app metadata"},
		{"trailer", flip(int64(len(data)) - 70), "the app trailer is corrupt"},
		{"trailer offsets", append(append([]byte(nil), data[:len(data)-plan.AppTrailerSize]...), plan.AppTrailer{Offset: tr.Offset, Length: tr.Length + 1}.Marshal()...), "the app payload is truncated or corrupt"},
	} {
		bad := filepath.Join(t.TempDir(), "app")
		require.NoError(t, os.WriteFile(bad, c.file, 0o755))
		stdout, stderr, code := runProgram(t, bad, nil, "", "--prompt", "Once", "-n", "4")
		require.Equal(t, 1, code, "%s: %s", c.name, stderr)
		require.Empty(t, stdout, c.name)
		require.Contains(t, stderr, c.want, c.name)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "%s: one line: %q", c.name, stderr)
	}
}

// --runtime takes only a minervac program.
func TestBuildRuntimeChecked(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	notGo := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755))
	_, stderr, code := minervac(t, "build", model, "-o", filepath.Join(t.TempDir(), "app"), "--runtime", notGo)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--runtime "+notGo+": not a Go program")
}
