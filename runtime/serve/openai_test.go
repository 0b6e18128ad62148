package serve_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/serve"
)

func openaiClient(ts *testServer, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// The OpenAI Go client drives both endpoints, streaming and not, through
// an API key: the non-streaming and streamed texts agree, usage counts
// the tokens, and the text completion equals `minervac run`'s.
func TestOpenAIClient(t *testing.T) {
	m := loadStories(t)
	ts := startServer(t, serverConfig{slots: 2, opts: serve.Options{APIKey: "sekret"}})
	client := openaiClient(ts, "sekret")
	ctx := context.Background()

	models, err := client.Models.List(ctx)
	require.NoError(t, err)
	require.Len(t, models.Data, 1)
	require.Equal(t, "stories260K", models.Data[0].ID)

	params := openai.CompletionNewParams{
		Model:       "stories260K",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(40),
		Temperature: openai.Float(0),
	}
	c, err := client.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, c.Choices, 1)
	want := m.generate(t, "Once upon a time", 40)
	require.Equal(t, want, c.Choices[0].Text)
	require.Equal(t, openai.CompletionChoiceFinishReasonLength, c.Choices[0].FinishReason)
	require.Equal(t, int64(40), c.Usage.CompletionTokens)
	require.Equal(t, int64(len(m.tok.Encode("Once upon a time", true))), c.Usage.PromptTokens)

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var usage int64
	for stream.Next() {
		ch := stream.Current()
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
		}
		if ch.Usage.CompletionTokens > 0 {
			usage = ch.Usage.CompletionTokens
		}
	}
	require.NoError(t, stream.Err())
	require.Equal(t, want, text.String())
	require.Equal(t, int64(40), usage)

	chatParams := openai.ChatCompletionNewParams{
		Model: "stories260K",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You tell stories."),
			openai.UserMessage("Tell me about a cat."),
		},
		MaxTokens:   openai.Int(24),
		Temperature: openai.Float(0),
		Seed:        openai.Int(7),
	}
	cc, err := client.Chat.Completions.New(ctx, chatParams)
	require.NoError(t, err)
	require.Len(t, cc.Choices, 1)
	require.Equal(t, "assistant", string(cc.Choices[0].Message.Role))
	require.NotEmpty(t, cc.Choices[0].Message.Content)
	require.True(t, cc.Usage.CompletionTokens == 24 && cc.Choices[0].FinishReason == "length" ||
		cc.Usage.CompletionTokens < 24 && cc.Choices[0].FinishReason == "stop", "%d tokens, %s", cc.Usage.CompletionTokens, cc.Choices[0].FinishReason)
	require.Greater(t, cc.Usage.PromptTokens, int64(10))

	chatParams.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	cs := client.Chat.Completions.NewStreaming(ctx, chatParams)
	acc := openai.ChatCompletionAccumulator{}
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	require.NoError(t, cs.Err())
	require.Equal(t, cc.Choices[0].Message.Content, acc.Choices[0].Message.Content)
	require.Equal(t, cc.Choices[0].FinishReason, acc.Choices[0].FinishReason)
	require.Equal(t, cc.Usage.CompletionTokens, acc.Usage.CompletionTokens)

	// Sampling with a seed repeats itself.
	chatParams.Temperature = openai.Float(0.9)
	chatParams.TopP = openai.Float(0.9)
	chatParams.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	a, err := client.Chat.Completions.New(ctx, chatParams)
	require.NoError(t, err)
	b, err := client.Chat.Completions.New(ctx, chatParams)
	require.NoError(t, err)
	require.Equal(t, a.Choices[0].Message.Content, b.Choices[0].Message.Content)

	// The wrong key is a 401 the client reports as such.
	wrong := openaiClient(ts, "wrong")
	_, err = wrong.Completions.New(ctx, params)
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 401, apiErr.StatusCode)
}
