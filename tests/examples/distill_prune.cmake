# examples/distill and examples/prune_langid, end to end on --smoke. Each trains its smoke
# teacher / checkpoint first (by running vit_fashion_mnist / transformer_langid) in a fresh
# directory, then runs its comparison.
add_test(NAME example_distill_smoke
  COMMAND sh -c "d=$(mktemp -d) && $0 --smoke --threads 1 --out $d/out --teacher-dir $d/teacher \
                 2>&1 && ls $d/out/accuracy.png $d/out/accuracy.svg $d/out/results.csv; rm -rf $d"
          ${ex}/distill/distill)
set_tests_properties(example_distill_smoke PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "RESULT example=distill teacher_accuracy=[0-9.]+ teacher_params=[0-9]+ student_params=[0-9]+ alone_mean=.*accuracy.svg")
add_test(NAME example_distill_bad_alpha COMMAND ${ex}/distill/distill --smoke --alpha 1.5
  --teacher-dir ${CMAKE_CURRENT_BINARY_DIR}/runs/no-such-teacher-needed)
set_tests_properties(example_distill_bad_alpha PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "--alpha must be in \\[0, 1\\], got 1.5")
add_test(NAME example_prune_langid_smoke
  COMMAND sh -c "d=$(mktemp -d) && $0 --smoke --threads 1 --out $d/out --langid-dir $d/langid \
                 2>&1 && ls $d/out/sparsity.png $d/out/heads.svg $d/out/results.csv; rm -rf $d"
          ${ex}/prune_langid/prune_langid)
set_tests_properties(example_prune_langid_smoke PROPERTIES LABELS examples
  PASS_REGULAR_EXPRESSION "magnitude  90%: sparsity after fine-tune 0.900.*heads removed per layer 3: .*RESULT example=prune_langid accuracy_dense=.*heads.svg")
