# What `cmake --install` (and `make install`, `make deb`) puts where, and the CMake package a
# host finds with find_package(Tandem CONFIG). Included from the top level once every target
# exists. Paths are relative to the prefix (default /usr/local; /usr in the .deb):
#
#   bin/tandem                            the server and command line
#   lib/libtandem_{engine,runtime,net}.a  the libraries (engine: internal, needed to link);
#                                         .so.MAJOR.MINOR with -DTANDEM_SHARED_LIBS=ON
#   include/tandem/*.h                    the public API (the list below; nothing else)
#   include/tandem/net/server.h           the HTTP front (net/server.h)
#   lib/cmake/Tandem/                     TandemConfig.cmake, targets Tandem::runtime, ::net
#   lib/pkgconfig/tandem.pc               for builds without CMake
#   lib/systemd/system/tandem.service     the service (deploy/; paths filled in at install)
#   lib/sysusers.d/tandem.conf            its system user
#   etc/tandem/tandem.yaml                the server config (/etc/tandem when the prefix is /usr)
#   share/tandem/                         chat page, tenants example, fetch-model.sh
#
# The CUDA libraries (tandem_gpu*) are linked into bin/tandem and not installed: the package
# never makes a host depend on CUDA (docs/embedding.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TANDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Tandem)

# The generated version header, and tandem/net/server.h as a host sees it: in the build tree
# a forward to net/server.h (one file, so no double definitions), installed as the file itself.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${PROJECT_BINARY_DIR}/include/tandem/version.h @ONLY)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/include/tandem/net/server.h
     CONTENT "// Build tree only: the installed tandem/net/server.h is net/server.h itself.\n#pragma once\n#include \"net/server.h\"\n")
target_include_directories(tandem_engine PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
target_include_directories(tandem_runtime PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(tandem_net PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# The names a host links, the same in this tree (examples/embed builds both ways).
foreach(lib engine runtime net)
  set_target_properties(tandem_${lib} PROPERTIES EXPORT_NAME ${lib})
  add_library(Tandem::${lib} ALIAS tandem_${lib})
endforeach()

# The installed binary finds libraries outside the system's paths (CUDA's cuBLAS) where it
# was linked against them, and shared Tandem libraries beside it in any prefix.
set_target_properties(tandem PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
if(TANDEM_SHARED_LIBS)
  # While MAJOR is 0 a MINOR step may break the API, and so the ABI: it is in the SONAME.
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(TANDEM_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  else()
    set(TANDEM_SOVERSION ${PROJECT_VERSION_MAJOR})
  endif()
  set_target_properties(tandem_engine tandem_runtime tandem_net PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${TANDEM_SOVERSION})
  set_target_properties(tandem PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  # Each library finds the others beside it: a RUNPATH serves only the object that carries it,
  # so the host's own does not reach libtandem_engine through libtandem_runtime.
  set_target_properties(tandem_engine tandem_runtime tandem_net PROPERTIES INSTALL_RPATH "$ORIGIN")
endif()
install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tandem_engine tandem_runtime tandem_net EXPORT TandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION ${TANDEM_CMAKE_DIR})

# The public API: an installed header includes only these, CAF and the standard library
# (tests/package/check_installed_headers.sh checks it).
set(TANDEM_PUBLIC_HEADERS api.h atoms.h remote.h response_store_limits.h runtime.h tenants.h)
list(TRANSFORM TANDEM_PUBLIC_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/tandem/)
install(FILES ${TANDEM_PUBLIC_HEADERS} ${PROJECT_BINARY_DIR}/include/tandem/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem)
install(FILES ${PROJECT_SOURCE_DIR}/net/server.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tandem/net)

# 0.y.z: any minor step may break the API (semantic versioning), so a host asking for 0.1
# gets 0.1.*; from 1.0 on, any 1.*.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(TANDEM_COMPATIBILITY SameMinorVersion)
else()
  set(TANDEM_COMPATIBILITY SameMajorVersion)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TandemConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/TandemConfig.cmake INSTALL_DESTINATION ${TANDEM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/TandemConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${TANDEM_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/cmake/TandemConfig.cmake ${PROJECT_BINARY_DIR}/cmake/TandemConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake DESTINATION ${TANDEM_CMAKE_DIR})

# The .pc file finds its prefix from where it lies, so the same file serves any prefix.
file(RELATIVE_PATH TANDEM_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tandem.pc.in ${PROJECT_BINARY_DIR}/cmake/tandem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/tandem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The operator's pieces. The unit and the example config name the binary and the config file
# by absolute path, which depends on the prefix of that install (/usr/local for
# `make install`, /usr for the .deb), so they are filled in at install time. (The binary finds
# the chat page beside itself, in ../share/tandem/chat/.)
install(FILES ${PROJECT_SOURCE_DIR}/examples/chat/index.html DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/chat)
install(FILES ${PROJECT_SOURCE_DIR}/config/tenants.example.yaml DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/fetch-model.sh DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/tandem.sysusers DESTINATION lib/sysusers.d RENAME tandem.conf)
install(FILES ${PROJECT_SOURCE_DIR}/docs/embedding.md ${PROJECT_SOURCE_DIR}/docs/deploy.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(CODE "
  set(TANDEM_DEPLOY_SOURCE_DIR \"${PROJECT_SOURCE_DIR}/deploy\")
  set(TANDEM_DEPLOY_WORK_DIR \"${PROJECT_BINARY_DIR}/deploy\")
  set(TANDEM_INSTALL_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(TANDEM_INSTALL_DATADIR \"${CMAKE_INSTALL_DATADIR}\")
  include(\"${PROJECT_SOURCE_DIR}/cmake/TandemInstallDeploy.cmake\")
")

include(TandemPackage)
