# Runs at install time (cmake --install, cpack): fills in the service unit and the example
# server config with the paths of this install, then installs them.
#
#   prefix      config file                    unit
#   /usr        /etc/tandem/tandem.yaml        /usr/lib/systemd/system/tandem.service
#   other P     P/etc/tandem/tandem.yaml       P/lib/systemd/system/tandem.service
#
# (GNUInstallDirs' rule for sysconfdir.) DESTDIR, which cpack sets, is applied by file(INSTALL).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_sysconfdir /etc)
else()
  set(_sysconfdir "${CMAKE_INSTALL_PREFIX}/etc")
endif()
set(TANDEM_BINARY "${CMAKE_INSTALL_PREFIX}/${TANDEM_INSTALL_BINDIR}/tandem")
set(TANDEM_CONFIG_FILE "${_sysconfdir}/tandem/tandem.yaml")

# One work folder per destination: two installs at once (CTest runs the package tests side by
# side) never write each other's files.
string(MD5 _key "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(_work "${TANDEM_DEPLOY_WORK_DIR}/${_key}")
configure_file("${TANDEM_DEPLOY_SOURCE_DIR}/tandem.service.in" "${_work}/tandem.service" @ONLY)
configure_file("${TANDEM_DEPLOY_SOURCE_DIR}/tandem.yaml.in" "${_work}/tandem.yaml" @ONLY)

file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE FILES "${_work}/tandem.service")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${TANDEM_INSTALL_DATADIR}/tandem" TYPE FILE
     FILES "${_work}/tandem.yaml" RENAME tandem.example.yaml)
# The config may come to hold API keys: not readable by everyone (the .deb's postinst gives
# it to the tandem group, which the service runs in). An operator's edited file is kept.
if(EXISTS "$ENV{DESTDIR}${TANDEM_CONFIG_FILE}")
  message(STATUS "Kept: $ENV{DESTDIR}${TANDEM_CONFIG_FILE} (the new example: share/tandem/tandem.example.yaml)")
else()
  file(INSTALL DESTINATION "${_sysconfdir}/tandem" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ
       FILES "${_work}/tandem.yaml")
endif()
