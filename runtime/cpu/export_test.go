package cpu

import "github.com/minerva-llm/minerva/runtime"

// LogitRowsDone is the number of rows p's logits matmul has computed.
func LogitRowsDone(p runtime.Program) int64 { return p.(*program).logitRowsDone }
