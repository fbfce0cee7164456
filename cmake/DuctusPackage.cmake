# Install rules and the Debian package (issue #21): scripts/package.sh runs
# cpack on a release build; scripts/test-package.sh installs the result.
#
#   /usr/bin/ductus, /usr/bin/ductusctl
#   /lib/systemd/system/ductus.service        packaging/ductus.service
#   /etc/ductus/ductus.env (a conffile)       the service's environment
#   /var/lib/ductus/                          what the engine writes
#   /usr/share/doc/ductus/                    README, architecture, examples/
#
# The system user `ductus` and the folders' owners come from
# packaging/postinst.

include(GNUInstallDirs)

# The build's binaries find libnode.so.108 in .deps (cmake/FindV8.cmake);
# installed ones must use the system's, from Debian's libnode108, so they
# carry no RUNPATH at all.
set_target_properties(ductus ductusctl PROPERTIES INSTALL_RPATH "")

install(TARGETS ductus ductusctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/packaging/ductus.service DESTINATION /lib/systemd/system)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/ductus.env DESTINATION /etc/ductus)
install(DIRECTORY DESTINATION /var/lib/ductus)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/architecture.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The examples, without what `ductus dev` wrote into them.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        PATTERN "out" EXCLUDE)

# `make install` and cpack build only what they install (scripts/package.sh
# builds ductus and ductusctl first), not every test.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ductus)
set(CPACK_PACKAGE_VENDOR "Ductus")
set(CPACK_PACKAGE_CONTACT "Ductus maintainers <ductus@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "healthcare integration engine (HL7 v2, MLLP, HTTP, files)")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "Receives HL7 v2 over MLLP, HTTP requests, files and scheduled runs, stores every message "
    "in PostgreSQL before acknowledging it, runs the interface's JavaScript on it in a confined "
    "V8 worker, and delivers it in order per key, at least once.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# The libraries' packages come from dpkg-shlibdeps, except libnode.so.108:
# the build links the copy extracted into .deps (no package owns it here),
# so it is named by hand; it must be Debian's Node 18, whose V8 the build's
# headers describe. adduser: postinst makes the system user.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${V8_LIBRARY_DIR}")
# tdsodbc: FreeTDS's ODBC driver, which db() on SQL Server loads by its path
# (the link to unixODBC itself is found by shlibdeps).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libnode108 (>= 18.19), adduser, tdsodbc")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "postgresql (>= 15)")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_SOURCE_DIR}/packaging/conffiles;${CMAKE_SOURCE_DIR}/packaging/postinst;${CMAKE_SOURCE_DIR}/packaging/prerm;${CMAKE_SOURCE_DIR}/packaging/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/package)
include(CPack)
