#!/bin/sh
# A host project built against an installed Tandem: installs this build into a scratch prefix,
# builds a copy of examples/embed there as a CMake project of its own (find_package(Tandem),
# nothing of the source or build tree within reach), runs the examples on the default model
# (embed_http answered over real HTTP, embed_remote across CAF's middleman), and links a
# program through pkg-config.
#   embed_out_of_tree.sh BUILD_DIR SOURCE_DIR
set -eu
name=embed_out_of_tree
# shellcheck source=tests/package/harness.sh
. "$(dirname "$0")/harness.sh"
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install failed"; }
sh "$src/tests/package/check_installed_headers.sh" "$prefix/include" --compile

cp -R "$src/examples/embed" "$work/embed-src"
cmake -S "$work/embed-src" -B "$work/embed-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$work/configure.log" ||
  { cat "$work/configure.log"; fail "configuring the host project failed"; }
found=$(sed -n 's/^Tandem_DIR:PATH=//p' "$work/embed-build/CMakeCache.txt")
[ "$found" = "$prefix/lib/cmake/Tandem" ] || fail "find_package(Tandem) found '$found', not the scratch prefix"
cmake --build "$work/embed-build" -j1 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building failed"; }
# Compiled and linked from the prefix and the system only.
if grep -e "$src" -e "$build" "$work/embed-build/compile_commands.json" \
  "$work/embed-build"/CMakeFiles/embed_*.dir/link.txt; then
  fail "the host project's compile or link lines name the Tandem tree"
fi
echo "embed_out_of_tree: built against $found"

"$work/embed-build/embed_example" >"$work/embed_example.log" 2>&1 || { cat "$work/embed_example.log"; fail "embed_example failed"; }
cat "$work/embed_example.log"
grep -Eq '^embed_example: chat=(stop|length) story=abort$' "$work/embed_example.log" || fail "embed_example's summary line is missing"

"$work/embed-build/embed_remote" >"$work/embed_remote.log" 2>&1 || { cat "$work/embed_remote.log"; fail "embed_remote failed"; }
cat "$work/embed_remote.log"
grep -Eq '^embed_remote: chat=(stop|length) story=abort$' "$work/embed_remote.log" || fail "embed_remote's summary line is missing"

# The log exists before the server starts (the background shell opens it only later).
: >"$work/embed_http.log"
"$work/embed-build/embed_http" default 0 >"$work/embed_http.log" 2>&1 &
server=$!
await_port "$work/embed_http.log" '^embed_http: Tandem .* serving on http://127.0.0.1:[0-9]+$' \
  's|^embed_http: Tandem .* serving on http://127.0.0.1:\([0-9]*\)$|\1|p' embed_http
curl -sS --max-time 10 "http://127.0.0.1:$port/v1/models" >"$work/models.json"
grep -q '"embedded"' "$work/models.json" || fail "/v1/models does not list 'embedded': $(cat "$work/models.json")"
expect_completion 8
echo "embed_out_of_tree: embed_http answered: $(cat "$work/completion.json")"
stop_server "$work/embed_http.log" embed_http
grep -q '^embed_http: stopped$' "$work/embed_http.log" || fail "embed_http did not say it stopped"

# Without CMake: pkg-config's flags compile and link a program that calls into the runtime
# library (static, so its own dependencies must come from the .pc file's Libs and Requires).
cat >"$work/pc.cpp" <<'CPP'
#include <tandem/runtime.h>
#include <tandem/version.h>
#include <cstdio>
int main() {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);  // a symbol of libtandem_runtime, which pulls in CAF's
  tandem::runtime_config rc;
  std::printf("pkg-config: Tandem %s, default model '%s'\n", TANDEM_VERSION_STRING, rc.model.c_str());
}
CPP
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs tandem)
incdir=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=includedir tandem)
[ "$(cd "$incdir" && pwd -P)" = "$(cd "$prefix/include" && pwd -P)" ] || fail "pkg-config's includedir is $incdir"
# shellcheck disable=SC2086
c++ -std=c++20 "$work/pc.cpp" $flags -o "$work/pc" || fail "compiling with pkg-config's flags failed: $flags"
LD_LIBRARY_PATH="$prefix/lib" "$work/pc"  # (shared libraries: the prefix is not on the loader's path)
echo "embed_out_of_tree: ok"
