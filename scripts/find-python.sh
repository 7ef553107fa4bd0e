#!/usr/bin/env bash
# Prints the path of a CPython interpreter of version $1 (e.g. 3.12), or
# nothing. Looks at pyenv's versions, then PATH.
v="$1"
if command -v pyenv >/dev/null 2>&1; then
  for p in $(pyenv versions --bare 2>/dev/null | grep -E "^${v//./\\.}\.[0-9]+$" | sort -V -r); do
    exe="$(pyenv root)/versions/$p/bin/python$v"
    [ -x "$exe" ] && { echo "$exe"; exit 0; }
  done
fi
for d in "$HOME/.pyenv/versions"/$v.*; do
  [ -x "$d/bin/python$v" ] && { echo "$d/bin/python$v"; exit 0; }
done
command -v "python$v" 2>/dev/null || true
