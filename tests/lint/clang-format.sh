#!/bin/bash
# Lint suite: "clang-format --dry-run -Werror" over every tracked .c and .h
# file, run from the source root given as $1 (the .clang-format there
# applies). Exit 0 when all are formatted, 77 (skip) when this is not a git
# checkout or git/clang-format is missing, 1 otherwise.
set -euo pipefail

root=${1:-$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../..}
cd "$root"

for tool in git clang-format; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed"
		exit 77
	fi
done
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "SKIP: $PWD is not a git checkout"
	exit 77
fi

files=()
while IFS= read -r -d '' f; do
	files+=("$f")
done < <(git ls-files -z -- '*.c' '*.h')

if ((${#files[@]} == 0)); then
	echo "OK: no tracked .c or .h files"
	exit 0
fi

echo "clang-format $(clang-format --version | sed 's/.*version //')" \
	"--dry-run -Werror over ${#files[@]} tracked files"
if ! clang-format --dry-run -Werror -- "${files[@]}"; then
	echo "FAIL: files differ from .clang-format;" \
		"fix with: clang-format -i \$(git ls-files '*.c' '*.h')"
	exit 1
fi
echo "OK: ${#files[@]} files formatted"
