# Space provisioning library (WIRE.md §3), included from cli/CMakeLists.txt.
add_library(cotal_provision STATIC ${CMAKE_CURRENT_LIST_DIR}/provision.c
  ${CMAKE_CURRENT_LIST_DIR}/provision_diff.c ${CMAKE_CURRENT_LIST_DIR}/provision_sched.c)
target_link_libraries(cotal_provision PUBLIC cotal_wire PkgConfig::NATS PkgConfig::JANSSON)
