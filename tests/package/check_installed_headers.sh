#!/bin/sh
# Every header under an installed include/ folder is self-contained within what is installed:
# its own includes name only other installed tandem/ headers, CAF, Boost or the standard
# library, and nothing but tandem/ (and tandem/net/) is installed there. With --compile, each
# header is also compiled on its own against that folder alone (a few seconds per CAF header).
#   check_installed_headers.sh PREFIX/include [--compile]
set -eu
inc=$1
compile=${2:-}
fail() { echo "check_installed_headers: $*" >&2; exit 1; }
[ -f "$inc/tandem/runtime.h" ] || fail "no $inc/tandem/runtime.h"
extra=$(cd "$inc" && find . -mindepth 1 -maxdepth 1 ! -name tandem)
[ -z "$extra" ] || fail "installed beside tandem/: $extra"
dirs=$(cd "$inc/tandem" && find . -mindepth 1 -type d ! -name net)
[ -z "$dirs" ] || fail "folders under tandem/ other than net/: $dirs"
count=0
for h in $(cd "$inc" && find tandem -type f | sort); do
  count=$((count + 1))
  case "$h" in *.h) ;; *) fail "not a header: $h" ;; esac
  # Each include with its opening delimiter: "x or <x.
  grep -E '^[[:space:]]*#[[:space:]]*include' "$inc/$h" | sed -E 's/^[^"<]*(["<][^">]+)[">].*/\1/' | while read -r dep; do
    case "$dep" in
      ?tandem/*) [ -f "$inc/${dep#?}" ] || fail "$h includes ${dep#?}, which is not installed" ;;
      \<caf/* | \<boost/*) ;;
      \<*/*) fail "$h includes ${dep#?} (neither an installed header nor CAF, Boost or the standard library)" ;;
      \<*) ;;
      *) fail "$h includes \"${dep#?}\" (quoted: an internal header)" ;;
    esac
  done
  if [ "$compile" = --compile ]; then
    echo "#include <$h>" | c++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$inc" -x c++ - ||
      fail "$h does not compile on its own with -I$inc"
  fi
done
how="include only installed headers, CAF, Boost and std"
[ "$compile" = --compile ] && how="$how, and each compiles on its own"
echo "check_installed_headers: $count headers in $inc $how"
