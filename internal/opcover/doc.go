// Package opcover holds the op × backend coverage test: every op of ir's
// table against the reference interpreter, the CPU backend and the CUDA and
// Metal emitters, each backend answering from its own dispatch table. A
// missing cell fails the test unless it is listed as deliberately absent,
// with the reason (ggml's test-backend-ops, as a failure).
package opcover
