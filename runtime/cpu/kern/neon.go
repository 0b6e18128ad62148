package kern

//go:generate go run ../../../codegen/goasm/gen/kernneon -dir .
