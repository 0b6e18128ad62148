package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// startServe runs `minervac serve` on a free loopback port and returns its
// URL once /health says ok, with the process and a channel that delivers the
// rest of its stderr when the process closes it (at exit). Read that channel
// before cmd.Wait: Wait closes the pipe and would cut the copy short.
func startServe(t *testing.T, args ...string) (string, *exec.Cmd, <-chan string) {
	t.Helper()
	return startServeBin(t, minervacBin, args...)
}

// startServeBin is startServe of another minervac binary (an app).
func startServeBin(t *testing.T, bin string, args ...string) (string, *exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--port", "0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	rd := bufio.NewReader(stderr)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`serving \S+ on (http://\S+) \(loading\)`).FindStringSubmatch(line)
	require.NotNil(t, m, "first line %q", line)
	url := m[1]
	ready := make(chan string, 1)
	rest := make(chan string, 1)
	go func() {
		l, _ := rd.ReadString('\n')
		ready <- l
		var b strings.Builder
		io.Copy(&b, rd)
		rest <- b.String()
	}()
	// The server answers while it loads: 503 until the model is in.
	l := <-ready
	require.Contains(t, l, "minervac: ready:", "the second line says the model is loaded")
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	return url, cmd, rest
}

// The server's greedy text for stories260K is byte for byte what `minervac
// run` prints (which is the golden llama.cpp text), and SIGTERM shuts it
// down cleanly.
func TestServeMatchesRun(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	url, cmd, stderr := startServe(t, model, "--parallel", "3", "--ctx", "256")
	for _, p := range []string{"Once upon a time", "The little dog ran to the park and"} {
		want, _, code := minervac(t, "run", model, "--prompt", p, "-n", "64")
		require.Zero(t, code)
		// run ends its text with a newline.
		require.Equal(t, strings.TrimSuffix(want, "\n"), greedyCompletion(t, url, p, 64), "prompt %q", p)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	var log string
	select {
	case log = <-stderr:
	case <-time.After(60 * time.Second):
		t.Fatal("no exit within a minute of SIGTERM")
	}
	require.NoError(t, cmd.Wait(), "exit status after SIGTERM")
	require.Contains(t, log, "minervac: shutting down")
	require.Contains(t, log, "msg=request method=POST path=/v1/completions status=200")
}

// greedyCompletion asks the server at url for maxTokens greedy tokens after
// prompt and returns the text.
func greedyCompletion(t *testing.T, url, prompt string, maxTokens int) string {
	t.Helper()
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, prompt, maxTokens)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.Equal(t, 200, resp.StatusCode)
	require.Len(t, r.Choices, 1)
	return r.Choices[0].Text
}

// Bad settings are one line and exit status 2, before anything loads; a
// KV cache that cannot fit is refused naming --ctx and --parallel.
func TestServeUsageErrors(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--parallel", "0"}, "--parallel 0 must be ≥ 1"},
		{[]string{"--chunk", "0"}, "--chunk 0 must be ≥ 1"},
		{[]string{"--port", "70000"}, "--port 70000 is not a port number"},
		{[]string{"--ctx", "2000000000", "--parallel", "64"}, "--ctx 2000000000 × --parallel 64 needs"},
	} {
		_, stderr, code := minervac(t, append([]string{"serve", model, "--port", "0"}, c.args...)...)
		require.Equal(t, 2, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1-strings.Count(stderr, "serving "), "one line besides the listening notice: %q", stderr)
	}
}

// bench-serve serves a model itself and measures every client level.
func TestBenchServe(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	out, stderr, code := minervac(t, "bench-serve", model, "--clients", "1,3", "--requests", "3", "--max-tokens", "8",
		"--prompt-min", "4", "--prompt-max", "20", "--json")
	require.Zero(t, code, stderr)
	var r struct {
		Raw []map[string]any `json:"levels"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	require.Len(t, r.Raw, 2)
	for _, l := range r.Raw {
		require.EqualValues(t, 0, l["errors"], "%v", l)
		require.EqualValues(t, 24, l["output_tokens"], "3 requests of 8 tokens: %v", l)
		require.Positive(t, l["output_tokens_s"])
	}
}
