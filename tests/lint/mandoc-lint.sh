#!/bin/bash
# Lint suite: checks one man page with "mandoc -Tlint -Wwarning".
# Exit 0 when clean, 77 (skip) when mandoc is not installed, 1 otherwise.
set -euo pipefail

if (($# != 1)); then
	echo "usage: $0 MANPAGE" >&2
	exit 2
fi
page=$1

if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc is not installed (Debian package mandoc)"
	exit 77
fi
if [[ ! -f $page ]]; then
	echo "FAIL: $page does not exist"
	exit 1
fi

echo "mandoc -Tlint -Wwarning $page"
rc=0
mandoc -Tlint -Wwarning "$page" || rc=$?
if ((rc != 0)); then
	echo "FAIL: mandoc reported problems in $page (exit status $rc)"
	exit 1
fi
echo "OK: $page"
