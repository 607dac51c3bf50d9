#!/usr/bin/env bash
# Installs what ltd needs to build, test and run its examples on Debian 12.
# Run as root. Installs only what is missing, so a second run is quick.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ccache
  libuv1-dev libgrpc++-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libspdlog-dev libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  libtorch-dev libgloo-dev python3-torch gdb elfutils procps
  etcd-server golang-etcd-server-dev
  # Multi-node runs seal their etcd records with MUNGE (libmunge), and its
  # tests run a munged of their own.
  munge libmunge-dev
  # The Slurm tests and bench run a two-node cluster on this machine.
  slurm-wlm
  libsystemd-dev prometheus-cpp-dev curl systemd
  # The tests of --output on a file system that never answers: a FUSE
  # server of their own.
  fuse3 libfuse3-dev
  # The Python client (stubs from protobuf-compiler-grpc's grpc_python_plugin),
  # ltd.launch, and its tests in real Jupyter kernels.
  python3-grpcio python3-protobuf python3-cloudpickle
  python3-nbclient python3-ipykernel python3-jupyter-client
  # The packages (scripts/package.sh): man pages from markdown, the .debs'
  # runtime dependencies, Debian's checks of a package (lintian); and
  # their test, Debian 12 and 13 roots booted with systemd-nspawn
  # (tests/package/package_test.sh).
  go-md2man dpkg-dev lintian debootstrap systemd-container
  # The GPU check kit (scripts/gpu-kit.sh): its programs find their
  # bundled shared libraries through an $ORIGIN RUNPATH.
  patchelf
  # The sanitized build (scripts/sanitize.sh) and the fuzzers
  # (scripts/fuzz.sh): clang, libFuzzer and the sanitizers' runtimes.
  clang-16 libclang-rt-16-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
