# --checkpoint-layers (issue 22, gradient checkpointing) on transformer_langid and
# vit_fashion_mnist: a smoke run with dropout on gives bitwise the same losses, metrics and
# parameters as without the flag. Included from tests/CMakeLists.txt when the examples build.
set(same_run ${CMAKE_CURRENT_SOURCE_DIR}/examples/same_run_with_flag.sh)
add_test(NAME example_transformer_langid_checkpoint_layers
  COMMAND ${same_run} $<TARGET_FILE:safetensors_equal>
          ${PROJECT_BINARY_DIR}/examples/transformer_langid/transformer_langid --checkpoint-layers
          --threads 2 --dropout 0.1)
add_test(NAME example_vit_fashion_mnist_checkpoint_layers
  COMMAND ${same_run} $<TARGET_FILE:safetensors_equal>
          ${PROJECT_BINARY_DIR}/examples/vit_fashion_mnist/vit_fashion_mnist --checkpoint-layers
          --threads 2 --dropout 0.1)
set_tests_properties(example_transformer_langid_checkpoint_layers
  example_vit_fashion_mnist_checkpoint_layers
  PROPERTIES LABELS examples PASS_REGULAR_EXPRESSION "same run: --checkpoint-layers gives identical")
