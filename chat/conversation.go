package chat

import (
	"errors"
	"fmt"
)

// Conversation is what a chat template renders: OpenAI-style messages and,
// optionally, tool definitions.
//
// Messages are Objects so that any field a template reads (role, content,
// tool_calls, tool_call_id, name, thinking, reasoning_content, ...) passes
// through with its key order, as transformers passes the request's dicts.
type Conversation struct {
	Messages []*Object
	// Tools is nil when the request has none: templates then see tools = None.
	// Each entry is usually {"type": "function", "function": {...}}.
	Tools []any
}

// ParseConversation reads an OpenAI-style request body, {"messages": [...],
// "tools": [...]}, keeping key order and number kinds. Other top-level keys
// (model, temperature, ...) are ignored. Every message must be an object with
// a string "role".
func ParseConversation(data []byte) (Conversation, error) {
	v, err := ParseJSON(data)
	if err != nil {
		return Conversation{}, err
	}
	root, ok := v.(*Object)
	if !ok {
		return Conversation{}, fmt.Errorf("chat: the conversation must be a JSON object with \"messages\", got %s", jsonKind(v))
	}
	var conv Conversation
	msgs, ok := root.Get("messages")
	if !ok {
		return Conversation{}, errors.New("chat: the conversation has no \"messages\" array")
	}
	list, ok := msgs.([]any)
	if !ok {
		return Conversation{}, fmt.Errorf("chat: \"messages\" must be an array, got %s", jsonKind(msgs))
	}
	for i, m := range list {
		obj, ok := m.(*Object)
		if !ok {
			return Conversation{}, fmt.Errorf("chat: message %d must be an object, got %s", i, jsonKind(m))
		}
		if r, _ := obj.Get("role"); r == nil {
			return Conversation{}, fmt.Errorf("chat: message %d has no \"role\"", i)
		} else if _, ok := r.(string); !ok {
			return Conversation{}, fmt.Errorf("chat: message %d: \"role\" must be a string, got %s", i, jsonKind(r))
		}
		conv.Messages = append(conv.Messages, obj)
	}
	if tools, ok := root.Get("tools"); ok && tools != nil {
		tl, ok := tools.([]any)
		if !ok {
			return Conversation{}, fmt.Errorf("chat: \"tools\" must be an array or null, got %s", jsonKind(tools))
		}
		conv.Tools = tl
	}
	return conv, nil
}

// NewMessage returns {"role": role, "content": content}.
func NewMessage(role, content string) *Object {
	return NewObject().Set("role", role).Set("content", content)
}

// Add appends a {"role", "content"} message and returns it, so a caller can
// set more fields (e.g. "thinking" on an assistant turn).
func (c *Conversation) Add(role, content string) *Object {
	m := NewMessage(role, content)
	c.Messages = append(c.Messages, m)
	return m
}

// ToolCallMessage builds the assistant message for tool calls the model made,
// in the OpenAI shape templates expect: {"role": "assistant", "content": "",
// "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments"}}]}. Arguments that are valid JSON are stored decoded, because
// templates print them with tojson (a string would come out quoted); others
// are kept as the raw string. thinking, when not empty, is stored as
// "thinking", the field the gpt-oss template reads.
func ToolCallMessage(content, thinking string, calls []ToolCall) *Object {
	m := NewObject().Set("role", "assistant").Set("content", content)
	list := make([]any, 0, len(calls))
	for _, c := range calls {
		var args any = c.Arguments
		if v, err := ParseJSON([]byte(c.Arguments)); err == nil {
			args = v
		}
		call := NewObject()
		if c.ID != "" {
			call.Set("id", c.ID)
		}
		call.Set("type", "function").Set("function", NewObject().Set("name", c.Name).Set("arguments", args))
		list = append(list, call)
	}
	m.Set("tool_calls", list)
	if thinking != "" {
		m.Set("thinking", thinking)
	}
	return m
}

// ToolResultMessage is {"role": "tool", "tool_call_id", "name", "content"}.
func ToolResultMessage(callID, name, content string) *Object {
	m := NewObject().Set("role", "tool")
	if callID != "" {
		m.Set("tool_call_id", callID)
	}
	if name != "" {
		m.Set("name", name)
	}
	return m.Set("content", content)
}

// ToolCall is one function call parsed from model output.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // the model's text, verbatim (usually JSON)
}
