# Enter the beit_mm environment in the current shell:   source tools/activate.sh
#
# Finds (or, on first use, builds: ~15 minutes) the venv of tools/setup_env.sh, activates it (so `python` and `pip`
# are the venv's) and puts this checkout first on PYTHONPATH (beit_mm is not installed into the shared venv: one venv
# serves every checkout on the machine). Afterwards every command of README.md and docs/ runs as written, from the checkout's
# root. `deactivate` leaves the venv (PYTHONPATH keeps the checkout until the shell ends).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "tools/activate.sh must be sourced, not run: source tools/activate.sh" >&2
    exit 1
fi
_beit_mm_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if _beit_mm_venv="$(bash "$_beit_mm_root/tools/setup_env.sh" | tail -n1)" && [ -f "$_beit_mm_venv/bin/activate" ]; then
    # shellcheck disable=SC1091
    . "$_beit_mm_venv/bin/activate"
    case ":${PYTHONPATH:-}:" in
        *":$_beit_mm_root:"*) ;;
        *) export PYTHONPATH="$_beit_mm_root${PYTHONPATH:+:$PYTHONPATH}" ;;
    esac
    echo "beit_mm: venv $_beit_mm_venv, PYTHONPATH starts with $_beit_mm_root" >&2
else
    echo "beit_mm: tools/setup_env.sh failed; see its output above" >&2
fi
unset _beit_mm_root _beit_mm_venv
