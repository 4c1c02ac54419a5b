# nabla-serve (examples/serve): the batcher and request checks without HTTP, then the real server
# on a free loopback port with a checkpoint that transformer_langid --smoke writes (a fixture),
# and its page in headless chromium (skipped, with a message, when chromium is missing).
add_executable(test_serve ${CMAKE_CURRENT_LIST_DIR}/test_batcher.cpp)
target_link_libraries(test_serve PRIVATE nabla_serve Catch2::Catch2WithMain nabla_warnings)
target_compile_options(test_serve PRIVATE ${NABLA_TEST_OPT_FLAGS})
catch_discover_tests(test_serve PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2" TIMEOUT 120)

set(serve_run ${CMAKE_CURRENT_BINARY_DIR}/runs/serve_lid)
add_test(NAME serve_checkpoint
  COMMAND ${PROJECT_BINARY_DIR}/examples/transformer_langid/transformer_langid --smoke --threads 1
          --out ${serve_run})
set_tests_properties(serve_checkpoint PROPERTIES FIXTURES_SETUP serve_checkpoint TIMEOUT 300
                     LABELS examples)
add_test(NAME serve_http
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/serve_http.py
          $<TARGET_FILE:nabla-serve> ${serve_run}/checkpoint.safetensors)
add_test(NAME serve_page
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/serve_page.py
          $<TARGET_FILE:nabla-serve> ${serve_run}/checkpoint.safetensors
          ${CMAKE_CURRENT_BINARY_DIR}/runs/serve_page.png)
set_tests_properties(serve_http serve_page PROPERTIES FIXTURES_REQUIRED serve_checkpoint
                     TIMEOUT 240 LABELS examples SKIP_RETURN_CODE 77)

# --model vit: the same server and batcher on a vit_fashion_mnist --smoke checkpoint, and its
# page (a drawing on the canvas) in headless chromium.
set(serve_vit_run ${CMAKE_CURRENT_BINARY_DIR}/runs/serve_vit)
add_test(NAME serve_vit_checkpoint
  COMMAND ${PROJECT_BINARY_DIR}/examples/vit_fashion_mnist/vit_fashion_mnist --smoke --threads 1
          --out ${serve_vit_run})
set_tests_properties(serve_vit_checkpoint PROPERTIES FIXTURES_SETUP serve_vit_checkpoint
                     TIMEOUT 300 LABELS examples)
add_test(NAME serve_vit
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/serve_vit.py $<TARGET_FILE:nabla-serve>
          ${serve_vit_run}/checkpoint.safetensors)
add_test(NAME serve_page_vit
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/serve_page_vit.py $<TARGET_FILE:nabla-serve>
          ${serve_vit_run}/checkpoint.safetensors ${CMAKE_CURRENT_BINARY_DIR}/runs/serve_page_vit.png)
set_tests_properties(serve_vit PROPERTIES FIXTURES_REQUIRED serve_vit_checkpoint TIMEOUT 120
                     LABELS examples)
set_tests_properties(serve_page_vit PROPERTIES FIXTURES_REQUIRED serve_vit_checkpoint TIMEOUT 240
                     LABELS examples SKIP_RETURN_CODE 77)

# --help lists the flags; a missing checkpoint is one clear error line, not a crash.
add_test(NAME serve_help COMMAND nabla-serve --help)
set_tests_properties(serve_help PROPERTIES PASS_REGULAR_EXPRESSION "--max-wait-ms.*--long-input")
add_test(NAME serve_missing_checkpoint
  COMMAND nabla-serve --checkpoint ${CMAKE_CURRENT_BINARY_DIR}/no/such/checkpoint.safetensors)
set_tests_properties(serve_missing_checkpoint PROPERTIES WILL_FAIL TRUE TIMEOUT 30)
add_test(NAME serve_missing_checkpoint_message
  COMMAND nabla-serve --checkpoint ${CMAKE_CURRENT_BINARY_DIR}/no/such/checkpoint.safetensors)
set_tests_properties(serve_missing_checkpoint_message PROPERTIES TIMEOUT 30
  PASS_REGULAR_EXPRESSION "--checkpoint .*no/such/checkpoint.safetensors does not exist")
