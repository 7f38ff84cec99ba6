# Sourced by the other scripts: puts the project's tools on PATH.
TOOLS_DIR=${HEADLAB_TOOLS_DIR:-$HOME/.cache/headlab-tools}
export HEADLAB_TOOLS_DIR=$TOOLS_DIR
export PATH="$HOME/.cargo/bin:$TOOLS_DIR/node_modules/.bin:$PATH"
