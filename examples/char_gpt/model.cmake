# char_gpt's model as a static library, shared by the example, tests/examples/
# test_char_gpt_model.cpp and bench/gpt.cpp. Included from each of those directories: the first
# include defines the target (a directory that already defined char_gpt_model keeps its own).
if(TARGET char_gpt_model)
  return()
endif()
add_library(char_gpt_model STATIC ${CMAKE_CURRENT_LIST_DIR}/model.cpp)
target_link_libraries(char_gpt_model PUBLIC nabla PRIVATE nabla_warnings)
target_include_directories(char_gpt_model PUBLIC ${PROJECT_SOURCE_DIR})
