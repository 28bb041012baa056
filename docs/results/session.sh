# Sourced by the scripts that run one unit of a multi-session study (controls/pair.sh, smol-self/seed.sh,
# evidence-size/seed.sh): the checks and helpers they share. Sets here (the sourcing script's folder), lake and py
# (MAPF_LAKE and PYTHON name other commands for mapf-lake and python; default: those on PATH).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
lake=${MAPF_LAKE:-mapf-lake}
py=${PYTHON:-python}

declared() {  # declared SCRIPT WHAT VALUE ALLOWED...: refuse (exit 2, one line) a value the declaration does not name
    local script=$1 what=$2 value=$3
    shift 3
    for allowed in "$@"; do [[ $value == "$allowed" ]] && return 0; done
    local listed
    listed=$(printf '%s, ' "$@")
    echo "$script: $what $value: one of ${listed%, } (the declared ones)" >&2
    exit 2
}

unit() {  # unit SCRIPT WHAT "ALLOWED ..." ARGS...: ARGS must be VALUE RUNS, VALUE declared; sets value and runs
    local script=$1 what=$2 allowed=$3
    shift 3
    if (($# != 2)); then
        echo "usage: $script $what RUNS ($what one of ${allowed// /, }: the declared ones)" >&2
        exit 2
    fi
    # shellcheck disable=SC2086  # the allowed values, one word each
    declared "$script" "$what" "$1" $allowed
    value=$1
    runs=$2
}

step() { echo "[$(date -u +%FT%TZ)] $*" >&2; }  # a timed line on stderr

into() {  # into FILE COMMAND...: the command's stdout, renamed into FILE once the command has succeeded
    local file=$1
    shift
    "$@" > "$file.tmp" && mv "$file.tmp" "$file"
}
