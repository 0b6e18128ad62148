package chat

import "strings"

// The reasoning tags of Qwen3, DeepSeek-R1 and the models that copied
// them: the model thinks between <think> and </think>, then answers.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// ThinkTemplate reports whether a chat template writes <think> reasoning
// (Qwen3's strips it from earlier turns and opens it when thinking is
// asked for): the output of such a model is split by a ThinkParser.
func ThinkTemplate(source string) bool {
	return strings.Contains(source, thinkOpen) && strings.Contains(source, thinkClose)
}

// PromptOpensThink reports whether a rendered prompt ends inside <think>
// (a template that opens the reasoning for the model, as DeepSeek-R1's and
// Qwen3's thinking-only models do): the output then starts in reasoning,
// without its own <think>.
func PromptOpensThink(prompt string) bool {
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), thinkOpen)
}

// ThinkParser splits the output of a <think> model, fed as it is generated
// (pieces of any size), into reasoning — the text between <think> at the
// start of the output and </think> — and content, everything else. Output
// that does not open with <think> (after whitespace) is content as it is,
// tags and all. The whitespace just inside the tags and after </think> is
// dropped, as the templates write it. A partial tag at the end of a piece,
// and whitespace that may end the reasoning, is held until the next piece
// says what it is, so that feeding a text in pieces gives the same text as
// feeding it whole. It emits HarmonyReasoning and HarmonyContent events,
// never a tool call.
type ThinkParser struct {
	state    thinkState
	buf      string // received text not yet emitted
	trimLead bool   // drop the whitespace that starts the current part

	reasoning, content strings.Builder
}

type thinkState int

const (
	thinkStart thinkState = iota // nothing but whitespace yet: <think> may come
	thinkIn                      // in the reasoning
	thinkOut                     // in the content
)

// NewThinkParser returns a parser; inside says the prompt opened the
// reasoning already (PromptOpensThink).
func NewThinkParser(inside bool) *ThinkParser {
	if inside {
		return &ThinkParser{state: thinkIn, trimLead: true}
	}
	return &ThinkParser{}
}

// Push feeds the next piece of output and returns what can be shown of it.
func (p *ThinkParser) Push(text string) []HarmonyEvent {
	p.buf += text
	return p.consume(false)
}

// Finish ends the output and returns what was held back. Reasoning that
// never closed stays reasoning.
func (p *ThinkParser) Finish() []HarmonyEvent { return p.consume(true) }

// Reasoning and Content are the text emitted so far.
func (p *ThinkParser) Reasoning() string { return p.reasoning.String() }
func (p *ThinkParser) Content() string   { return p.content.String() }

const spaces = " \t\r\n"

func (p *ThinkParser) consume(final bool) []HarmonyEvent {
	var ev []HarmonyEvent
	emit := func(kind HarmonyEventKind, s string) {
		if s == "" {
			return
		}
		if kind == HarmonyReasoning {
			p.reasoning.WriteString(s)
		} else {
			p.content.WriteString(s)
		}
		ev = append(ev, HarmonyEvent{Kind: kind, Text: s})
	}
	for {
		switch p.state {
		case thinkStart:
			t := strings.TrimLeft(p.buf, spaces)
			if strings.HasPrefix(t, thinkOpen) {
				p.buf, p.state, p.trimLead = t[len(thinkOpen):], thinkIn, true
				continue
			}
			if !final && strings.HasPrefix(thinkOpen, t) {
				return ev // whitespace, maybe the start of <think>
			}
			p.state = thinkOut
		case thinkIn:
			if p.trimLead {
				p.buf = strings.TrimLeft(p.buf, spaces)
				if p.buf == "" && !final {
					return ev
				}
				p.trimLead = false
			}
			if i := strings.Index(p.buf, thinkClose); i >= 0 {
				emit(HarmonyReasoning, strings.TrimRight(p.buf[:i], spaces))
				p.buf, p.state, p.trimLead = p.buf[i+len(thinkClose):], thinkOut, true
				continue
			}
			if final {
				emit(HarmonyReasoning, strings.TrimRight(p.buf, spaces))
				p.buf = ""
				return ev
			}
			// Hold a partial </think> and the whitespace before it.
			head := p.buf[:len(p.buf)-partialSuffix(p.buf, thinkClose)]
			shown := strings.TrimRight(head, spaces)
			emit(HarmonyReasoning, shown)
			p.buf = p.buf[len(shown):]
			return ev
		case thinkOut:
			if p.trimLead {
				p.buf = strings.TrimLeft(p.buf, spaces)
				if p.buf == "" {
					return ev
				}
				p.trimLead = false
			}
			emit(HarmonyContent, p.buf)
			p.buf = ""
			return ev
		}
	}
}

// partialSuffix is the length of the longest proper prefix of tag that s
// ends with.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
