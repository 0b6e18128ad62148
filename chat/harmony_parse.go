package chat

import (
	"strings"
	"unicode"
)

// Harmony's control tokens as text, the way a decoder writes them.
const (
	hStart     = "<|start|>"
	hEnd       = "<|end|>"
	hMessage   = "<|message|>"
	hChannel   = "<|channel|>"
	hConstrain = "<|constrain|>"
	hReturn    = "<|return|>"
	hCall      = "<|call|>"
	hEOT       = "<|endoftext|>"
)

// harmonyMarkers are the tokens the parser acts on.
var harmonyMarkers = []string{hStart, hEnd, hMessage, hChannel, hConstrain, hReturn, hCall, hEOT}

// HarmonyStopTokens end a generation: <|return|> after a final answer,
// <|call|> after a tool call (the caller runs the tool and continues), and
// <|endoftext|>. <|end|> only ends a message; the model goes on with the next.
var HarmonyStopTokens = []string{hReturn, hCall, hEOT}

// HarmonyMessage is one message of parsed output.
type HarmonyMessage struct {
	Role        string `json:"role"`
	Channel     string `json:"channel,omitempty"`
	Recipient   string `json:"recipient,omitempty"`    // e.g. "functions.get_weather"
	ContentType string `json:"content_type,omitempty"` // e.g. "json" (from " json" or " <|constrain|>json")
	Content     string `json:"content"`
	// Terminator is the token that ended the message: <|end|>, <|return|>,
	// <|call|> or <|endoftext|>; empty when the output stopped inside it.
	Terminator string `json:"terminator,omitempty"`
}

// HarmonyResult is what a gpt-oss output means.
type HarmonyResult struct {
	Reasoning string           // the analysis messages' text, joined with nothing between
	Content   string           // final messages and commentary preambles (commentary with no recipient)
	ToolCalls []ToolCall       // messages to functions.NAME, in order
	Messages  []HarmonyMessage // every message, as parsed
}

// HarmonyEventKind says what a HarmonyEvent carries.
type HarmonyEventKind int

const (
	// HarmonyReasoning carries more reasoning text (analysis channel).
	HarmonyReasoning HarmonyEventKind = iota
	// HarmonyContent carries more answer text (final channel, preambles, bare text).
	HarmonyContent
	// HarmonyToolCall carries a whole tool call, sent when its message ends.
	HarmonyToolCall
)

// HarmonyEvent is a piece of parsed output, ready to show or act on.
type HarmonyEvent struct {
	Kind     HarmonyEventKind
	Text     string   // for HarmonyReasoning and HarmonyContent
	ToolCall ToolCall // for HarmonyToolCall
}

// ParseHarmony parses a whole output at once: the same as one Push and Finish.
func ParseHarmony(output string) HarmonyResult {
	p := NewHarmonyParser()
	p.Push(output)
	p.Finish()
	return p.Result()
}

// headerKind is where a message header began, which decides what text may
// stand in it before a control token.
type headerKind int

const (
	// hdrFirst: the output's first message, whose "<|start|>assistant" is in
	// the prompt; only " to=RECIPIENT" (or a repeated "assistant") may come
	// before its <|channel|>.
	hdrFirst headerKind = iota
	// hdrAfterStart: after <|start|>: the role, maybe " to=RECIPIENT".
	hdrAfterStart
	// hdrBetween: after a message ended and before the next <|start|>:
	// whitespace is dropped.
	hdrBetween
)

// maxHeaderRecipient bounds " to=..." before text without markup counts as
// a bare answer; recipients are short names.
const maxHeaderRecipient = 200

