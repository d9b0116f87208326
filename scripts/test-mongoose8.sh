#!/usr/bin/env bash
# Runs the plugin's tests against Mongoose 8 (the package supports ^8 || ^9; the main suite
# runs on 9). Works in a temporary copy of the tracked files, so the checkout's node_modules
# stay on Mongoose 9. Arguments are Jest paths (default: the plugin and example tests); the
# tests run once per topology in CI_TOPOLOGIES (default: replset), in the same copy.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
# Never a tracked node_modules (a symlink to a shared install committed by mistake): npm ci
# below would empty the directory it points to.
git ls-files -z | grep -zv '^node_modules\(/\|$\)' | xargs -0 tar -cf - | tar -xf - -C "$work"
cd "$work"
export MONGOMS_DISABLE_POSTINSTALL=1
npm ci --no-audit --no-fund --loglevel=error
npm install --no-save --no-audit --no-fund --loglevel=error "mongoose@^${MONGOOSE_MAJOR:-8}"
if [ "$#" -eq 0 ]; then set -- __tests__/plugin __tests__/examples; fi
for topology in ${CI_TOPOLOGIES:-replset}; do
  echo "Plugin tests on mongoose $(node -p "require('mongoose/package.json').version"), ${topology}"
  MONGO_TOPOLOGY="$topology" npx jest "$@"
done
