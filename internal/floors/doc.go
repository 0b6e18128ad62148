// Package floors holds the check that no import points up a floor
// (floors_test.go); it has no code of its own.
//
// The packages of the module stand on floors, lowest first. A package
// imports only from its own floor or lower ones, so that each floor can be
// read, tested and reused without the ones above it:
//
//	0 core       ir, ir/rope, tokenizer, chat, internal helpers
//	1 weights    quant (dequantizing needs only ir's dtypes)
//	2 reference  ir/eval, ir/fold (the interpreter and constant folding
//	             read quantized weights)
//	3 plan       plan (the plan.bin container: a graph, a vocabulary, a config)
//	4 frontend   frontend, frontend/gguf, frontend/safetensors, frontend/hf,
//	             frontend/arch, synth (model files and directories → graphs)
//	5 passes     passes
//	6 codegen    codegen/...
//	7 runtime    runtime/...
//	8 commands   cmd/...
//
// Besides the floors, the runtime does not import the frontend: it runs
// graphs and plans, and reads no model file (it gets the parts from its
// caller: runtime.NewModel, Backend.Compile). The packages ir and tokenizer
// import nothing of the module. Test files are exempt: a test may load a model to
// exercise a lower floor.
package floors
