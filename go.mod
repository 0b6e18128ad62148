module github.com/minerva-llm/minerva

go 1.24

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)
