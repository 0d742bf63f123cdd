#!/bin/sh
# The .deb of this build (cpack -G DEB, as `make deb` runs it; it packs what is built and
# builds nothing): its control fields and maintainer scripts, its files unpacked into a
# scratch root (dpkg-deb -x), the binary there run on the packaged config (printed, and serving
# the default model), and the unit checked by systemd-analyze verify where that exists.
#   deb_contents.sh BUILD_DIR SOURCE_DIR
set -eu
name=deb_contents
# shellcheck source=tests/package/harness.sh
. "$(dirname "$0")/harness.sh"

(cd "$build" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack failed"; }
version=$("$build/bin/tandem" --version | sed -n 's/^tandem //p')
deb="$work/out/tandem_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || fail "no $deb (cpack made: $(ls "$work/out"))"
echo "deb_contents: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"

# Control: name, version, and the run-time libraries dpkg-shlibdeps found for the binary.
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = tandem ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', the binary says $version"
case "$(field Description)" in *";"*) fail "Description holds a CMake list separator: $(field Description)" ;; esac
depends=$(field Depends)
for lib in libcaf-core0.17 libspdlog libyaml-cpp libboost-json1.81 libxxhash libstdc++6 adduser; do
  case "$depends" in *"$lib"*) ;; *) fail "Depends lacks $lib: $depends" ;; esac
done
dpkg-deb --control "$deb" "$work/control"
grep -qx /etc/tandem/tandem.yaml "$work/control/conffiles" || fail "/etc/tandem/tandem.yaml is not a conffile"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s"
  sh -n "$work/control/$s" || fail "$s does not parse"
done

# Files: the binary, libraries, headers, CMake package, pkg-config file, unit, user, config,
# data; nothing outside /usr and /etc, and no CUDA library (hosts never need CUDA).
dpkg-deb -x "$deb" "$work/root"
root="$work/root"
# The libraries as this build makes them: static, or shared (-DTANDEM_SHARED_LIBS=ON) with
# their SONAME links and the development link.
shared=$(sed -n 's/^TANDEM_SHARED_LIBS:BOOL=//p' "$build/CMakeCache.txt")
libs=""
for l in engine runtime net; do
  case "$shared" in
    ON | TRUE | 1) soname=$(objdump -p "$build"/*/libtandem_$l.so | sed -n 's/^ *SONAME *//p')
      [ -n "$soname" ] || fail "libtandem_$l.so has no SONAME"
      libs="$libs usr/lib/libtandem_$l.so usr/lib/$soname usr/lib/libtandem_$l.so.$version" ;;
    *) libs="$libs usr/lib/libtandem_$l.a" ;;
  esac
done
for f in usr/bin/tandem $libs \
  usr/include/tandem/api.h usr/include/tandem/atoms.h usr/include/tandem/remote.h usr/include/tandem/runtime.h \
  usr/include/tandem/tenants.h usr/include/tandem/response_store_limits.h \
  usr/include/tandem/version.h usr/include/tandem/net/server.h usr/lib/cmake/Tandem/TandemConfig.cmake \
  usr/lib/cmake/Tandem/TandemConfigVersion.cmake usr/lib/cmake/Tandem/TandemTargets.cmake \
  usr/lib/cmake/Tandem/FindCAF.cmake usr/lib/pkgconfig/tandem.pc usr/lib/systemd/system/tandem.service \
  usr/lib/sysusers.d/tandem.conf etc/tandem/tandem.yaml usr/share/tandem/tandem.example.yaml \
  usr/share/tandem/tenants.example.yaml usr/share/tandem/chat/index.html usr/share/tandem/fetch-model.sh \
  usr/share/doc/tandem/embedding.md usr/share/doc/tandem/deploy.md; do
  [ -e "$root/$f" ] || fail "the package lacks /$f"
done
case "$shared" in
  ON | TRUE | 1)
    grep -q '^libtandem_engine ' "$work/control/shlibs" || fail "the package declares no shlibs for its libraries"
    grep -q ldconfig "$work/control/triggers" || fail "the package does not trigger ldconfig" ;;