// HarmonyParser splits gpt-oss output, fed as it is generated (decoded text
// pieces or token strings, of any size), into reasoning, content and tool
// calls. It never emits text that may still turn out to be a control token: a
// piece ending in "<|ch" is held until the next piece says what it is. Output
// without any harmony markup is the answer as it is. Feeding a text in pieces
// gives the same result and the same event text as feeding it whole.
type HarmonyParser struct {
	buf string // received text not yet consumed: at most a partial control token between pushes

	inContent bool            // in a message's content (or a bare answer), not in a header
	bare      bool            // the content is text without markup, not a message
	cur       HarmonyMessage  // the message being read, when inContent && !bare
	hdrKind   headerKind      // when !inContent
	hdr       strings.Builder // the header read so far, control tokens included
	hdrMarked bool            // the header holds a control token (<|channel|>, <|constrain|>)

	// The text so far; builders, as a long answer arrives a few bytes at a time.
	reasoning, content, curContent strings.Builder
	res                            HarmonyResult // messages and tool calls
	done                           bool
	stop                           string
}

// NewHarmonyParser returns a parser for output that follows a prompt ending
// in "<|start|>assistant", as harmony prompts do.
func NewHarmonyParser() *HarmonyParser { return &HarmonyParser{} }

// Done reports that a stop token (<|return|>, <|call|>, <|endoftext|>) came:
// the generation should end; more input is ignored.
func (p *HarmonyParser) Done() bool { return p.done }

// StopToken is the token that ended the generation, or "".
func (p *HarmonyParser) StopToken() string { return p.stop }

// Result is everything parsed so far. After Finish it is the whole output.
func (p *HarmonyParser) Result() HarmonyResult {
	r := p.res
	r.Reasoning, r.Content = p.reasoning.String(), p.content.String()
	r.ToolCalls = append([]ToolCall(nil), p.res.ToolCalls...)
	r.Messages = append([]HarmonyMessage(nil), p.res.Messages...)
	return r
}

// Push feeds the next piece of output and returns what can be shown of it.
func (p *HarmonyParser) Push(text string) []HarmonyEvent {
	if p.done {
		return nil
	}
	p.buf += text
	return p.consume(false)
}

// Finish ends the output: held text is released, a message cut off without
// a terminator is kept as it is (Terminator ""), and a header with no
// content is dropped unless it was a bare answer.
func (p *HarmonyParser) Finish() []HarmonyEvent {
	if p.done {
		return nil
	}
	ev := p.consume(true)
	switch {
	case p.inContent && !p.bare:
		ev = p.endMessage(ev, "")
	case !p.inContent:
		ev = p.flushHeaderAsBare(ev)
	}
	p.inContent, p.bare = false, false
	p.resetHeader(hdrBetween)
	return ev
}

// consume handles the buffer up to its last complete control token and, if
// final is false, the text before a possible partial one.
func (p *HarmonyParser) consume(final bool) []HarmonyEvent {
	var ev []HarmonyEvent
	for !p.done && p.buf != "" {
		at, marker := nextMarker(p.buf)
		if at < 0 {
			keep := 0
			if !final {
				keep = partialMarkerLen(p.buf)
			}
			text := p.buf[:len(p.buf)-keep]
			p.buf = p.buf[len(p.buf)-keep:]
			ev = p.text(ev, text)
			break
		}
		ev = p.text(ev, p.buf[:at])
		p.buf = p.buf[at+len(marker):]
		ev = p.marker(ev, marker)
	}
	if p.done {
		p.buf = ""
	}
	return ev
}

// nextMarker finds the first control token in s.
func nextMarker(s string) (int, string) {
	for i := strings.Index(s, "<|"); i >= 0; {
		for _, m := range harmonyMarkers {
			if strings.HasPrefix(s[i:], m) {
				return i, m
			}
		}
		j := strings.Index(s[i+2:], "<|")
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return -1, ""
}

// partialMarkerLen is the length of the longest end of s that begins a
// control token without completing one, which must wait for more text.
func partialMarkerLen(s string) int {
	start := len(s) - len(hConstrain) // no end longer than the longest token can be partial
	if start < 0 {
		start = 0
	}
	for i := start; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		tail := s[i:]
		for _, m := range harmonyMarkers {
			if len(tail) < len(m) && strings.HasPrefix(m, tail) {
				return len(tail)
			}
		}
	}
	return 0
}

