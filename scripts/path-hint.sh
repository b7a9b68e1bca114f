#!/usr/bin/env bash
# Print where the scripts installed zlops and how to put it on PATH (sourced by bootstrap, demo and test).
zlops_path_hint() {
  local bin
  bin="$(pwd -P)/.venv/bin"
  printf '\nzlops is installed in %s (not on your PATH yet). To use `zlops` in this shell:\n' "$bin"
  printf '  . %s/activate        # or: export PATH=%s:$PATH\n' "$bin" "$bin"
}
