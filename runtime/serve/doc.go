// Package serve is Minerva's serving half: a continuous-batching scheduler
// over a runtime.Program's sequence slots, and an OpenAI-compatible HTTP API
// over the scheduler (what `minervac serve` runs).
//
// # Scheduler
//
// New takes a compiled program (all of its slots) and the model's
// tokenizer. Submit checks a Request (prompt and max_tokens against the
// context, sampling settings, stop strings) and queues it, first come first
// served, in a bounded queue (ErrQueueFull beyond it). One goroutine steps
// every sequence holding a slot: each step (runtime.Rows) carries the decode
// row of every sequence past its prompt and chunks of the prompts being
// read, at most Config.Chunk prompt rows in all, so the weights are read
// once per step for all of them and a long prompt delays the running
// streams by one chunk per step. After a step each sequence samples its
// next token (Sampling: logit bias and penalties here, then runtime's
// Sampler), decodes it incrementally, watches its stop strings, and its
// Stream receives the text that became final. A request whose context ends
// (the client went away) or that is cancelled leaves its slot before the
// next step.
//
// A request's greedy tokens do not depend on the requests beside it: the
// CPU backend's batched step gives every row the bits a step of that row
// alone gives (runtime/cpu TestBatchInvariance), and TestConcurrentGreedyEqualsSolo
// holds the server to it.
//
// # HTTP
//
// Server answers POST /v1/chat/completions and /v1/completions (SSE
// streaming with stream_options.include_usage, or one JSON response with
// usage), GET /v1/models, GET /health (503 while loading), GET /metrics
// (Prometheus), POST /tokenize and /detokenize. Chat prompts are rendered
// with the model's chat template (package chat), with chat.RenderHarmony
// for a gpt-oss model without one (whose output the harmony parser splits
// into reasoning_content, content and tool_calls), and with ChatML
// otherwise. Errors are OpenAI's JSON shape: 400 naming the bad field, 401,
// 404, 405, 413, 429 when the queue is full, 503 while loading or shutting
// down. Each request is logged in one log/slog line.
package serve
