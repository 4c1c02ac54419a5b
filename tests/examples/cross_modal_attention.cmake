# cross_modal_attention (examples/cross_modal_attention; Fashion-MNIST from setup.sh): the scene
# generator and the attention metric, the smoke runs of both directions, stop-then-resume,
# determinism, --ask, and bad input. Included from tests/CMakeLists.txt when the examples build.
add_executable(test_cross_modal_attention examples/test_cross_modal_attention.cpp)
target_link_libraries(test_cross_modal_attention PRIVATE cross_modal_attention_lib
                      Catch2::Catch2WithMain nabla_warnings)
target_include_directories(test_cross_modal_attention PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(test_cross_modal_attention PRIVATE ${NABLA_TEST_OPT_FLAGS})
catch_discover_tests(test_cross_modal_attention PROPERTIES LABELS examples
                     ENVIRONMENT "OMP_NUM_THREADS=2")

set(cma ${PROJECT_BINARY_DIR}/examples/cross_modal_attention/cross_modal_attention)
set(cma_out ${CMAKE_CURRENT_BINARY_DIR}/runs/cross_modal_attention)
add_test(NAME example_cross_modal_attention_smoke COMMAND ${cma} --smoke --out ${cma_out})
add_test(NAME example_cross_modal_attention_image2text_smoke
  COMMAND ${cma} --smoke --direction image2text --out ${cma_out}_image2text)
add_test(NAME example_cross_modal_attention_resume
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/examples_resume.sh ${cma})
add_test(NAME example_cross_modal_attention_determinism
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/examples_determinism.sh
          $<TARGET_FILE:safetensors_equal> ${cma} --threads 2)
# --ask reads the smoke run's checkpoint (a fixture).
add_test(NAME example_cross_modal_attention_ask
  COMMAND ${cma} --smoke --ask "What is at top left?" --scene 3 --out ${cma_out})
# Bad input: a checkpoint of the other --direction, an unknown word, a missing data file.
add_test(NAME example_cross_modal_attention_other_direction
  COMMAND sh -c "d=$(mktemp -d) && $0 --smoke --out $d --stop-after 1 >/dev/null \
                 && $0 --smoke --out $d --resume --direction image2text 2>&1; rm -rf $d" ${cma})
add_test(NAME example_cross_modal_attention_unknown_word
  COMMAND ${cma} --smoke --ask "where is the hat ?" --out ${cma_out}_unknown)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fashion-missing)
add_test(NAME example_cross_modal_attention_missing_data
  COMMAND ${cma} --smoke --data-dir ${CMAKE_CURRENT_BINARY_DIR}/fashion-missing
          --out ${cma_out}_missing)
set_tests_properties(example_cross_modal_attention_smoke example_cross_modal_attention_image2text_smoke
  example_cross_modal_attention_resume
  PROPERTIES LABELS examples PASS_REGULAR_EXPRESSION "RESULT example=cross_modal_attention|resume: identical")
set_tests_properties(example_cross_modal_attention_smoke PROPERTIES FIXTURES_SETUP cma_checkpoint)
set_tests_properties(example_cross_modal_attention_determinism PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "determinism: identical")
set_tests_properties(example_cross_modal_attention_ask PROPERTIES LABELS examples
  FIXTURES_REQUIRED cma_checkpoint
  PASS_REGULAR_EXPRESSION "question: what is at top left \\?\nanswer: [a-z-]+\npredicted: [a-z -]+ \\([01]\\.[0-9]+\\)")
set_tests_properties(example_cross_modal_attention_other_direction PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "error: cross_modal_attention: .*checkpoint.safetensors was written by a '--direction text2image [^']*' model and this run is '--direction image2text [^']*': --direction differs")
set_tests_properties(example_cross_modal_attention_unknown_word PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "error: question \"where is the hat \\?\": unknown word \"hat\" \\(known words: ")
set_tests_properties(example_cross_modal_attention_missing_data PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "error: .*fashion-missing/train-images-idx3-ubyte.gz: cannot open")
