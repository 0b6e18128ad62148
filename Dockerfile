# minervac serve in a container: the model is not in the image, it is
# mounted at /models (a volume; in Kubernetes a PersistentVolumeClaim, see
# deploy/kubernetes/). Build and run:
#
#   docker build -t minervac .
#   docker run -p 8080:8080 -v $PWD/models:/models:ro minervac \
#       serve /models/model.gguf --host 0.0.0.0 --port 8080
#
# Stage 1 builds minervac without cgo (CGO_ENABLED=0, trimmed paths).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/minervac ./cmd/minervac

# Stage 2 is the binary alone on distroless (no shell, no package manager,
# a non-root user). Not distroless/static or scratch: minervac is built
# without cgo, but it opens the C library at run time (the CUDA backend
# loads libcuda through it, github.com/ebitengine/purego), so its ELF names
# the glibc loader; distroless/base has glibc and nothing else.
# cmd/minervac's TestDockerfileBase checks this against the binary.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/minervac /usr/local/bin/minervac
# `serve MODEL.gguf` compiles the model once and caches the plan here.
ENV MINERVA_CACHE_DIR=/tmp/minerva-cache
VOLUME ["/models"]
EXPOSE 8080
USER nonroot
ENTRYPOINT ["/usr/local/bin/minervac"]
CMD ["serve", "/models/model.gguf", "--host", "0.0.0.0", "--port", "8080"]
