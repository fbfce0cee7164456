# Install rules and the Debian package (issue #21): scripts/package.sh runs
# cpack on a release build; scripts/test-package.sh installs the result.
#
#   /usr/bin/ductus, /usr/bin/ductusctl
#   /lib/systemd/system/ductus.service        packaging/ductus.service
#   /etc/ductus/ductus.env (a conffile)       the service's environment
#   /var/lib/ductus/                          what the engine writes
#   /usr/share/doc/ductus/                    README, architecture, examples/,
#                                             reference/ (docs/reference), copyright
#                                             (packaging/copyright, DEP-5),
#                                             changelog.Debian.gz (packaging/changelog),
#                                             ductus-docs.zip (the docs site, read
#                                             offline: scripts/docs.sh)
#   /usr/share/man/man1/*.1.gz                ductus reference man: a page per program
#                                             and command
#   /usr/share/ductus/schemas/                ductus types: the project files' JSON Schemas
#   /usr/share/lintian/overrides/ductus       packaging/lintian-overrides
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
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/reference/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/reference
        FILES_MATCHING PATTERN "*.md")
install(FILES ${CMAKE_SOURCE_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The docs site as a zip to read offline (its index.html opens from disk,
# search included), built and link-checked by scripts/docs.sh, which
# scripts/package.sh runs first with --out <build>/docs.
set(DUCTUS_DOCS_ZIP ${CMAKE_BINARY_DIR}/ductus-docs-${PROJECT_VERSION}.zip)
install(CODE "
  if(NOT EXISTS \"${DUCTUS_DOCS_ZIP}\")
    message(FATAL_ERROR \"no ${DUCTUS_DOCS_ZIP}: scripts/docs.sh --out ${CMAKE_BINARY_DIR}/docs \"
                        \"writes it (scripts/package.sh runs it)\")
  endif()
")
install(FILES ${DUCTUS_DOCS_ZIP} DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME ductus-docs.zip)
# lintian's overrides, each with its reason (scripts/test-package.sh fails
# on any other warning or error).
install(FILES ${CMAKE_SOURCE_DIR}/packaging/lintian-overrides DESTINATION share/lintian/overrides
        RENAME ductus)

# Written at install time by the binary just built (the man pages and the
# schemas, from its own parsers and tables) and compressed as Debian wants
# them: gzip -9n, no name or time inside, so a rebuild is the same bytes.
set(DUCTUS_GENERATED ${CMAKE_BINARY_DIR}/package-files)
install(CODE "
  file(REMOVE_RECURSE \"${DUCTUS_GENERATED}\")
  execute_process(COMMAND \"${CMAKE_BINARY_DIR}/ductus\" reference man \"${DUCTUS_GENERATED}/man\"
                  COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND \"${CMAKE_BINARY_DIR}/ductus\" types --out \"${DUCTUS_GENERATED}/schemas\"
                  COMMAND_ERROR_IS_FATAL ANY)
  file(GLOB pages \"${DUCTUS_GENERATED}/man/*.1\")
  execute_process(COMMAND gzip -9n \${pages} COMMAND_ERROR_IS_FATAL ANY)
  file(COPY \"${CMAKE_SOURCE_DIR}/packaging/changelog\" DESTINATION \"${DUCTUS_GENERATED}\")
  file(RENAME \"${DUCTUS_GENERATED}/changelog\" \"${DUCTUS_GENERATED}/changelog.Debian\")
  execute_process(COMMAND gzip -9n \"${DUCTUS_GENERATED}/changelog.Debian\" COMMAND_ERROR_IS_FATAL ANY)
")
install(DIRECTORY ${DUCTUS_GENERATED}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        FILES_MATCHING PATTERN "*.1.gz")
install(DIRECTORY ${DUCTUS_GENERATED}/schemas/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ductus/schemas)
install(FILES ${DUCTUS_GENERATED}/changelog.Debian.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})

# `make install` and cpack build only what they install (scripts/package.sh
# builds ductus and ductusctl first), not every test.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ductus)
set(CPACK_PACKAGE_VENDOR "Ductus")
set(CPACK_PACKAGE_CONTACT "Ductus maintainers <maintainers@ductus.example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "healthcare integration engine (HL7 v2, MLLP, HTTP, files)")
# Lines of at most 80 characters (lintian: extended-description-line-too-long).
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "Receives HL7 v2 over MLLP, HTTP requests, files and scheduled runs, stores\n"
    "every message in PostgreSQL before acknowledging it, runs the interface's\n"
    "JavaScript on it in a confined V8 worker, and delivers it in order per key,\n"
    "at least once.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# changelog.Debian's newest entry is this package's version.
file(STRINGS ${CMAKE_SOURCE_DIR}/packaging/changelog DUCTUS_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT DUCTUS_CHANGELOG_TOP MATCHES "^ductus \\(${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}\\) ")
  message(FATAL_ERROR "packaging/changelog begins `${DUCTUS_CHANGELOG_TOP}`, not an entry for "
                      "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}: add one")
endif()
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
