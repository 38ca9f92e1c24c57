# voxtrain for GPU nodes: build `train` with the CUDA backend on NVIDIA's
# devel image, ship only the binary on the matching cuDNN runtime image
# (which carries cuBLAS and cuDNN; the binary loads both with dlopen at run
# time — cuDNN for the tf32 and bf16 convolutions — and links only
# libcuda.so.1, provided by the host driver through the NVIDIA container
# toolkit).
#
#   docker build -t voxtrain .
#   docker run --gpus all -v $PWD/data:/data voxtrain --config /data/run.yaml
#
# No --shm-size is needed: the data pipeline is goroutines in one process
# (no worker processes, no /dev/shm), so Docker's 64 MB /dev/shm default is fine.

ARG CUDA_VERSION=11.8.0
ARG UBUNTU=ubuntu22.04
ARG CUDNN=cudnn8

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
ARG GO_VERSION=1.26.0
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl git \
    && rm -rf /var/lib/apt/lists/* \
    && curl -fsSL "https://go.dev/dl/go${GO_VERSION}.linux-amd64.tar.gz" | tar -C /usr/local -xz
ENV PATH=/usr/local/go/bin:$PATH CGO_ENABLED=1 \
    CGO_LDFLAGS="-L/usr/local/cuda/lib64/stubs"
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -tags cuda -trimpath -o /out/train ./cmd/train

FROM nvidia/cuda:${CUDA_VERSION}-${CUDNN}-runtime-${UBUNTU}
COPY --from=build /out/train /usr/local/bin/train
ENTRYPOINT ["/usr/local/bin/train"]
