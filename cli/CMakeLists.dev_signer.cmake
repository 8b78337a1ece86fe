# cotal_devsigner: the only JWT-minting code (cli/dev_signer.c). Linked by
# the CLI and the tests, never by the daemon. Included from cli/CMakeLists.txt.
add_library(cotal_devsigner STATIC ${CMAKE_CURRENT_LIST_DIR}/dev_signer.c)
target_include_directories(cotal_devsigner PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(cotal_devsigner PUBLIC cotal_creds)
