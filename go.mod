module github.com/minerva-llm/minerva

go 1.24

require (
	github.com/alecthomas/kong v1.17.0
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