// text handles text between control tokens.
func (p *HarmonyParser) text(ev []HarmonyEvent, s string) []HarmonyEvent {
	if s == "" {
		return ev
	}
	if p.inContent {
		return p.appendContent(ev, s)
	}
	p.hdr.WriteString(s)
	if !p.hdrMarked && p.hdrKind != hdrAfterStart && !headerMayContinue(p.hdrKind, p.hdr.String()) {
		// Text that cannot be a header: the model answered without markup.
		return p.flushHeaderAsBare(ev)
	}
	return ev
}

// headerMayContinue reports whether h (text read where a header is due,
// before any control token) can still become one: "assistant" then
// " to=RECIPIENT", or a prefix of that; whitespace first after a message.
// Once it cannot, it never can again however it goes on, so deciding early
// (streaming) and late (whole text) agree.
func headerMayContinue(kind headerKind, h string) bool {
	if kind == hdrBetween {
		h = strings.TrimLeftFunc(h, unicode.IsSpace)
	}
	if strings.HasPrefix("assistant", h) {
		return true
	}
	rest, ok := strings.CutPrefix(h, "assistant")
	if !ok {
		rest = h
	}
	if strings.HasPrefix(" to=", rest) {
		return true
	}
	recipient, ok := strings.CutPrefix(rest, " to=")
	return ok && len(recipient) <= maxHeaderRecipient && !strings.ContainsFunc(recipient, unicode.IsSpace)
}

// flushHeaderAsBare turns a header that held only text into a bare answer
// (whitespace alone between messages is dropped).
func (p *HarmonyParser) flushHeaderAsBare(ev []HarmonyEvent) []HarmonyEvent {
	h := p.hdr.String()
	if p.hdrMarked || p.hdrKind == hdrAfterStart || strings.TrimSpace(h) == "" {
		return ev
	}
	p.resetHeader(p.hdrKind)
	p.inContent, p.bare = true, true
	return p.appendContent(ev, h)
}

func (p *HarmonyParser) resetHeader(kind headerKind) {
	p.hdr.Reset()
	p.hdrKind, p.hdrMarked = kind, false
}

// route says where a message's text goes.
func (m *HarmonyMessage) route() (HarmonyEventKind, bool) {
	switch {
	case m.Recipient != "":
		return 0, false // a tool call (or a built-in tool's input): not shown
	case m.Channel == "analysis":
		return HarmonyReasoning, true
	default: // final, commentary preambles, and channels the format does not name
		return HarmonyContent, true
	}
}

func (p *HarmonyParser) appendContent(ev []HarmonyEvent, s string) []HarmonyEvent {
	if p.bare {
		p.content.WriteString(s)
		return append(ev, HarmonyEvent{Kind: HarmonyContent, Text: s})
	}
	p.curContent.WriteString(s)
	kind, shown := p.cur.route()
	if !shown {
		return ev
	}
	if kind == HarmonyReasoning {
		p.reasoning.WriteString(s)
	} else {
		p.content.WriteString(s)
	}
	return append(ev, HarmonyEvent{Kind: kind, Text: s})
}

