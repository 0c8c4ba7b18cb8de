#!/usr/bin/env bash
# One-time set-up of the developer queue for this project (seed 004 §19.1):
# builds bin/spine, creates the data dir, and runs `spine setup` when there
# is no spine.yml yet. Then: `make run` (a local cluster), `bin/spine reload`.
# Env: DATA (default ./data), CONFIG (default ./spine.yml); extra arguments
# go to `spine setup` (e.g. --yes to take the defaults without questions).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-./data}
CONFIG=${CONFIG:-./spine.yml}
mkdir -p bin "$DATA"
go build -o bin/spine ./cmd/spine
echo "built bin/spine; data dir $DATA"
if [ ! -f "$CONFIG" ]; then
  bin/spine setup --config "$CONFIG" "$@"
else
  echo "$CONFIG exists: run 'bin/spine setup' to change it"
fi
