package serve

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/runtime"
)

// With top-k, the sampler hands runtime.Sampler only the k best logits;
// the draws are those of runtime.Sampler over the whole vocabulary, ties
// and all.
func TestTopKPreselectionDrawsAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 50 + r.IntN(2000)
		logits := make([]float32, n)
		for i := range logits {
			// Coarse values, so that ties are common.
			logits[i] = float32(r.IntN(40)) / 4
		}
		s := Sampling{Temperature: 0.2 + r.Float64(), TopK: 1 + r.IntN(60), TopP: 0.5 + r.Float64()/2, MinP: r.Float64() / 10, Seed: r.Uint64()}
		sm, err := newSampler(s)
		require.NoError(t, err)
		full, err := runtime.NewSampler(runtime.SamplerConfig{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP, RepeatPenalty: 1, Seed: s.Seed})
		require.NoError(t, err)
		for k := 0; k < 5; k++ {
			want := full.Sample(append([]float32(nil), logits...), nil)
			got := sm.next(append([]float32(nil), logits...), nil)
			require.Equal(t, want, got, "trial %d draw %d (%+v)", trial, k, s)
		}
	}
}

// Greedy with penalties and biases: the bias moves a token to the top;
// repetition, frequency and presence penalties push seen tokens down as
// llama.cpp applies them.
func TestPenaltiesAndBias(t *testing.T) {
	logits := func() []float32 { return []float32{0, 5, 4, 3, -1} }
	pick := func(s Sampling, history []int32) int32 {
		sm, err := newSampler(s)
		require.NoError(t, err)
		return sm.next(logits(), history)
	}
	require.Equal(t, int32(1), pick(Sampling{}, nil))
	require.Equal(t, int32(0), pick(Sampling{LogitBias: map[int32]float64{0: 10}}, nil))
	require.Equal(t, int32(4), pick(Sampling{LogitBias: map[int32]float64{4: 100}}, nil))
	// 5/2 = 2.5 < 4.
	require.Equal(t, int32(2), pick(Sampling{RepetitionPenalty: 2}, []int32{1}))
	// 5 - 2·0.6 = 3.8 < 4; one occurrence (5 - 0.6 = 4.4) is not enough.
	require.Equal(t, int32(2), pick(Sampling{FrequencyPenalty: 0.6}, []int32{1, 1}))
	require.Equal(t, int32(1), pick(Sampling{FrequencyPenalty: 0.6}, []int32{1}))
	// Presence counts once: 5 - 1.5 = 3.5 < 4 however often 1 came.
	require.Equal(t, int32(2), pick(Sampling{PresencePenalty: 1.5}, []int32{1}))
	// Only the last PenaltyLastN tokens count.
	require.Equal(t, int32(1), pick(Sampling{RepetitionPenalty: 2, PenaltyLastN: 1}, []int32{1, 3}))
	sm, err := newSampler(Sampling{})
	require.NoError(t, err)
	require.False(t, sm.penalized())
}

// A harmony output streamed in pieces becomes reasoning, content and tool
// calls with ids, and a tool call makes the finish reason tool_calls.
func TestHarmonyChatOutput(t *testing.T) {
	text := "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"
	n := 0
	o := &chatOutput{parser: chat.NewHarmonyParser(), ids: func() string { n++; return "call_1" }}
	var deltas []delta
	for i := 0; i < len(text); i += 7 {
		deltas = append(deltas, o.add(text[i:min(i+7, len(text))], false)...)
	}
	deltas = append(deltas, o.add("", true)...)
	require.Equal(t, "Need weather.", o.reason.String())
	require.Empty(t, o.content.String())
	require.Len(t, o.calls, 1)
	require.Equal(t, chat.ToolCall{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}, o.calls[0])
	require.Equal(t, "tool_calls", o.finish(FinishStop))
	require.Equal(t, "length", o.finish(FinishLength))
	var calls int
	for _, d := range deltas {
		calls += len(d.ToolCalls)
	}
	require.Equal(t, 1, calls)

	plain := &chatOutput{}
	require.Equal(t, []delta(nil), plain.add("", true))
	d := plain.add("hi", false)
	require.Equal(t, "hi", *d[0].Content)
	require.Equal(t, "stop", plain.finish(FinishStop))
}

// Stop strings end the text just before them wherever the token pieces
// split them, and text that may begin one is held back until it cannot.
func TestTextOutStops(t *testing.T) {
	o := &textOut{stops: []string{"END", "##"}}
	feed := func(piece string) (string, bool) {
		o.tail += piece
		// textOut.add without a decoder: the same search on o.tail.
		return o.addDecoded()
	}
	out, stopped := feed("hello E")
	require.False(t, stopped)
	require.Equal(t, "hello ", out, "E may begin END")
	out, stopped = feed("N")
	require.False(t, stopped)
	require.Empty(t, out)
	out, stopped = feed("X #")
	require.False(t, stopped)
	require.Equal(t, "ENX ", out)
	out, stopped = feed("#tail")
	require.True(t, stopped)
	require.Empty(t, out)
	require.Equal(t, "##", o.match)
}