// marker handles a control token.
func (p *HarmonyParser) marker(ev []HarmonyEvent, m string) []HarmonyEvent {
	if !p.inContent {
		switch m {
		case hChannel, hConstrain:
			p.hdr.WriteString(m)
			p.hdrMarked = true
		case hMessage:
			p.cur = parseHarmonyHeader(p.hdrKind, p.hdr.String())
			p.resetHeader(hdrBetween)
			p.inContent, p.bare = true, false
		case hStart:
			ev = p.flushHeaderAsBare(ev)
			p.endBare()
			p.resetHeader(hdrAfterStart)
		default: // a terminator where a header was due: a bare answer ends, a header is dropped
			ev = p.flushHeaderAsBare(ev)
			p.endBare()
			p.resetHeader(hdrBetween)
			p.stopOn(m)
		}
		return ev
	}
	switch m {
	case hEnd, hReturn, hCall, hEOT:
		if p.bare {
			p.endBare()
		} else {
			ev = p.endMessage(ev, m)
		}
		p.resetHeader(hdrBetween)
		p.stopOn(m)
	case hStart, hChannel:
		// A new message without the previous one's terminator: the previous is
		// cut off there (a model that skips <|end|> still parses).
		if p.bare {
			p.endBare()
		} else {
			ev = p.endMessage(ev, "")
		}
		p.resetHeader(hdrAfterStart)
		if m == hChannel {
			p.hdr.WriteString(m)
			p.hdrMarked = true
		}
	default: // <|message|> or <|constrain|> inside content: the model wrote it, so it is text
		ev = p.appendContent(ev, m)
	}
	return ev
}

func (p *HarmonyParser) endBare() {
	if p.inContent && p.bare {
		p.inContent, p.bare = false, false
	}
}

func (p *HarmonyParser) stopOn(m string) {
	for _, s := range HarmonyStopTokens {
		if m == s {
			p.done, p.stop = true, m
		}
	}
}

// endMessage records the current message; a tool call is sent now, whole.
func (p *HarmonyParser) endMessage(ev []HarmonyEvent, terminator string) []HarmonyEvent {
	p.cur.Terminator = terminator
	p.cur.Content = p.curContent.String()
	p.curContent.Reset()
	p.res.Messages = append(p.res.Messages, p.cur)
	if name, ok := strings.CutPrefix(p.cur.Recipient, "functions."); ok {
		call := ToolCall{Name: name, Arguments: p.cur.Content}
		p.res.ToolCalls = append(p.res.ToolCalls, call)
		ev = append(ev, HarmonyEvent{Kind: HarmonyToolCall, ToolCall: call})
	}
	p.cur = HarmonyMessage{}
	p.inContent = false
	return ev
}

// parseHarmonyHeader reads a header: an optional role and " to=RECIPIENT",
// then "<|channel|>CHANNEL", with " to=RECIPIENT" and a content type
// (" json" or " <|constrain|>json") possibly after the channel.
func parseHarmonyHeader(kind headerKind, h string) HarmonyMessage {
	m := HarmonyMessage{Role: "assistant"}
	rolePart, chanPart, _ := strings.Cut(h, hChannel)
	for i, f := range strings.Fields(strings.ReplaceAll(rolePart, hConstrain, " ")) {
		switch {
		case strings.HasPrefix(f, "to="):
			m.Recipient = f[len("to="):]
		case i == 0 && kind == hdrAfterStart:
			m.Role = f
		}
	}
	for i, f := range strings.Fields(strings.ReplaceAll(chanPart, hConstrain, " ")) {
		switch {
		case strings.HasPrefix(f, "to="):
			m.Recipient = f[len("to="):]
		case i == 0:
			m.Channel = f
		default:
			m.ContentType = f
		}
	}
	return m
}

// Message is the assistant turn to append to the conversation for the next
// prompt: with tool calls, ToolCallMessage with the reasoning as "thinking"
// (the gpt-oss template keeps it before a call until a final answer follows,
// and refuses content and thinking together there); otherwise the content,
// with the reasoning as "thinking" (dropped from earlier turns when
// rendered).
func (r HarmonyResult) Message() *Object {
	if len(r.ToolCalls) > 0 {
		return ToolCallMessage("", r.Reasoning, r.ToolCalls)
	}
	m := NewMessage("assistant", r.Content)
	if r.Reasoning != "" {
		m.Set("thinking", r.Reasoning)
	}
	return m
}
