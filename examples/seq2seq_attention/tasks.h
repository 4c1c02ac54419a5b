// The two tasks of seq2seq_attention as (source string, target symbols) pairs: synthetic dates
// to ISO form here, and grapheme to phoneme on the CMU Pronouncing Dictionary
// (examples/common/g2p_data.h).
#pragma once
#include <cstdint>

#include "examples/common/g2p_data.h"

namespace nabla::examples::seq2seq {

// The pairs, the CMU dictionary, the target vocabulary and the scores live in
// examples/common/g2p_data.h, shared with transformer_g2p.
using examples::Dataset;
using examples::default_cmu_dir;
using examples::edit_distance;
using examples::load_cmu;
using examples::Pair;
using examples::SymbolVocab;

// Dates drawn from a Generator seeded with `seed`, in seven human-readable formats -> ISO
// "yyyy-mm-dd". Test dates are those whose source text hashes to 0 mod 10, so no source is in
// both splits.
Dataset make_dates(int64_t n_train, int64_t n_test, uint64_t seed);

}  // namespace nabla::examples::seq2seq
