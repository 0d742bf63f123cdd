# `make deb` (cpack -G DEB in the build folder): one package, tandem_<version>_<arch>.deb,
# with everything cmake/TandemInstall.cmake installs, under /usr (config in /etc/tandem).
# Depends: what dpkg-shlibdeps finds the binary needs, and adduser for its postinst; the
# development packages a host needs to build against the headers are Suggests.
set(TANDEM_PACKAGE_MAINTAINER "Tandem <tandem@localhost>" CACHE STRING "The .deb's Maintainer field")

set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${TANDEM_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM inference server and embeddable runtime on CAF")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "Tandem serves GGUF language models over an OpenAI-compatible HTTP API, SSE and WebSocket, and "
       "embeds in C++ applications built on the C++ Actor Framework (find_package(Tandem)).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS adduser)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "libcaf-dev, libboost1.81-dev, libboost-json1.81-dev, libboost-system1.81-dev, libspdlog-dev, libfmt-dev, "
    "libyaml-cpp-dev, libpcre2-dev, libxxhash-dev, libpng-dev, libturbojpeg0-dev, libwebp-dev, pkg-config")
string(REPLACE ";" "" CPACK_DEBIAN_PACKAGE_SUGGESTS "${CPACK_DEBIAN_PACKAGE_SUGGESTS}")
configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/conffiles ${PROJECT_BINARY_DIR}/deploy/debian/conffiles COPYONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/deploy/debian/conffiles ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
if(TANDEM_SHARED_LIBS)
  # dpkg-shlibdeps finds the binary's libtandem_*.so in the build tree; the package declares
  # them (shlibs) and runs ldconfig through its trigger (cpack adds ldconfig calls only to
  # maintainer scripts it writes itself, and these are ours).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/engine ${PROJECT_BINARY_DIR}/actors
      ${PROJECT_BINARY_DIR}/net)
  set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
  list(APPEND CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/triggers)
endif()

# cpack installs what is built and builds nothing (nor does `cmake --build --target install`):
# the package test runs beside other tests on the same build, and `make deb` / `make install`
# build first.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

include(CPack)
