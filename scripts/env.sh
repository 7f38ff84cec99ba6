# Sourced by the other scripts: puts the project's tools on PATH.
TOOLS_DIR=${HEADLAB_TOOLS_DIR:-$HOME/.cache/headlab-tools}
export HEADLAB_TOOLS_DIR=$TOOLS_DIR
export PATH="$HOME/.cargo/bin:$TOOLS_DIR/node_modules/.bin:$PATH"
# The page's wasm names no path of the machine that built it (a panic's text names source
# files): the home folder, cargo's home and this checkout are remapped in its panic locations
# (rustc uses the last prefix that matches). Cargo adds these flags to .cargo/config.toml's.
HEADLAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
case "$HEADLAB_ROOT ${CARGO_HOME:-$HOME/.cargo}" in
  *' '*' '*) ;; # a path with a space cannot be passed in these flags: left as it is
  *) export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="--remap-path-prefix=$HOME=home --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=cargo --remap-path-prefix=$HEADLAB_ROOT=headlab" ;;
esac
