package serve

import (
	"strings"

	"github.com/minerva-llm/minerva/tokenizer"
)

// textOut turns a sequence's generated tokens into text that is final: a
// piece is released once no stop string can begin in it and it ends on a
// whole UTF-8 character (tokenizer.StreamDecoder holds partial characters
// back). It is runtime.Generate's stop rule made incremental: each token
// costs the length of the held-back tail, not of the whole text, since the
// scheduler runs it for every sequence after every step.
type textOut struct {
	dec   *tokenizer.StreamDecoder
	stops []string
	tail  string // decoded, not yet released: a possible start of a stop string
	match string // the stop string found
}

func newTextOut(tok *tokenizer.Tokenizer, special bool, stops []string) *textOut {
	return &textOut{dec: tok.NewStreamDecoderWith(tokenizer.DecodeOptions{Special: special}), stops: stops}
}

// add decodes the next token and returns the text that became final, and
// whether a stop string now appears: then the text ends just before it,
// and generation ends.
func (o *textOut) add(id int32) (string, bool) {
	o.tail += o.dec.Add(id)
	return o.addDecoded()
}

// addDecoded looks for the stop strings in the tail just decoded.
func (o *textOut) addDecoded() (string, bool) {
	best := -1
	for _, s := range o.stops {
		if i := strings.Index(o.tail, s); i >= 0 && (best < 0 || i < best) {
			best, o.match = i, s
		}
	}
	if best >= 0 {
		piece := o.tail[:best]
		o.tail = ""
		return piece, true
	}
	safe := len(o.tail)
	for _, s := range o.stops {
		for k := min(len(s)-1, len(o.tail)); k > 0; k-- {
			if strings.HasSuffix(o.tail, s[:k]) {
				safe = min(safe, len(o.tail)-k)
				break
			}
		}
	}
	piece := o.tail[:safe]
	o.tail = o.tail[safe:]
	return piece, false
}

// flush releases what was held back when generation ends without a stop
// string (an unfinished character becomes U+FFFD).
func (o *textOut) flush() string {
	if o.match != "" {
		return ""
	}
	piece := o.tail + o.dec.Flush()
	o.tail = ""
	return piece
}