esac
[ -x "$root/usr/bin/tandem" ] && [ -x "$root/usr/share/tandem/fetch-model.sh" ] || fail "not executable"
outside=$(cd "$root" && find . -mindepth 1 -maxdepth 1 ! -name usr ! -name etc)
[ -z "$outside" ] || fail "files outside /usr and /etc: $outside"
if (cd "$root" && find . -name '*gpu*' | grep .); then fail "a GPU library is packaged"; fi
if grep -rl -e "$build" -e "$src" "$root/usr/lib/cmake" "$root/usr/lib/pkgconfig" "$root/etc" \
  "$root/usr/lib/systemd"; then
  fail "packaged text files name the build or source tree"
fi
sh "$src/tests/package/check_installed_headers.sh" "$root/usr/include"

# The unit: the command, restarts, its own user, loopback only.
unit="$root/usr/lib/systemd/system/tandem.service"
for line in 'ExecStart=/usr/bin/tandem serve --config /etc/tandem/tandem.yaml' 'Restart=on-failure' \
  'User=tandem' 'IPAddressDeny=any' 'IPAddressAllow=localhost' 'WantedBy=multi-user.target'; do
  grep -qx "$line" "$unit" || fail "tandem.service lacks '$line'"
done
grep -q '^u tandem ' "$root/usr/lib/sysusers.d/tandem.conf" || fail "sysusers.d/tandem.conf makes no user tandem"

# The packaged binary reads the packaged config (no model is loaded for --print-config).
"$root/usr/bin/tandem" --version | grep -qx "tandem $version" || fail "tandem --version"
"$root/usr/bin/tandem" serve --config "$root/etc/tandem/tandem.yaml" --print-config >"$work/effective.yaml" ||
  fail "the packaged config does not load"
for line in 'model: default' 'host: 127.0.0.1' 'port: 8080' 'chat_page: ""' 'shutdown_timeout: 30'; do
  grep -qx "$line" "$work/effective.yaml" || fail "effective config lacks '$line': $(cat "$work/effective.yaml")"
done

# The packaged binary serves the default model on the packaged config, from a folder with no
# examples/ in it: the chat page is the package's share/tandem one, found beside the binary,
# and SIGTERM ends it gracefully with status 0.
mkdir "$work/run"
: >"$work/serve.log"  # before the server: the background shell opens it only later
(cd "$work/run" && exec "$root/usr/bin/tandem" serve --config "$root/etc/tandem/tandem.yaml" --port 0 --threads 2) \
  >"$work/serve.log" 2>&1 &
server=$!
await_port "$work/serve.log" 'tandem: ready:' 's|^tandem: listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' \
  "the packaged binary"
grep -q "chat page at /: $root/usr/share/tandem/chat/index.html" "$work/serve.log" ||
  { cat "$work/serve.log"; fail "the packaged binary did not find the packaged chat page"; }
curl -sS --max-time 10 "http://127.0.0.1:$port/" | grep -qi '<html' || fail "GET / is not the chat page"
expect_completion 4
stop_server "$work/serve.log" "the packaged binary"
echo "deb_contents: the packaged binary served the chat page and a completion on the packaged config"

if command -v systemd-analyze >/dev/null 2>&1; then
  # The unit as packaged, but for the binary's place: verify wants ExecStart's file to exist on
  # this machine, where the package is unpacked, not installed.
  mkdir "$work/unit"
  sed "s|^ExecStart=/usr/bin/tandem |ExecStart=$root/usr/bin/tandem |" "$unit" >"$work/unit/tandem.service"
  systemd-analyze verify "$work/unit/tandem.service" >"$work/verify.log" 2>&1 ||
    { cat "$work/verify.log"; fail "systemd-analyze verify refuses tandem.service"; }
  if [ -s "$work/verify.log" ]; then
    cat "$work/verify.log"
    fail "systemd-analyze verify warns about tandem.service"
  fi
  echo "deb_contents: systemd-analyze verify: tandem.service ok"
else
  echo "deb_contents: systemd-analyze is not installed here: the unit's check is skipped"
fi
echo "deb_contents: ok"
