# shellcheck shell=bash
# Stand-ins for the devstack functions the mlaccel plugin calls, so its
# phases run outside a devstack checkout. Calls that would install software
# are recorded in $SHIM_CALLS instead; the ini functions edit files for real.

ENABLED_SERVICES=${ENABLED_SERVICES:-}

function define_plugin { echo "define_plugin $*" >> "$SHIM_CALLS"; }
function enable_service {
    local service
    for service in "$@"; do
        ENABLED_SERVICES="$ENABLED_SERVICES,$service"
    done
}
function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
    done
    return 1
}
function trueorfalse {
    local default=$1 value=${!2:-}
    case "$value" in
        1|yes|Yes|YES|true|True|TRUE|on|On|ON) echo True ;;
        0|no|No|NO|false|False|FALSE|off|Off|OFF) echo False ;;
        *) echo "$default" ;;
    esac
}
function setup_develop { echo "setup_develop $*" >> "$SHIM_CALLS"; }
function run_process { echo "run_process $*" >> "$SHIM_CALLS"; }
function stop_process { echo "stop_process $*" >> "$SHIM_CALLS"; }
function get_python_exec_prefix { dirname "$SHIM_PYTHON"; }
function echo_summary { echo "summary: $*"; }
function die { shift; echo "die: $*" >&2; exit 1; }
function sudo { "$@"; }
function iniset {
    # devstack's iniset makes a missing file.
    [[ -e $1 ]] || : > "$1"
    "$SHIM_PYTHON" -c 'import sys
from mlaccel.inifile import IniFile
ini = IniFile(sys.argv[1]); ini.set(sys.argv[2], sys.argv[3], [sys.argv[4]])
ini.save()' "$@"
}
function iniget {
    "$SHIM_PYTHON" -c 'import sys
from mlaccel.inifile import IniFile
values = IniFile(sys.argv[1]).get(sys.argv[2], sys.argv[3]) or [""]
print(values[-1])' "$@"
}
