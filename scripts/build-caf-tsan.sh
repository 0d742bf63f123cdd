#!/usr/bin/env bash
# CAF 0.17.6 (Debian's own source tarball) built with -fsanitize=thread into PREFIX, for
# `make sanitize`. The CAF that Debian packages is not instrumented: ThreadSanitizer cannot see
# the synchronisation inside libcaf_core (mailbox hand-offs, reference counts), so every
# message a test sends shows up as a race between its sender and its receiver. With an
# instrumented CAF the actor tests run with no suppressions. Idempotent; about 15 minutes on
# one core the first time.
#
#   scripts/build-caf-tsan.sh PREFIX
set -euo pipefail

prefix=$(realpath -m "${1:?usage: build-caf-tsan.sh PREFIX}")
[[ -f "$prefix/lib/libcaf_core.so" && -f "$prefix/lib/libcaf_io.so" ]] && exit 0

url=http://deb.debian.org/debian/pool/main/a/actor-framework/actor-framework_0.17.6.orig.tar.gz
sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
work="$prefix.src"
mkdir -p "$work"
tarball="$work/caf-0.17.6.tar.gz"
if ! echo "$sha256  $tarball" | sha256sum -c --status 2>/dev/null; then
  echo "build-caf-tsan: fetching $url"
  curl -fsSL -o "$tarball" "$url"
  echo "$sha256  $tarball" | sha256sum -c --status || { echo "build-caf-tsan: checksum mismatch for $url" >&2; exit 1; }
fi
src="$work/actor-framework-0.17.6"
rm -rf "$src"
tar -xzf "$tarball" -C "$work"
# GCC 12's headers no longer bring <limits> in transitively (Debian patches the same line).
sed -i '0,/#include <cstddef>/s//#include <cstddef>\n#include <limits>/' "$src/libcaf_io/caf/io/network/receive_buffer.hpp"

cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCAF_NO_EXAMPLES=ON -DCAF_NO_UNIT_TESTS=ON -DCAF_NO_OPENSSL=ON -DCAF_NO_OPENCL=ON -DCAF_NO_PYTHON=ON \
  -DCAF_NO_TOOLS=ON -DCAF_NO_MEM_MANAGEMENT=ON -DCAF_NO_COMPILER_CHECK=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" >/dev/null
cmake --build "$work/build" -j "${JOBS:-$(nproc)}"
cmake --install "$work/build" >/dev/null
echo "build-caf-tsan: CAF with ThreadSanitizer in $prefix"
