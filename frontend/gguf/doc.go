// Package gguf reads and writes GGUF files (versions 2 and 3), the container
// that llama.cpp and ggml use for model weights and their metadata.
//
// A GGUF file is a small header (magic "GGUF", version, tensor and key/value
// counts), a list of typed key/value pairs, a list of tensor descriptions
// (name, shape, ggml type, offset), padding up to general.alignment, and then
// the tensor data. All numbers are little endian.
//
// The reader is written for untrusted input: every length, count and offset is
// checked against the bytes that remain before anything is allocated or
// sliced, so a truncated, corrupted or hostile file produces a one-line error
// that names the offending field and its byte offset instead of a panic or an
// allocation the size of a forged count. Open maps the file read-only where
// the OS allows it, so tensor data is never copied; metadata values are copied
// out of the mapping and stay valid after Close.
//
// Tensor types use ggml's numbering, which is also ir.DType's, so a tensor's
// type converts with ir.DType(id) and no table.
package gguf
